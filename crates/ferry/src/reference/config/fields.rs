//! What each `KubeProxyConfiguration` field means, and what Ferry does with it: the one part
//! of the configuration reference written by hand (upstream's types.go documents the fields;
//! the Go type has no place for Ferry's side). Checked against the code by the reference tests.

/// What Ferry does with a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Ferry uses it.
    Acts,
    /// Set to anything but the default, it is named in one warning and otherwise ignored
    /// ([`crate::config::derive::not_used`]).
    Warns,
    /// Read, checked and shown, used by no mode on this version (the meaning says why).
    Kept,
}

impl Use {
    /// The page's word for it.
    pub fn label(self) -> &'static str {
        match self {
            Use::Acts => "acts",
            Use::Warns => "warns",
            Use::Kept => "kept",
        }
    }
}

use Use::{Acts, Kept, Warns};

/// Every field: dotted path, use, meaning.
pub const FIELDS: &[(&str, Use, &str)] = &[
    ("apiVersion", Acts, "`kubeproxy.config.k8s.io/v1alpha1`, or `v1alpha2` (its fields are read into their v1alpha1 places). Anything else is an error."),
    ("kind", Acts, "`KubeProxyConfiguration`. Anything else is an error (a ConfigMap is read through its `config.conf`)."),
    ("featureGates", Warns, "Feature gates, `Name: true`. The gates kube-proxy 1.37 consults act as there: `KubeProxyIPVS: false` refuses `mode: ipvs`; `KubeProxyNFTablesLocalhostNodePorts: false` turns localhost NodePorts off in nftables mode (unless `nftables.localhostNodePorts` says otherwise); `AllowServiceExternalIPs: false` programs no service's `externalIPs`; `LoggingAlphaOptions: true` allows the split log streams; the locked `MultiCIDRServiceAllocator`, `PreferSameTrafficDistribution` and `NFTablesProxyMode` are refused set `false`, in kube-proxy's words. The [command-line reference](flags.md#feature-gates) lists them. Any other gate is recorded and named in the warning. Flag: `--feature-gates`."),
    ("hostnameOverride", Acts, "This node's name (lower-cased), which selects its Node object and its endpoints. Empty: the hostname. Flag: `--hostname-override`."),
    ("bindAddress", Acts, "This node's primary IP of its family, in place of the Node object's, unless `0.0.0.0` or `::` (the default): NodePorts answer on it by default in nftables, IPVS and userspace modes and with `primary` in `nodePortAddresses`; the firewall's `allowFromNode` uses it. An IPv6 value also makes the servers' default addresses IPv6 (`[::]:10256`, `[::1]:10249`). Flag: `--bind-address`."),
    ("healthzBindAddress", Acts, "The proxy health server (`/healthz`, `/livez`): `IP:PORT`, or an IP (port 10256 added). Port 0 turns it off. Flag: `--healthz-bind-address`."),
    ("metricsBindAddress", Acts, "The metrics server (`/metrics`, `/proxyMode`, `/configz`, `/status`): `IP:PORT`, or an IP (port 10249 added). Port 0 turns it off; without it `ferry status` has nothing to ask. Flag: `--metrics-bind-address`."),
    ("bindAddressHardFail", Acts, "`true`: Ferry exits when the health or metrics server cannot listen on its port, as kube-proxy. `false` (the default): it logs that and tries again every 5 s. Flag: `--bind-address-hard-fail`."),
    ("enableProfiling", Warns, "kube-proxy serves `/debug/pprof`. Ferry has no Go runtime to profile and serves no profiling endpoint: `perf record -g -p $(pidof ferry)` on the node profiles it."),
    ("showHiddenMetricsForVersion", Warns, "Re-enables metrics hidden since that version. Ferry hides none."),
    ("mode", Acts, "The proxy mode: `nftables`, `iptables`, `ipvs` or `userspace`. Empty is iptables mode, as in kube-proxy (kubeadm's ConfigMap says `mode: \"\"`); with no `--config` file at all Ferry's default is nftables mode (`ferry check` says which mode runs and why). IPVS mode takes `masqueradeBit` and `masqueradeAll` from the `iptables` section, as kube-proxy's. As kube-proxy 1.37, an empty mode logs a warning (kube-proxy's default becomes nftables in 1.40) and so does IPVS mode (deprecated: disabled by default in 1.40, removed in 1.43). Flag: `--proxy-mode`."),
    ("detectLocalMode", Acts, "How traffic from pods is told apart: `ClusterCIDR` (from `clusterCIDR`; the default), `NodeCIDR` (this Node's `spec.podCIDRs`), `BridgeInterface` (it comes in on `detectLocal.bridgeInterface`) or `InterfaceNamePrefix` (on an interface named `detectLocal.interfaceNamePrefix`…). The interface detectors see this node's pods only, as upstream's; the userspace mode refuses them (its proxy knows a client's address, not its interface). Flag: `--detect-local-mode`."),
    ("clusterCIDR", Acts, "The pods' CIDRs, one per family, comma-separated (`10.244.0.0/16,fd00:10:244::/48`). ClusterIP traffic from elsewhere is masqueraded; empty (with `ClusterCIDR` detection): nothing counts as a pod, with a warning. Flag: `--cluster-cidr`."),
    ("nodePortAddresses", Acts, "Where NodePorts answer: CIDRs and the keywords `primary` (the Node's primary IPs), `all` (every local address) and `localhost`. Unset: the primary IP in nftables and userspace modes, every local address in iptables mode. The kernel rules never serve loopback; a `localhost` entry or a loopback range asks for localhost NodePorts, served by Ferry's userspace proxy (a warning when the mode's `localhostNodePorts` is false). Flag: `--nodeport-addresses`."),
    ("oomScoreAdj", Acts, "Written to `/proc/self/oom_score_adj` at start (-1000 … 1000). Flag: `--oom-score-adj`."),
    ("configSyncPeriod", Warns, "How often kube-proxy's informers resync. Ferry's watches have no periodic resync; the rules are resynced every `syncPeriod`."),
    ("portRange", Warns, "userspace mode: the range of the proxy ports Ferry listens on (`BEGIN-END` or `BEGIN+OFFSET`; empty: 10260-29999, or the largest stretch the node's `net.ipv4.ip_local_port_range` leaves free); set in another mode, it is named in the warning. Flag: `--proxy-port-range`."),
    ("udpIdleTimeout", Acts, "The userspace proxy's UDP association idle timeout (default 250ms, as upstream's userspace proxier), in every mode but IPVS (where it is a warning) since localhost NodePorts are proxied too. Flag: `--udp-timeout`."),
    ("windowsRunAsService", Warns, "Windows only."),
    ("clientConnection.kubeconfig", Acts, "The kubeconfig for the Kubernetes API. Empty: the pod's service account (in-cluster). Flag: `--kubeconfig`."),
    ("clientConnection.acceptContentTypes", Warns, "API client content negotiation. Ferry's client (kube-rs) speaks JSON."),
    ("clientConnection.contentType", Warns, "API client content type. Ferry's client (kube-rs) speaks only JSON, having no protobuf codec for Kubernetes' types: leave it unset."),
    ("clientConnection.qps", Acts, "The API client's token bucket, as client-go's: requests per second (default 5; 0 or less: no limit). Each request takes a token as it starts; a watch counts once, however long it stays open, and a list read in pages costs two tokens whatever its length (kube-proxy reads it in one streaming request). Flag: `--kube-api-qps`."),
    ("clientConnection.burst", Acts, "The API client's token bucket: requests that may go at once (default 10; negative: refused, as upstream). Flag: `--kube-api-burst`."),
    ("logging.format", Acts, "`text` or `json` (one JSON object per line). Flags: `--logging-format`, `--log-format`."),
    ("logging.verbosity", Acts, "0–3 info, 4–5 debug, 6 and more trace (`RUST_LOG` overrides). Flag: `-v`."),
    ("logging.flushFrequency", Kept, "How often klog flushes. Ferry writes every line at once."),
    ("logging.vmodule", Warns, "Per-file verbosity (`RUST_LOG` does this for Ferry)."),
    ("logging.options.json.infoBufferSize", Kept, "JSON logs: info buffer size (needs the `LoggingAlphaOptions` gate, as in kube-proxy). Ferry writes every line at once and buffers none: nothing to size."),
    ("logging.options.json.splitStream", Acts, "JSON logs: errors to stderr, the rest to stdout (default: everything to stderr). Needs the `LoggingAlphaOptions` feature gate, as in kube-proxy (refused without it). Flag: `--log-json-split-stream`."),
    ("logging.options.text.infoBufferSize", Kept, "Text logs: info buffer size (needs the `LoggingAlphaOptions` gate, as in kube-proxy). Ferry writes every line at once and buffers none: nothing to size."),
    ("logging.options.text.splitStream", Acts, "Text logs: errors to stderr, the rest to stdout (default: everything to stderr). Needs the `LoggingAlphaOptions` feature gate, as in kube-proxy (refused without it). Flag: `--log-text-split-stream`."),
    ("nftables.masqueradeBit", Acts, "nftables mode: the bit of the packet mark that asks for masquerading (0–31)."),
    ("nftables.masqueradeAll", Acts, "nftables mode: masquerade all traffic to ClusterIPs. Flag: `--masquerade-all`."),
    ("nftables.syncPeriod", Acts, "nftables mode: how often the rules in the kernel are checked (a full sync follows when they are damaged; one runs every hour anyway, as kube-proxy's `FullSyncPeriod`), also the longest retry back-off. Must be above 0. Flags: `--sync-period`, `--iptables-sync-period`."),
    ("nftables.minSyncPeriod", Acts, "nftables mode: changes are coalesced for at least this long. At most `syncPeriod`. Flags: `--min-sync-period`, `--iptables-min-sync-period`."),
    ("nftables.localhostNodePorts", Acts, "Ferry's own field (kube-proxy 1.37 has none; its nftables mode answers localhost NodePorts, TCP only, with the alpha `KubeProxyNFTablesLocalhostNodePorts` gate on and a loopback entry in `nodePortAddresses`): answer NodePorts on `127.0.0.1` and `::1`, TCP and UDP, with Ferry's userspace proxy. Unset in nftables mode: answered when `nodePortAddresses` lists loopback (the gate's rule), not when the gate is set false; true in userspace mode (which reads the `nftables` section). Flag: `--nftables-localhost-nodeports`."),
    ("iptables.masqueradeBit", Acts, "iptables mode: the mark bit of `KUBE-MARK-MASQ` (0–31). Flag: `--iptables-masquerade-bit`."),
    ("iptables.masqueradeAll", Acts, "iptables mode: masquerade all traffic to ClusterIPs (also counts for nftables mode when `mode` is empty)."),
    ("iptables.syncPeriod", Acts, "iptables mode: how often the rules in the kernel are checked, as nftables mode's `syncPeriod` (also nftables mode's when `mode` is empty and `nftables.syncPeriod` is unset)."),
    ("iptables.minSyncPeriod", Acts, "iptables mode: the shortest interval between syncs (as `syncPeriod`, also for nftables mode with `mode` empty)."),
    ("iptables.localhostNodePorts", Acts, "iptables mode: answer NodePorts on `127.0.0.1` and `::1` (default true, as kube-proxy). kube-proxy does it by setting `route_localnet` (CVE-2020-8558); Ferry never sets it and serves them with its userspace proxy. Flag: `--iptables-localhost-nodeports`."),
    ("iptables.snatNodeInternalIP", Warns, "Accepted, since some kube-proxy configuration files carry it; Ferry has no use for it."),
    ("ipvs.syncPeriod", Acts, "IPVS mode: how often the rules in the kernel are checked, as nftables mode's `syncPeriod`."),
    ("ipvs.minSyncPeriod", Acts, "IPVS mode: the shortest interval between syncs."),
    ("ipvs.scheduler", Acts, "IPVS mode: the scheduler: `rr` (default), `wrr`, `lc`, `wlc`, `lblc`, `lblcr`, `sh`, `dh`, `sed`, `nq`, `mh`. Flag: `--ipvs-scheduler`."),
    ("ipvs.excludeCIDRs", Acts, "IPVS mode: virtual servers in these CIDRs are never deleted (IPVS mode otherwise owns the node's IPVS table). Flag: `--ipvs-exclude-cidrs`."),
    ("ipvs.strictARP", Acts, "IPVS mode: sets `arp_ignore=1` and `arp_announce=2`. Flag: `--ipvs-strict-arp`."),
    ("ipvs.tcpTimeout", Acts, "IPVS mode: the kernel's idle TCP timeout for IPVS connections (0 leaves the kernel's). Flag: `--ipvs-tcp-timeout`."),
    ("ipvs.tcpFinTimeout", Acts, "IPVS mode: the kernel's TCP timeout after FIN (0 leaves the kernel's). Flag: `--ipvs-tcpfin-timeout`."),
    ("ipvs.udpTimeout", Acts, "IPVS mode: the kernel's UDP timeout for IPVS (0 leaves the kernel's). Flag: `--ipvs-udp-timeout`."),
    ("detectLocal.bridgeInterface", Acts, "With `detectLocalMode: BridgeInterface`: the bridge (`iifname`/`-i` in the rules); required then. Flag: `--pod-bridge-interface`."),
    ("detectLocal.interfaceNamePrefix", Acts, "With `detectLocalMode: InterfaceNamePrefix`: the prefix (`iifname \"veth*\"`, `-i veth+`); required then. Flag: `--pod-interface-name-prefix`."),
    ("conntrack.maxPerCore", Acts, "`nf_conntrack_max` is raised at start to this × the machine's CPUs (at least `min`, at most 1 048 576), and the module's `hashsize` to a quarter of it; never lowered. 0 leaves both to the node. In a network namespace other than the first, `nf_conntrack_max` is read-only: a warning, and Ferry goes on. Flag: `--conntrack-max-per-core`."),
    ("conntrack.min", Acts, "The least `nf_conntrack_max` that `maxPerCore` sets. Flag: `--conntrack-min`."),
    ("conntrack.tcpEstablishedTimeout", Acts, "`nf_conntrack_tcp_timeout_established`, set at start (0 leaves the kernel's). Flag: `--conntrack-tcp-timeout-established`."),
    ("conntrack.tcpCloseWaitTimeout", Acts, "`nf_conntrack_tcp_timeout_close_wait`, set at start (0 leaves the kernel's). Flag: `--conntrack-tcp-timeout-close-wait`."),
    ("conntrack.tcpBeLiberal", Acts, "Sets `nf_conntrack_tcp_be_liberal` at start; with it on (however set), iptables mode drops no packet conntrack marks invalid, as upstream. Flag: `--conntrack-tcp-be-liberal`."),
    ("conntrack.udpTimeout", Acts, "`nf_conntrack_udp_timeout`, set at start (0 leaves the kernel's). Flag: `--conntrack-udp-timeout`."),
    ("conntrack.udpStreamTimeout", Acts, "`nf_conntrack_udp_timeout_stream`, set at start (0 leaves the kernel's). Flag: `--conntrack-udp-timeout-stream`."),
    ("winkernel.networkName", Warns, "Windows only."),
    ("winkernel.sourceVip", Warns, "Windows only."),
    ("winkernel.enableDSR", Warns, "Windows only."),
    ("winkernel.rootHnsEndpointName", Warns, "Windows only."),
    ("winkernel.forwardHealthCheckVip", Warns, "Windows only."),
];
