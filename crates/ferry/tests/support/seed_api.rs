//! The fake Kubernetes API server inside the seed lab (for the `Source::Api` setups).

use std::net::Ipv4Addr;

use ferry_lab::spec::ClientSpec;
use ferry_lab::{Host, Lab};
use ferry_testkit::FakeApiServer;

/// The fake API server's host on the lab's LAN (a machine outside the cluster, as a
/// control-plane load balancer would be).
pub const APISERVER: &str = "apiserver";
pub const APISERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 1, 1, 200);
pub const APISERVER_PORT: u16 = 6443;

/// Starts the fake API server inside the lab: its listening socket is created in the
/// `apiserver` host's namespace (a socket stays in the namespace it was made in), and served
/// from a thread of this process. Nothing is added to the root namespace.
pub fn start_apiserver(lab: &mut Lab) -> FakeApiServer {
    lab.add_client(&ClientSpec {
        name: APISERVER.into(),
        ip: APISERVER_IP,
        pod_routes: false,
    })
    .expect("apiserver host");
    let ns = lab
        .netns_of(&Host::client(APISERVER))
        .expect("apiserver netns")
        .to_owned();
    let listener = ferry_lab::netns::run_in(&ns, || {
        std::net::TcpListener::bind((APISERVER_IP, APISERVER_PORT))
    })
    .expect("enter the apiserver namespace")
    .expect("listen in the lab");
    FakeApiServer::start(listener).expect("start the fake apiserver")
}
