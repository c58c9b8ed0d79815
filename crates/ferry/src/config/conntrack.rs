//! `conntrack.*` of the configuration (`--conntrack-*`) as the kernel settings to apply at
//! start-up, with upstream kube-proxy's rules (v1.37): `nf_conntrack_max` is `maxPerCore` ×
//! the machine's CPUs, at least `min` and at most 1 048 576, and nothing when `maxPerCore` is
//! 0 (or unset); a timeout of 0 leaves the kernel's value; `tcpBeLiberal: false` leaves it too.

use ferry_dataplane::sysctls::ConntrackSettings;

use super::kube_proxy::Conntrack;

/// Upstream's cap on the computed `nf_conntrack_max` (many-core machines).
pub const MAX_CAP: u64 = 1_048_576;

/// The settings `c` asks for on a machine with `cpus` CPUs.
pub fn settings(c: &Conntrack, cpus: usize) -> ConntrackSettings {
    let seconds = |d: &super::GoDuration| Some(d.0.as_secs()).filter(|s| *s > 0);
    ConntrackSettings {
        max: max(c, cpus),
        tcp_established_timeout: c.tcp_established_timeout.as_ref().and_then(seconds),
        tcp_close_wait_timeout: c.tcp_close_wait_timeout.as_ref().and_then(seconds),
        tcp_be_liberal: c.tcp_be_liberal,
        udp_timeout: seconds(&c.udp_timeout),
        udp_stream_timeout: seconds(&c.udp_stream_timeout),
    }
}

fn max(c: &Conntrack, cpus: usize) -> Option<u64> {
    let per_core = u64::try_from(c.max_per_core?).ok().filter(|n| *n > 0)?;
    let scaled = per_core.saturating_mul(cpus as u64);
    if scaled > MAX_CAP {
        return Some(MAX_CAP);
    }
    let floor = c.min.and_then(|m| u64::try_from(m).ok()).unwrap_or(0);
    Some(scaled.max(floor))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::GoDuration;

    fn defaults() -> Conntrack {
        let mut kp = crate::config::KubeProxyConfiguration::empty();
        crate::config::kube_proxy::defaults::apply(&mut kp);
        kp.conntrack
    }

    #[test]
    fn upstreams_defaults_on_two_cpus_raise_the_table_to_its_minimum_and_set_the_tcp_timeouts() {
        let s = settings(&defaults(), 2);
        assert_eq!(
            s,
            ConntrackSettings {
                max: Some(131_072),
                tcp_established_timeout: Some(86_400),
                tcp_close_wait_timeout: Some(3_600),
                tcp_be_liberal: false,
                udp_timeout: None,
                udp_stream_timeout: None,
            }
        );
    }

    #[test]
    fn max_per_core_scales_with_the_cpus_up_to_the_cap() {
        let c = defaults();
        assert_eq!(settings(&c, 8).max, Some(262_144));
        assert_eq!(settings(&c, 64).max, Some(MAX_CAP));
    }

    #[test]
    fn zero_leaves_the_kernels_values() {
        let c = Conntrack {
            max_per_core: Some(0),
            min: Some(131_072),
            tcp_established_timeout: Some(GoDuration::from_secs(0)),
            tcp_close_wait_timeout: None,
            tcp_be_liberal: false,
            udp_timeout: GoDuration::from_secs(0),
            udp_stream_timeout: GoDuration::from_secs(0),
        };
        assert_eq!(settings(&c, 2), ConntrackSettings::default());
    }

    #[test]
    fn udp_timeouts_and_liberal_tcp_are_applied_when_set() {
        let c = Conntrack {
            tcp_be_liberal: true,
            udp_timeout: GoDuration::from_secs(45),
            udp_stream_timeout: GoDuration::from_secs(150),
            ..defaults()
        };
        let s = settings(&c, 2);
        assert!(s.tcp_be_liberal);
        assert_eq!((s.udp_timeout, s.udp_stream_timeout), (Some(45), Some(150)));
    }
}
