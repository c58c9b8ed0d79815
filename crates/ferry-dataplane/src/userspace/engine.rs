//! The one proxy engine of a node's mode, shared by its appliers (one per IP family) and read
//! by the metrics server. Created on first use, on the agent's runtime.

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use tokio::runtime::Handle;

use super::{PortMetrics, ProxyConfig, UserspaceProxy};
use crate::mode::ModeOptions;

/// Where a mode's proxy engine lives: nothing until a sync needs it.
#[derive(Clone)]
pub(crate) struct Engine {
    slot: Arc<Slot>,
}

struct Slot {
    runtime: Option<Handle>,
    config: ProxyConfig,
    proxy: OnceLock<Mutex<UserspaceProxy>>,
}

impl Engine {
    /// The engine of a mode opened with `options` (no runtime: it never serves).
    pub(crate) fn new(options: &ModeOptions) -> Self {
        let config = ProxyConfig {
            udp_idle_timeout: options.udp_idle_timeout,
            ..ProxyConfig::default()
        };
        Self {
            slot: Arc::new(Slot {
                runtime: options.runtime.clone(),
                config,
                proxy: OnceLock::new(),
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

impl std::fmt::Debug for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stats").finish_non_exhaustive()
    }
}
