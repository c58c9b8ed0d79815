//! IPVS mode's settings: the `ipvs:` section of `KubeProxyConfiguration` and kube-proxy's
//! `--ipvs-*` flags (flags override the file). Kept apart from the rest of the configuration:
//! the scheduler goes to the compiler (it is rendered), the rest to the IPVS applier.

use std::time::Duration;

use clap::Args;
use ipnet::IpNet;
use serde_json::{Map, Value};

use ferry_compile::ipvs::Scheduler;
use ferry_dataplane::mode::IpvsOptions;

use super::{parse_cidrs, parse_duration, ConfigError};

/// IPVS mode's effective settings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpvsConfig {
    /// `ipvs.scheduler` (`rr` by default).
    pub scheduler: Scheduler,
    /// Everything the applier takes (timeouts, strictARP, excludeCIDRs).
    pub options: IpvsOptions,
}

/// What the file's `ipvs:` section sets (`None`: not set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IpvsFileConfig {
    scheduler: Option<Scheduler>,
    tcp_timeout: Option<Duration>,
    tcp_fin_timeout: Option<Duration>,
    udp_timeout: Option<Duration>,
    strict_arp: Option<bool>,
    exclude_cidrs: Option<Vec<IpNet>>,
    /// `ipvs.syncPeriod`: used in IPVS mode, as upstream.
    pub sync_period: Option<Duration>,
    /// `ipvs.minSyncPeriod`: used in IPVS mode.
    pub min_sync_period: Option<Duration>,
}

impl IpvsFileConfig {
    /// Parses the `ipvs:` section of `file` (absent or null: nothing set).
    pub fn parse(file: &str, obj: &Map<String, Value>) -> Result<Self, ConfigError> {
        let sec = match obj.get("ipvs") {
            None | Some(Value::Null) => return Ok(Self::default()),
            Some(Value::Object(sec)) => sec,
            Some(other) => {
                return Err(ConfigError::new(
                    format!("{file}: ipvs"),
                    format!("must be an object, got {other}"),
                ))
            }
        };
        let place = |f: &str| format!("{file}: ipvs.{f}");
        let string = |f: &str| -> Result<Option<&str>, ConfigError> {
            match sec.get(f) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s)),
                Some(other) => Err(ConfigError::new(
                    place(f),
                    format!("must be a string, got {other}"),
                )),
            }
        };
        let duration = |f: &str| -> Result<Option<Duration>, ConfigError> {
            string(f)?
                .map(|s| parse_duration(s).map_err(|m| ConfigError::new(place(f), m)))
                .transpose()
        };
        let strict_arp = match sec.get("strictARP") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                return Err(ConfigError::new(
                    place("strictARP"),
                    format!("must be true or false, got {other}"),
                ))
            }
        };
        let exclude_cidrs = match sec.get("excludeCIDRs") {
            None | Some(Value::Null) => None,
            Some(Value::Array(items)) => {
                let mut nets = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let at = format!("{}[{i}]", place("excludeCIDRs"));
                    let s = item
                        .as_str()
                        .ok_or_else(|| ConfigError::new(&at, "must be a string"))?;
                    nets.extend(parse_cidrs(&at, s)?);
                }
                Some(nets)
            }
            Some(other) => {
                return Err(ConfigError::new(
                    place("excludeCIDRs"),
                    format!("must be a list, got {other}"),
                ))
            }
        };
        Ok(Self {
            scheduler: string("scheduler")?
                .map(|s| {
                    s.parse::<Scheduler>()
                        .map_err(|m| ConfigError::new(place("scheduler"), m))
                })
                .transpose()?,
            tcp_timeout: duration("tcpTimeout")?,
            tcp_fin_timeout: duration("tcpFinTimeout")?,
            udp_timeout: duration("udpTimeout")?,
            strict_arp,
            exclude_cidrs,
            sync_period: duration("syncPeriod")?,
            min_sync_period: duration("minSyncPeriod")?,
        })
    }

    /// Sets what the file sets.
    pub fn apply(&self, cfg: &mut IpvsConfig) {
        let o = &mut cfg.options;
        if let Some(v) = self.scheduler {
            cfg.scheduler = v;
        }
        for (from, to) in [
            (self.tcp_timeout, &mut o.tcp_timeout),
            (self.tcp_fin_timeout, &mut o.tcp_fin_timeout),
            (self.udp_timeout, &mut o.udp_timeout),
        ] {
            if let Some(v) = from {
                *to = v;
            }
        }
        if let Some(v) = self.strict_arp {
            o.strict_arp = v;
        }
        if let Some(v) = &self.exclude_cidrs {
            o.exclude_cidrs = v.clone();
        }
    }
}

