//! Which IP families this node can program: the shared half of upstream kube-proxy's
//! `platformCheckSupported` (each mode adds its tool's check, see
//! `NodeMode::supports`).
//!
//! kube-proxy runs dual-stack when both families' proxiers can work (their tool and kernel
//! support are present), else single-stack; it does not look at the node's addresses. Ferry
//! does the same per family: IPv6 is programmed when the kernel has IPv6 in this network
//! namespace (`/proc/net/if_inet6` exists: it is absent with `ipv6.disable=1`) and the mode's
//! tool accepts it.

use std::process::Command;

use ferry_model::IpFamily;

/// Why a family cannot be programmed here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unsupported(pub String);

/// Whether the kernel has `family` in this network namespace.
pub(crate) fn kernel_has(family: IpFamily) -> Result<(), Unsupported> {
    match family {
        IpFamily::V4 => Ok(()),
        IpFamily::V6 if std::path::Path::new("/proc/net/if_inet6").exists() => Ok(()),
        IpFamily::V6 => Err(Unsupported(
            "the kernel has no IPv6 in this network namespace (/proc/net/if_inet6 is absent)"
                .into(),
        )),
    }
}

/// Whether `program args…` runs and succeeds.
pub(crate) fn succeeds(program: &str, args: &[&str]) -> Result<(), Unsupported> {
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
