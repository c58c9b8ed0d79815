//! Which IP families this node can program: upstream kube-proxy's `platformCheckSupported`.
//!
//! kube-proxy runs dual-stack when both families' proxiers can work (their tool and kernel
//! support are present), else single-stack; it does not look at the node's addresses. Ferry
//! does the same per family: IPv6 is programmed when the kernel has IPv6 in this network
//! namespace (`/proc/net/if_inet6` exists: it is absent with `ipv6.disable=1`) and the
//! family's tool accepts it: `nft --check` of an `ip6` table, or `ip6tables -t nat -S
//! POSTROUTING` for iptables mode.

use std::process::Command;

use ferry_compile::nft::TABLE;
use ferry_model::IpFamily;

use crate::iptables::Backend;

/// Why a family cannot be programmed here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

fn kernel_has(family: IpFamily) -> Result<(), Unsupported> {
    match family {
        IpFamily::V4 => Ok(()),
        IpFamily::V6 if std::path::Path::new("/proc/net/if_inet6").exists() => Ok(()),
        IpFamily::V6 => Err(Unsupported(
            "the kernel has no IPv6 in this network namespace (/proc/net/if_inet6 is absent)"
                .into(),
        )),
    }
}

fn succeeds(program: &str, args: &[&str]) -> Result<(), Unsupported> {
    match Command::new(program).args(args).output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(Unsupported(format!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))),
        Err(e) => Err(Unsupported(format!("cannot run {program}: {e}"))),
    }
}

/// Whether nftables mode can program `family` (upstream: `knftables.New` checking
/// `nft --check add table <family> kube-proxy`).
pub fn nft_supports(family: IpFamily) -> Result<(), Unsupported> {
    kernel_has(family)?;
    let name = match family {
        IpFamily::V4 => "ip",
        IpFamily::V6 => "ip6",
    };
    succeeds("nft", &["--check", "add", "table", name, TABLE])
}

/// Whether iptables mode can program `family` with `backend`'s tools (upstream:
/// `utiliptables.Present()`).
pub fn iptables_supports(backend: Backend, family: IpFamily) -> Result<(), Unsupported> {
    kernel_has(family)?;
    let program = backend.program_for(family, "");
    succeeds(&program, &["-w", "5", "-t", "nat", "-S", "POSTROUTING"])
}