/// kube-proxy's `--ipvs-*` flags.
#[derive(Debug, Clone, Default, Args)]
pub struct IpvsArgs {
    /// IPVS mode: the scheduler (rr, wrr, lc, wlc, lblc, lblcr, sh, dh, sed, nq, mh).
    #[arg(long, value_name = "NAME")]
    pub ipvs_scheduler: Option<String>,
    /// IPVS mode: idle timeout of established TCP connections (Go duration; 0 leaves the
    /// kernel's).
    #[arg(long, value_name = "DURATION")]
    pub ipvs_tcp_timeout: Option<String>,
    /// IPVS mode: timeout of TCP connections after a FIN.
    #[arg(long = "ipvs-tcpfin-timeout", value_name = "DURATION")]
    pub ipvs_tcpfin_timeout: Option<String>,
    /// IPVS mode: timeout of UDP flows.
    #[arg(long, value_name = "DURATION")]
    pub ipvs_udp_timeout: Option<String>,
    /// IPVS mode: set arp_ignore=1 and arp_announce=2 (kube-ipvs0's addresses are not
    /// announced).
    #[arg(long = "ipvs-strict-arp")]
    pub ipvs_strict_arp: bool,
    /// IPVS mode: CIDRs (comma-separated) whose virtual servers Ferry never deletes.
    #[arg(long, value_name = "CIDRS")]
    pub ipvs_exclude_cidrs: Option<String>,
}

impl IpvsArgs {
    /// Overrides `cfg` with the flags given.
    pub fn apply(&self, cfg: &mut IpvsConfig) -> Result<(), ConfigError> {
        if let Some(s) = &self.ipvs_scheduler {
            cfg.scheduler = s
                .parse()
                .map_err(|m| ConfigError::new("--ipvs-scheduler", m))?;
        }
        let o = &mut cfg.options;
        for (flag, value, slot) in [
            (
                "--ipvs-tcp-timeout",
                &self.ipvs_tcp_timeout,
                &mut o.tcp_timeout,
            ),
            (
                "--ipvs-tcpfin-timeout",
                &self.ipvs_tcpfin_timeout,
                &mut o.tcp_fin_timeout,
            ),
            (
                "--ipvs-udp-timeout",
                &self.ipvs_udp_timeout,
                &mut o.udp_timeout,
            ),
        ] {
            if let Some(d) = value {
                *slot = parse_duration(d).map_err(|m| ConfigError::new(flag, m))?;
            }
        }
        if self.ipvs_strict_arp {
            o.strict_arp = true;
        }
        if let Some(cidrs) = &self.ipvs_exclude_cidrs {
            o.exclude_cidrs = parse_cidrs("--ipvs-exclude-cidrs", cidrs)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(yaml: &str) -> Result<IpvsFileConfig, ConfigError> {
        let v: Value = serde_saphyr::from_str(yaml).expect("yaml");
        let Value::Object(obj) = v else {
            panic!("object")
        };
        IpvsFileConfig::parse("kp.yaml", &obj)
    }

    #[test]
    fn the_file_section_sets_the_ipvs_options() {
        let f = section(
            "ipvs:\n  scheduler: wrr\n  strictARP: true\n  tcpTimeout: 15m\n  udpTimeout: 5s\n  excludeCIDRs: [10.200.0.0/16]\n  syncPeriod: 10s\n",
        )
        .expect("valid");
        let mut cfg = IpvsConfig::default();
        f.apply(&mut cfg);
        assert_eq!(cfg.scheduler, Scheduler::Wrr);
        assert!(cfg.options.strict_arp);
        assert_eq!(cfg.options.tcp_timeout, Duration::from_secs(900));
        assert_eq!(cfg.options.udp_timeout, Duration::from_secs(5));
        assert_eq!(cfg.options.tcp_fin_timeout, Duration::ZERO);
        assert_eq!(cfg.options.exclude_cidrs.len(), 1);
        assert_eq!(f.sync_period, Some(Duration::from_secs(10)));
    }

    #[test]
    fn bad_values_name_the_field() {
        let e = section("ipvs:\n  scheduler: fastest\n").expect_err("bad scheduler");
        assert_eq!(e.place, "kp.yaml: ipvs.scheduler");
        assert!(e.message.contains("fastest"), "{e}");
        let e = section("ipvs:\n  excludeCIDRs: [10.0.0.1]\n").expect_err("bad cidr");
        assert_eq!(e.place, "kp.yaml: ipvs.excludeCIDRs[0]");
    }

    #[test]
    fn flags_override_the_file() {
        let mut cfg = IpvsConfig::default();
        section("ipvs:\n  scheduler: wrr\n")
            .expect("valid")
            .apply(&mut cfg);
        let args = IpvsArgs {
            ipvs_scheduler: Some("sh".into()),
            ipvs_tcpfin_timeout: Some("30s".into()),
            ..IpvsArgs::default()
        };
        args.apply(&mut cfg).expect("valid flags");
        assert_eq!(cfg.scheduler, Scheduler::Sh);
        assert_eq!(cfg.options.tcp_fin_timeout, Duration::from_secs(30));
        let bad = IpvsArgs {
            ipvs_udp_timeout: Some("soon".into()),
            ..IpvsArgs::default()
        };
        let e = bad.apply(&mut cfg).expect_err("bad duration");
        assert_eq!(e.place, "--ipvs-udp-timeout");
    }
}
