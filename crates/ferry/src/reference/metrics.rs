//! The metrics reference (`docs/src/reference/metrics.md`): every metric's name, type, labels
//! and help, read from what `/metrics` serves — a fresh [`Metrics`] on which every recording
//! method has been called once (so that every family has a sample showing its labels).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ferry_dataplane::mode::FailureCounter;
use ferry_dataplane::userspace::PortMetrics;
use ferry_dataplane::SyncKind;
use ferry_model::{IpFamily, Protocol, ServiceName, ServicePortName};
use ferry_source::pods::PodKey;
use ferry_source::probe::{Outcome, ProbeBook, ProbeReport};

use super::table::{code, Table};
use crate::metrics::Metrics;
use crate::sync::status::NoLocalEndpoints;
use crate::sync::PendingChanges;

/// One metric family as `/metrics` shows it.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Family {
    /// `# TYPE`: counter, gauge, histogram.
    pub kind: String,
    /// `# HELP`.
    pub help: String,
    /// The labels its samples carry (`le` of histogram buckets left out).
    pub labels: BTreeSet<String>,
    /// How many samples it has.
    pub samples: usize,
}

/// The page.
pub fn page() -> String {
    let families = parse(&exercised().encode());
    let mut out = super::generated_header(
        "Metrics reference",
        "the metrics registry (crates/ferry/src/metrics.rs)",
    );
    out.push_str(INTRO);
    let mut table = Table::new(&["Metric", "Type", "Labels", "From", "Help"]);
    for (name, f) in &families {
        let shown = match f.kind.as_str() {
            "counter" => format!("{name}_total"),
            _ => name.clone(),
        };
        let labels: Vec<String> = f.labels.iter().map(|l| code(l)).collect();
        let from = if name.starts_with("kubeproxy_") {
            "kube-proxy"
        } else if name.starts_with("kubernetes_") {
            "every Kubernetes component"
        } else if name.starts_with("process_") {
            "every Prometheus client"
        } else if name.starts_with("rest_client_") {
            "client-go (every Kubernetes component)"
        } else {
            "Ferry"
        };
        // The encoder ends every help with a period, also one that has its own.
        let help = f
            .help
            .strip_suffix("..")
            .map_or(f.help.clone(), |h| format!("{h}."));
        table.row(vec![
            code(&shown),
            f.kind.clone(),
            labels.join(", "),
            from.to_owned(),
            help,
        ]);
    }
    out.push_str(&table.render());
    out
}

const INTRO: &str = "\
`/metrics` on the metrics server (`metricsBindAddress`, default `127.0.0.1:10249`) serves \
OpenMetrics text. Where Ferry measures what kube-proxy measures, the name, type, labels and \
histogram buckets are kube-proxy's (**From**: kube-proxy), so existing dashboards and alerts keep \
working; Ferry's own metrics are prefixed `ferry_`. `ip_family` is `IPv4` or `IPv6` (the IPv4 \
series exist from the start, the IPv6 ones from the first IPv6 sync); series labelled by `code` \
or `kind` appear with their first event. Sync durations use kube-proxy's buckets (1 ms … 16 s); \
`kubeproxy_sync_proxy_rules_no_local_endpoints_total` is a gauge despite its name, as kube-proxy's. \
The `ferry_userspace_*` series exist for the service ports Ferry's userspace proxy serves: every \
one in the userspace mode, those with a localhost NodePort in the kernel modes. The `process_*` \
metrics are read from `/proc/self` at each scrape, as Prometheus clients export them; Go's \
`go_*` runtime metrics (`go_goroutines`, which kube-proxy's dashboards show) have no honest \
equivalent in a Rust process and are not exported. `rest_client_*` count the API client's \
requests as client-go does (`code` is the HTTP status, or `<error>` when none came; a watch's \
duration ends when it is open). `kubeproxy_iptables_ct_state_invalid_dropped_packets_total` and \
`kubeproxy_iptables_localhost_nodeports_accepted_packets_total` are read at each scrape from the \
nfacct counters `ct_state_invalid_dropped_pkts` and `localhost_nps_accepted_pkts`, which iptables \
mode creates at start; as kube-proxy's, they exist in iptables mode only (no other mode exports \
them), and not at all where the kernel has no nfacct. The second counts the first packet of each \
connection to a localhost NodePort with endpoints, on `[::1]` too (Ferry serves IPv6 localhost \
NodePorts; kube-proxy serves only `127.0.0.1`).

";

