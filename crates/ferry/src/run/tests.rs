//! The servers' start: `bindAddressHardFail`.

use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::*;

/// Starts the servers of `config` with its health server on a port another socket holds.
async fn start_on_a_busy_port(
    hard_fail: bool,
) -> (
    anyhow::Result<Vec<tokio::task::JoinHandle<()>>>,
    watch::Sender<bool>,
) {
    let busy = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let config = Config {
        healthz_bind_address: Some(busy.local_addr().expect("address")),
        metrics_bind_address: None,
        kube_proxy: crate::config::KubeProxyConfiguration {
            bind_address_hard_fail: hard_fail,
            ..crate::config::KubeProxyConfiguration::empty()
        },
        ..Config::default()
    };
    let metrics = Metrics::new(entry(config.mode).sync_failures);
    let health = ProxyHealth::new(Duration::from_secs(60));
    let (status, _requests) = mpsc::channel(1);
    let (stop, stopped) = watch::channel(false);
    let started = start_servers(&config, &health, &metrics, status, &stopped).await;
    drop(busy);
    (started, stop)
}

#[tokio::test]
async fn a_busy_server_port_is_fatal_with_bind_address_hard_fail() {
    let (started, _stop) = start_on_a_busy_port(true).await;
    let err = started.expect_err("the port is busy");
    let text = format!("{err:#}");
    assert!(
        text.contains("healthz server cannot listen on 127.0.0.1:")
            && text.contains("--bind-address-hard-fail"),
        "{text}"
    );
}

#[tokio::test]
async fn a_busy_server_port_is_retried_without_bind_address_hard_fail() {
    let (started, stop) = start_on_a_busy_port(false).await;
    let servers = started.expect("not fatal");
    assert_eq!(servers.len(), 1);
    // Still trying; it ends when Ferry stops.
    stop.send(true).expect("send");
    for server in servers {
        server.await.expect("ended");
    }
}
