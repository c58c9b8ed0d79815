//! # ferry-lab: a Kubernetes-like cluster in Linux network namespaces
//!
//! Builds, on one machine, the small cluster of seed experiment 004 so that end-to-end tests
//! (and `ferry lab up/down/curl`) can send real packets through Ferry:
//!
//! * a LAN (10.1.1.0/24): a bridge in its own namespace `<prefix>-lan`, every host attached
//!   with a veth whose host end is `eth0`;
//! * nodes `k8s-master` 10.1.1.12, `k8s-node1` 10.1.1.17 and `k8s-node2` 10.1.1.9, with IP
//!   forwarding, routes to each other's pod CIDR and a default route to the dead-end
//!   10.1.1.1 (so the service range is routable; packets to it vanish);
//! * clients outside the cluster (`client` 10.1.1.100, more with [`Lab::add_client`]);
//! * pods wired calico-style (`eth0` `<podIP>/32`, `default dev eth0`, a proxy-ARP `cali…`
//!   veth and a `/32` route on the node), running an echo server ([`serve_echo`]: the seed's
//!   url-analysis app).
//!
//! Every namespace name carries a prefix unique to the lab value (`fy<pid>x<n>`), so labs can
//! be built concurrently (cargo's parallel tests); nothing is ever added to the root
//! namespace. Dropping the [`Lab`] — also when a test panics — kills its processes and deletes
//! its namespaces; [`Lab::cleanup_stale`] and [`Lab::cleanup_orphans`] remove leftovers of
//! crashed runs. Labs need root.
//!
//! ```no_run
//! use std::net::Ipv4Addr;
//! use ferry_lab::{spec::NODE2, Host, Lab, LabError, PodProgram};
//!
//! // In a test of the `ferry` crate, `ferry` is `env!("CARGO_BIN_EXE_ferry")`.
//! fn demo(ferry: &str) -> Result<(), LabError> {
//!     let mut lab = Lab::seed004()?;
//!     let pod_ip = Ipv4Addr::new(192, 168, 169, 166);
//!     let echo = PodProgram::ferry(ferry);
//!     lab.add_echo_pod(NODE2, "url-analysis-4rt9d", pod_ip, 8080, &echo)?;
//!     let agent = lab.spawn_on_node(NODE2, ferry, ["agent"])?;
//!     let r = lab.curl(&Host::default_client(), "http://10.96.240.122:8080/hello")?;
//!     println!("{r:?}\n{}", agent.log());
//!     println!("{}", lab.exec(NODE2, ["nft", "list", "ruleset"])?);
//!     Ok(())
//! } // dropping `agent` and `lab` stops the agent and deletes every namespace
//! ```
//!
//! Pod programs: a [`PodProgram`] is any command taking `--name N --listen IP:PORT`;
//! [`PodProgram::ferry`] runs `ferry lab-pod`, and this crate ships the `ferry-lab-echo`
//! binary doing the same for tests without the ferry binary (integration tests of this crate
//! use `env!("CARGO_BIN_EXE_ferry-lab-echo")`).
//!
//! Feature `scale`: [`scale`], the other lab, for measurements rather than seed experiments —
//! one node between a client and its pods, the real `ferry run` on it, and a generated
//! cluster of N Services × M endpoints (`ferry-bench-e2e` and `ferry-drills` use it).

pub mod echo;
pub mod http;
pub mod interrupt;
pub mod lab;
pub mod netns;
mod pace;
pub mod pod;
pub mod process;
#[cfg(feature = "scale")]
pub mod scale;
pub mod spec;
pub mod state;
pub mod vm;

pub use echo::{
    echo_body, serve_echo, serve_echo_listener, serve_echo_listener_failing,
    serve_echo_tcp_and_udp, serve_echo_tcp_and_udp_failing, serve_echo_udp,
};
pub use http::{CurlOptions, CurlResult, HttpError, HttpResponse};
pub use lab::{running_as_root, ClientInfo, Host, Lab, LabError, NodeInfo};
pub use netns::NetnsError;
pub use pace::{scaled, time_scale, TIME_SCALE_ENV};
pub use pod::{PodInfo, PodProgram};
pub use process::{LabProcess, ProcessError};
pub use spec::{ClientSpec, LabSpec, NodeSpec};
pub use state::LabState;