/// A registry on which every recording method has run once.
pub fn exercised() -> Metrics {
    let m = Metrics::new(FailureCounter::NftablesSync);
    let now = SystemTime::now();
    let v4 = IpFamily::V4;
    m.sync_queued_for(v4, now);
    m.sync_ran_for(v4, Some(SyncKind::Full), Duration::from_millis(5));
    m.sync_ran_for(v4, Some(SyncKind::Partial), Duration::from_millis(1));
    m.sync_ran_for(v4, None, Duration::from_millis(1));
    m.sync_succeeded_for(v4, now, &["2024-05-01T10:00:00Z".to_owned()]);
    m.changes(&PendingChanges::default());
    m.no_local_endpoints_for(v4, NoLocalEndpoints::default());
    m.healthz(200);
    m.livez(200);
    m.invalid_object("Service");
    m.conntrack_cleaned(v4, Duration::from_millis(1), 1, false);
    m.health_check_servers(1);
    m.follow_probes(probed_once());
    m.serve_fixed_proxy_metrics(vec![proxied_once()]);
    m.serve_fixed_counter_metrics(ferry_dataplane::iptables::COUNTER_METRICS.to_vec(), 3);
    m.table_rules_for(
        v4,
        &[ferry_dataplane::TableRules {
            table: "nat",
            total: 20,
            written: 5,
        }],
    );
    m.api_request(&ferry_source::kube::RequestRecord {
        method: "GET".to_owned(),
        host: "10.1.1.200:6443".to_owned(),
        code: "200".to_owned(),
        duration: Duration::from_millis(3),
    });
    m
}

/// One service port's userspace proxy counters, so the `ferry_userspace_*` families show their
/// labels.
fn proxied_once() -> PortMetrics {
    PortMetrics {
        name: ServicePortName {
            service: ServiceName::new("dev", "web"),
            port: "http".to_owned(),
            protocol: Protocol::Tcp,
        },
        family: IpFamily::V4,
        active: 1,
        connections: 1,
        bytes_to_endpoint: 1,
        bytes_to_client: 1,
        errors: 0,
        dial_failures: 0,
    }
}

/// A probe book with one probe result, so the probe counter shows its labels.
fn probed_once() -> Arc<Mutex<ProbeBook>> {
    let mut book = ProbeBook::default();
    let report = ProbeReport {
        pod: PodKey::new("dev", "web-a"),
        container: "app".into(),
        outcome: Outcome::Success,
        at: SystemTime::UNIX_EPOCH,
        run: 1,
        verdict: None,
        changed: false,
    };
    book.record(&report, &[ServiceName::new("dev", "web")]);
    Arc::new(Mutex::new(book))
}

/// The families of an OpenMetrics text, by name.
pub fn parse(text: &str) -> BTreeMap<String, Family> {
    let mut families: BTreeMap<String, Family> = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_owned()).or_default().kind = kind.to_owned();
        } else if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').unwrap_or((rest, ""));
            families.entry(name.to_owned()).or_default().help = help.to_owned();
        } else if !line.starts_with('#') && !line.is_empty() {
            let name_end = line.find(['{', ' ']).unwrap_or(line.len());
            let sample = &line[..name_end];
            // The longest family name the sample's name starts with (`x_bucket` is `x`'s).
            let family = families
                .keys()
                .filter(|f| sample.starts_with(f.as_str()))
                .max_by_key(|f| f.len())
                .cloned();
            if let Some(f) = family.and_then(|f| families.get_mut(&f)) {
                f.samples += 1;
                f.labels.extend(label_names(&line[name_end..]));
            }
        }
    }
    families
}

/// The label names of a sample's `{a="x",b="y"} value` part.
fn label_names(rest: &str) -> Vec<String> {
    let Some(body) = rest.strip_prefix('{') else {
        return Vec::new();
    };
    let mut names = Vec::new();
    let mut chars = body.chars();
    let mut name = String::new();
    while let Some(c) = chars.next() {
        match c {
            '=' => {
                // Skip the quoted value (with its escapes).
                let _ = chars.next();
                let mut escaped = false;
                for v in chars.by_ref() {
                    match (escaped, v) {
                        (false, '\\') => escaped = true,
                        (false, '"') => break,
                        _ => escaped = false,
                    }
                }
                if name != "le" {
                    names.push(std::mem::take(&mut name));
                }
                name.clear();
            }
            ',' | ' ' => {}
            '}' => break,
            c => name.push(c),
        }
    }
    names
}
