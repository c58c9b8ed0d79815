//! Which IP families this node can program: the shared half of upstream kube-proxy's
//! `platformCheckSupported` (each mode adds its tool's check, see
//! `NodeMode::supports`).
//!
//! kube-proxy runs dual-stack when both families' proxiers can work (their tool and kernel
//! support are present), else single-stack; it does not look at the node's addresses. Ferry
//! does the same per family: IPv6 is programmed when the kernel has IPv6 in this network
//! namespace (`/proc/net/if_inet6` exists: it is absent with `ipv6.disable=1`), IPv6 is not
//! turned off there (`net.ipv6.conf.all.disable_ipv6` is not 1; upstream checks both since
//! 1.34) and the mode's tool accepts it.

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
        IpFamily::V6 => ipv6_usable(
            std::path::Path::new("/proc/net/if_inet6").exists(),
            std::fs::read_to_string("/proc/sys/net/ipv6/conf/all/disable_ipv6")
                .ok()
                .as_deref(),
        ),
    }
}

/// IPv6 from what the kernel shows: whether `/proc/net/if_inet6` exists, and
/// `net.ipv6.conf.all.disable_ipv6` as read (`None`: unreadable, which says nothing).
fn ipv6_usable(if_inet6: bool, disable_ipv6: Option<&str>) -> Result<(), Unsupported> {
    if !if_inet6 {
        return Err(Unsupported(
            "the kernel has no IPv6 in this network namespace (/proc/net/if_inet6 is absent)"
                .into(),
        ));
    }
    if disable_ipv6.map(str::trim) == Some("1") {
        return Err(Unsupported(
            "IPv6 is turned off in this network namespace (net.ipv6.conf.all.disable_ipv6 = 1)"
                .into(),
        ));
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_needs_the_kernels_support_and_disable_ipv6_not_set() {
        assert_eq!(ipv6_usable(true, Some("0\n")), Ok(()));
        assert_eq!(ipv6_usable(true, None), Ok(()));
        let off = ipv6_usable(true, Some("1\n")).expect_err("turned off");
        assert!(off.0.contains("disable_ipv6 = 1"), "{off}");
        let absent = ipv6_usable(false, Some("0\n")).expect_err("no IPv6");
        assert!(
            absent.0.contains("/proc/net/if_inet6 is absent"),
            "{absent}"
        );
    }
}
