use std::sync::{Arc, Mutex};

use ferry_dataplane::nft::{NftDataplane, NftRunner};
use ferry_dataplane::Error;
use ferry_model::fixtures::*;
use ferry_model::{IpFamily, NodeContext, Object, ServiceType};
use ferry_source::SourceEvent;

use crate::sync::{FamilySync, Syncer};

/// Records every nft script of one family.
#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<Vec<String>>>);

impl NftRunner for Recorder {
    fn run(&mut self, script: &str) -> Result<(), Error> {
        self.0.lock().expect("lock").push(script.to_owned());
        Ok(())
    }
}

fn syncers() -> (Syncer<NftDataplane<Recorder>>, Recorder, Recorder) {
    let (v4, v6) = (Recorder::default(), Recorder::default());
    let make = |family, rec: &Recorder| {
        let ctx = NodeContext {
            node_name: "node-a".into(),
            family,
        };
        let cfg = ferry_compile::CompileConfig {
            family,
            ..Default::default()
        };
        FamilySync::new(ctx, cfg, NftDataplane::with_runner(rec.clone()))
    };
    let s = Syncer::new(vec![make(IpFamily::V4, &v4), make(IpFamily::V6, &v6)]);
    (s, v4, v6)
}

/// `dev/dual` with a ClusterIP in each family and local endpoints in each (one IPv4, two
/// IPv6), as a LoadBalancer with a health-check NodePort; `dev/v4` IPv4 only.
pub(crate) fn objects(with_v6: bool) -> Vec<Object> {
    let mut dual = with_node_port(
        mk_service("dev", "dual", "10.96.0.10", 80),
        30080,
        ferry_model::TrafficPolicy::Local,
    );
    dual.service_type = ServiceType::LoadBalancer;
    dual.health_check_node_port = Some(32000);
    if with_v6 {
        dual.cluster_ips.push(ip("fd00:10:96::10"));
    }
    let v4 = mk_slice(
        "dev",
        "dual",
        8080,
        vec![mk_endpoint("10.244.1.5", "node-a")],
    );
    let mut v6 = mk_slice(
        "dev",
        "dual",
        8080,
        vec![
            mk_endpoint("fd00:10:244:1::5", "node-a"),
            mk_endpoint("fd00:10:244:1::6", "node-a"),
        ],
    );
    v6.family = IpFamily::V6;
    v6.name = "dual-v6".into();
    vec![
        Object::from(dual),
        Object::from(mk_service("dev", "v4", "10.96.0.30", 80)),
        Object::from(v4),
        Object::from(v6),
        Object::from(mk_node("node-a", "10.1.1.9", "10.244.1.0/24")),
    ]
}

#[test]
fn every_family_syncs_its_own_table_from_the_same_events() {
    let (mut s, v4, v6) = syncers();
    assert!(s.handle(SourceEvent::Resync(objects(true))));
    let (state, families) = s.split();
    for family in families {
        family.sync(state, false).expect("sync");
    }
    let v4 = v4.0.lock().expect("lock").join("");
    let v6 = v6.0.lock().expect("lock").join("");
    assert!(
        v4.contains("add table ip ferry") && v4.contains("10.96.0.30"),
        "{v4}"
    );
    assert!(!v4.contains("fd00:"), "{v4}");
    assert!(v6.contains("add table ip6 ferry"), "{v6}");
    assert!(v6.contains("fd00:10:96::10 . tcp . 80"), "{v6}");
    assert!(
        !v6.contains("10.96.0.30"),
        "IPv4-only service in IPv6: {v6}"
    );
}

#[test]
fn health_checks_count_the_family_with_more_local_endpoints() {
    let (mut s, _, _) = syncers();
    s.handle(SourceEvent::Resync(objects(true)));
    let (state, families) = s.split();
    for family in families {
        family.sync(state, false).expect("sync");
    }
    let checks = s.health_checks();
    let hc = checks
        .get(&ferry_model::ServiceName::new("dev", "dual"))
        .expect("health check");
    assert_eq!((hc.port, hc.local_endpoints), (32000, 2));
}
