//! The one proxy engine of a node's mode, shared by its appliers (one per IP family) and read
//! by the metrics server. Created on first use, on the agent's runtime.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use ferry_model::IpFamily;

use tokio::runtime::Handle;

use super::{PortMetrics, ProxyConfig, UserspaceProxy};

/// Where a mode's proxy engine lives: nothing until a sync needs it.
#[derive(Clone)]
pub(crate) struct Engine {
    slot: Arc<Slot>,
}

struct Slot {
    runtime: Option<Handle>,
    config: ProxyConfig,
    proxy: OnceLock<Mutex<UserspaceProxy>>,
    /// Per family, the service ports its last sync left without a proxy port.
    without_proxy_port: Mutex<BTreeMap<IpFamily, u64>>,
}

impl Engine {
    /// An engine serving on `runtime` (none: it never serves), its UDP associations ending
    /// after `udp_idle_timeout` without a datagram.
    pub(crate) fn new(runtime: Option<Handle>, udp_idle_timeout: Duration) -> Self {
        let config = ProxyConfig {
            udp_idle_timeout,
            ..ProxyConfig::default()
        };
        Self {
            slot: Arc::new(Slot {
                runtime,
                config,
                proxy: OnceLock::new(),
                without_proxy_port: Mutex::default(),
            }),
        }
    }

    /// The proxy, created now if need be; `None` without a runtime to serve on.
    pub(crate) fn get(&self) -> Option<MutexGuard<'_, UserspaceProxy>> {
        let proxy = match self.slot.proxy.get() {
            Some(p) => p,
            None => {
                let handle = self.slot.runtime.clone()?;
                let config = self.slot.config.clone();
                self.slot
                    .proxy
                    .get_or_init(|| Mutex::new(UserspaceProxy::new(config, handle)))
            }
        };
        Some(proxy.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// The proxy if it was ever created.
    pub(crate) fn existing(&self) -> Option<MutexGuard<'_, UserspaceProxy>> {
        let proxy = self.slot.proxy.get()?;
        Some(proxy.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Whether the engine can serve (a runtime was given).
    pub(crate) fn serves(&self) -> bool {
        self.slot.runtime.is_some()
    }

    /// Records how many service ports of `family` the last sync left without a proxy port.
    pub(crate) fn set_without_proxy_port(&self, family: IpFamily, n: usize) {
        let mut counts = self
            .slot
            .without_proxy_port
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        counts.insert(family, u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// The handle the metrics server reads.
    pub(crate) fn stats(&self) -> Stats {
        Stats {
            engine: self.clone(),
        }
    }
}

/// Read access to the counters of a mode's proxy, for the metrics server: every service
/// port's [`PortMetrics`] at the time of the call (none before the proxy serves anything).
#[derive(Clone)]
pub struct Stats {
    engine: Engine,
}

impl Stats {
    /// Every service port's counters now.
    pub fn snapshot(&self) -> Vec<PortMetrics> {
        self.engine
            .existing()
            .map(|p| p.metrics())
            .unwrap_or_default()
    }
}

impl Stats {
    /// Per family synced so far, the service ports without a proxy port now
    /// ([`names::WITHOUT_PROXY_PORT`](super::names::WITHOUT_PROXY_PORT)).
    pub fn without_proxy_port(&self) -> Vec<(IpFamily, u64)> {
        let counts = self.engine.slot.without_proxy_port.lock();
        let counts = counts.unwrap_or_else(|e| e.into_inner());
        counts.iter().map(|(f, n)| (*f, *n)).collect()
    }
}

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats").finish_non_exhaustive()
    }
}
