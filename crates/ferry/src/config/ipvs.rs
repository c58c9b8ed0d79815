//! IPVS mode's settings, from the `ipvs:` section of the effective `KubeProxyConfiguration`
//! (the file's section with kube-proxy's `--ipvs-*` flags applied over it). Kept apart from
//! the rest of the configuration: the scheduler goes to the compiler (it is rendered), the rest
//! to the IPVS applier.

use ferry_compile::ipvs::Scheduler;
use ferry_dataplane::mode::IpvsOptions;

use super::kube_proxy::Ipvs;
use super::{parse_cidrs, ConfigError};

/// IPVS mode's effective settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpvsConfig {
    /// `ipvs.scheduler` (`rr` by default).
    pub scheduler: Scheduler,
    /// Everything the applier takes (timeouts, strictARP, excludeCIDRs).
    pub options: IpvsOptions,
}

impl IpvsConfig {
    /// Checks and converts the `ipvs:` section; `at` names a field for an error
    /// (`kp.yaml: ipvs.scheduler`).
    pub fn derive(ipvs: &Ipvs, at: impl Fn(&str) -> String) -> Result<Self, ConfigError> {
        let scheduler = ipvs
            .scheduler
            .parse::<Scheduler>()
            .map_err(|m| ConfigError::new(at("ipvs.scheduler"), m))?;
        let mut exclude_cidrs = Vec::new();
        for (i, s) in ipvs.exclude_cidrs.iter().flatten().enumerate() {
            exclude_cidrs.extend(parse_cidrs(&at(&format!("ipvs.excludeCIDRs[{i}]")), s)?);
        }
        Ok(Self {
            scheduler,
            options: IpvsOptions {
                tcp_timeout: ipvs.tcp_timeout.0,
                tcp_fin_timeout: ipvs.tcp_fin_timeout.0,
                udp_timeout: ipvs.udp_timeout.0,
                strict_arp: ipvs.strict_arp,
                exclude_cidrs,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::GoDuration;

    fn at(f: &str) -> String {
        format!("kp.yaml: {f}")
    }

    #[test]
    fn the_section_sets_the_ipvs_options() {
        let ipvs = Ipvs {
            scheduler: "wrr".into(),
            strict_arp: true,
            tcp_timeout: GoDuration::from_secs(900),
            udp_timeout: GoDuration::from_secs(5),
            exclude_cidrs: Some(vec!["10.200.0.0/16".into()]),
            ..Ipvs::default()
        };
        let cfg = IpvsConfig::derive(&ipvs, at).expect("valid");
        assert_eq!(cfg.scheduler, Scheduler::Wrr);
        assert!(cfg.options.strict_arp);
        assert_eq!(cfg.options.tcp_timeout, Duration::from_secs(900));
        assert_eq!(cfg.options.udp_timeout, Duration::from_secs(5));
        assert_eq!(cfg.options.tcp_fin_timeout, Duration::ZERO);
        assert_eq!(cfg.options.exclude_cidrs.len(), 1);
        let empty = IpvsConfig::derive(&Ipvs::default(), at).expect("defaults");
        assert_eq!(empty.scheduler, Scheduler::Rr);
    }

    #[test]
    fn bad_values_name_the_field() {
        let bad = Ipvs {
            scheduler: "fastest".into(),
            ..Ipvs::default()
        };
        let e = IpvsConfig::derive(&bad, at).expect_err("bad scheduler");
        assert_eq!(e.place, "kp.yaml: ipvs.scheduler");
        assert!(e.message.contains("fastest"), "{e}");
        let bad = Ipvs {
            exclude_cidrs: Some(vec!["10.0.0.0/8".into(), "10.0.0.1".into()]),
            ..Ipvs::default()
        };
        let e = IpvsConfig::derive(&bad, at).expect_err("bad cidr");
        assert_eq!(e.place, "kp.yaml: ipvs.excludeCIDRs[1]");
    }
}
