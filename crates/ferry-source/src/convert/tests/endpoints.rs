//! `convert::endpoints`: mirroring legacy Endpoints into slices.

use ferry_model::fixtures::{ip, mk_endpoint, mk_endpoint_with};
use ferry_model::{EndpointPort, EndpointSlice, IpFamily, Protocol, ServiceName};
use k8s_openapi::api::core::v1::Endpoints;
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::{endpoints, MAX_ENDPOINTS_PER_SUBSET};

const EP: &str = "Endpoints dev/web";

fn mk(subsets: Value) -> Endpoints {
    from_json(json!({
        "apiVersion": "v1", "kind": "Endpoints",
        "metadata": {"name": "web", "namespace": "dev"},
        "subsets": subsets,
    }))
}

fn http(port: u16) -> EndpointPort {
    EndpointPort {
        name: "http".into(),
        port,
        protocol: Protocol::Tcp,
    }
}

#[test]
fn ready_and_not_ready_addresses_are_mirrored_with_node_names() {
    let object = mk(json!([{
        "addresses": [{"ip": "192.168.169.166", "nodeName": "k8s-node2"}],
        "notReadyAddresses": [{"ip": "192.168.169.168", "nodeName": "k8s-node2"}],
        "ports": [{"name": "http", "port": 56010, "protocol": "TCP"}],
    }]));
    let want = EndpointSlice {
        namespace: "dev".into(),
        name: "web-mirror-0".into(),
        service: ServiceName::new("dev", "web"),
        family: IpFamily::V4,
        ports: vec![http(56010)],
        endpoints: vec![
            mk_endpoint("192.168.169.166", "k8s-node2"),
            mk_endpoint_with("192.168.169.168", "k8s-node2", false, true, false),
        ],
        trigger_time: None,
    };
    assert_eq!(endpoints(&object), Ok(vec![want]));
}

#[test]
fn one_slice_per_family_and_port_set() {
    let object = mk(json!([
        {"addresses": [{"ip": "10.0.0.1"}, {"ip": "fd00::1"}], "ports": [{"name": "http", "port": 80}]},
        {"addresses": [{"ip": "10.0.0.2"}], "ports": [{"name": "http", "port": 80}]},
        {"addresses": [{"ip": "10.0.0.3"}], "ports": [{"name": "dns", "port": 53, "protocol": "UDP"}]},
    ]));
    let slices = endpoints(&object).expect("valid");
    let summary: Vec<(String, IpFamily, Vec<_>, Vec<_>)> = slices
        .iter()
        .map(|s| {
            let ports = s
                .ports
                .iter()
                .map(|p| (p.name.clone(), p.port, p.protocol))
                .collect();
            let addrs = s.endpoints.iter().map(|e| e.address).collect();
            (s.name.to_string(), s.family, ports, addrs)
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            (
                "web-mirror-0".into(),
                IpFamily::V4,
                vec![("http".into(), 80, Protocol::Tcp)],
                vec![ip("10.0.0.1"), ip("10.0.0.2")]
            ),
            (
                "web-mirror-1".into(),
                IpFamily::V6,
                vec![("http".into(), 80, Protocol::Tcp)],
                vec![ip("fd00::1")]
            ),
            (
                "web-mirror-2".into(),
                IpFamily::V4,
                vec![("dns".into(), 53, Protocol::Udp)],
                vec![ip("10.0.0.3")]
            ),
        ]
    );
}

#[test]
fn skip_mirror_label_gives_no_slices() {
    let mut object = mk(json!([{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}]}]));
    object.metadata.labels = Some(
        [(
            "endpointslice.kubernetes.io/skip-mirror".to_owned(),
            "true".to_owned(),
        )]
        .into(),
    );
    assert_eq!(endpoints(&object), Ok(Vec::new()));
    object.metadata.labels = Some(
        [(
            "endpointslice.kubernetes.io/skip-mirror".to_owned(),
            "false".to_owned(),
        )]
        .into(),
    );
    assert_eq!(endpoints(&object).map(|s| s.len()), Ok(1));
}

#[test]
fn subsets_beyond_the_mirroring_limit_are_truncated() {
    let addresses: Vec<Value> = (0..=MAX_ENDPOINTS_PER_SUBSET)
        .map(|i| json!({"ip": format!("10.0.{}.{}", i / 256, i % 256)}))
        .collect();
    let object = mk(json!([{"addresses": addresses, "ports": [{"port": 80}]}]));
    let slices = endpoints(&object).expect("valid");
    assert_eq!(slices[0].endpoints.len(), MAX_ENDPOINTS_PER_SUBSET);
}

#[test]
fn bad_ready_address_is_rejected() {
    let object =
        mk(json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "bogus"}], "ports": [{"port": 80}]}]));
    assert_rejected(
        endpoints(&object),
        EP,
        "subsets[0].addresses[1].ip",
        "\"bogus\"",
    );
}

#[test]
fn bad_not_ready_address_is_rejected() {
    let object = mk(json!([{}, {"notReadyAddresses": [{"ip": ""}], "ports": [{"port": 80}]}]));
    assert_rejected(
        endpoints(&object),
        EP,
        "subsets[1].notReadyAddresses[0].ip",
        "must be an IP",
    );
}

#[test]
fn bad_port_is_rejected() {
    let object = mk(json!([{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 0}]}]));
    assert_rejected(endpoints(&object), EP, "subsets[0].ports[0].port", "got 0");
}

#[test]
fn duplicate_port_name_is_rejected() {
    let object =
        mk(json!([{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"port": 80}, {"port": 81}]}]));
    assert_rejected(
        endpoints(&object),
        EP,
        "subsets[0].ports[1].name",
        "duplicate port name",
    );
}

#[test]
fn hostname_and_target_ref_are_mirrored() {
    let object = mk(json!([{
        "addresses": [{"ip": "192.168.169.166", "hostname": "url-0",
                       "targetRef": {"kind": "Pod", "namespace": "dev", "name": "url-0"}}],
        "ports": [{"name": "http", "port": 56010, "protocol": "TCP"}],
    }]));
    let slices = endpoints(&object).expect("valid");
    let ep = &slices[0].endpoints[0];
    assert_eq!(
        ep.target_ref().map(ToString::to_string).as_deref(),
        Some("Pod dev/url-0")
    );
    assert_eq!(
        ep.target.as_ref().and_then(|t| t.hostname.as_deref()),
        Some("url-0")
    );
}
