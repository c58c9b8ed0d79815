use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use serde_json::Value;

use super::*;
use crate::serve::testing::get;

fn servers(health: &ProxyHealth) -> ServiceHealthServers {
    ServiceHealthServers::listening_on(health.clone(), IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A port that is free now (bound then released), for a server that must use a fixed port.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("probe a free port")
        .port()
}

fn wanted(entries: &[(&str, u16, usize)]) -> BTreeMap<ServiceName, HealthCheck> {
    entries
        .iter()
        .map(|(name, port, local_endpoints)| {
            (
                ServiceName::new("dev", *name),
                HealthCheck {
                    port: *port,
                    local_endpoints: *local_endpoints,
                },
            )
        })
        .collect()
}

#[test]
fn the_body_is_upstreams_byte_for_byte() {
    assert_eq!(
        body(&ServiceName::new("dev", "web"), 2, true),
        "{\n\t\"service\": {\n\t\t\"namespace\": \"dev\",\n\t\t\"name\": \"web\"\n\t},\n\t\"localEndpoints\": 2,\n\t\"serviceProxyHealthy\": true\n}"
    );
}

#[tokio::test]
async fn servers_answer_by_local_endpoints_and_follow_the_services() {
    let health = ProxyHealth::new(Duration::from_secs(60));
    let mut hc = servers(&health);
    let (web, api) = (free_port(), free_port());
    hc.sync(&wanted(&[("web", web, 2), ("api", api, 0)])).await;
    let open = hc.open();
    assert_eq!(open.len(), 2);
    let web_addr = open[&ServiceName::new("dev", "web")];

    let ok = get(web_addr, "/any/path").await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("content-type"), Some("application/json"));
    assert_eq!(ok.header("x-content-type-options"), Some("nosniff"));
    let v: Value = serde_json::from_str(&ok.body).expect("JSON");
    assert_eq!(v["service"]["namespace"], "dev");
    assert_eq!(v["service"]["name"], "web");
    assert_eq!(v["localEndpoints"], 2);
    assert_eq!(v["serviceProxyHealthy"], true);

    let none = get(open[&ServiceName::new("dev", "api")], "/").await;
    assert_eq!(none.status, 503);
    assert!(none.body.contains("\"localEndpoints\": 0"), "{}", none.body);

    // The endpoints move away from this node: same server, new answer.
    hc.sync(&wanted(&[("web", web, 0), ("api", api, 1)])).await;
    assert_eq!(get(web_addr, "/").await.status, 503);
    assert_eq!(
        get(open[&ServiceName::new("dev", "api")], "/").await.status,
        200
    );

    // The service goes away: its port closes.
    hc.sync(&wanted(&[("api", api, 1)])).await;
    assert_eq!(hc.open().len(), 1);
    assert!(
        std::net::TcpStream::connect(web_addr).is_err(),
        "closed health check still accepts"
    );
    hc.close_all().await;
    assert!(hc.open().is_empty());
}

#[tokio::test]
async fn an_unhealthy_proxy_fails_every_health_check() {
    let health = ProxyHealth::new(Duration::ZERO);
    let mut hc = servers(&health);
    hc.sync(&wanted(&[("web", free_port(), 3)])).await;
    let addr = hc.open()[&ServiceName::new("dev", "web")];
    assert_eq!(get(addr, "/").await.status, 200);
    health.queued_update();
    let r = get(addr, "/").await;
    assert_eq!(r.status, 503);
    assert!(
        r.body.contains("\"serviceProxyHealthy\": false"),
        "{}",
        r.body
    );
    hc.close_all().await;
}

#[tokio::test]
async fn a_port_in_use_is_skipped_and_retried_at_the_next_sync() {
    let health = ProxyHealth::new(Duration::from_secs(60));
    let mut hc = servers(&health);
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = busy.local_addr().expect("addr").port();
    let other = free_port();
    hc.sync(&wanted(&[("web", port, 1), ("api", other, 1)]))
        .await;
    assert_eq!(
        hc.open().keys().map(|n| &*n.name).collect::<Vec<_>>(),
        ["api"],
        "the busy port does not stop the others"
    );
    drop(busy);
    hc.sync(&wanted(&[("web", port, 1), ("api", other, 1)]))
        .await;
    assert_eq!(hc.open().len(), 2);
    hc.close_all().await;
}

#[tokio::test]
async fn a_changed_port_moves_the_server() {
    let health = ProxyHealth::new(Duration::from_secs(60));
    let mut hc = servers(&health);
    let (first, second) = (free_port(), free_port());
    hc.sync(&wanted(&[("web", first, 1)])).await;
    hc.sync(&wanted(&[("web", second, 1)])).await;
    assert_eq!(hc.open()[&ServiceName::new("dev", "web")].port(), second);
    assert!(std::net::TcpStream::connect(("127.0.0.1", first)).is_err());
    hc.close_all().await;
}
