//! IPVS mode with real packets, inside the qemu IPVS guest (`ferry-lab/vm/ipvs-vm`: Debian's
//! stock kernel, which has IP_VS): the seed matrix (the same case list as every mode), every
//! seed flow checked against `ferry explain --live`, and IPVS's own cases (scheduler,
//! persistence, graceful termination, kube-ipvs0's addresses, load-balancer and external IPs,
//! source ranges, taking over from kube-proxy). Three nodes in network namespaces inside the
//! guest, one `ferry run` each.
//!
//! As root, `cargo test -p ferry --test lab_ipvs -- --include-ignored` boots the guest once
//! (`ipvs_lab_passes_in_the_guest`) and runs every other test of this file there, one at a
//! time; outside the guest those tests skip.

const MODE: seed::Mode = seed::Mode::Ipvs;

include!("support/cases.rs");

#[path = "support/flows.rs"]
mod flows;
#[path = "support/ipvs_lab.rs"]
mod ipvs_lab;
#[path = "support/ipvs_takeover.rs"]
mod ipvs_takeover;
#[path = "support/load_balancer.rs"]
mod lb;

#[test]
#[ignore = "needs root: qemu IPVS guest"]
fn ipvs_lab_passes_in_the_guest() {
    ferry_lab::vm::run_guest_tests("");
}

macro_rules! ipvs_cases {
    ($($name:ident: $call:expr;)*) => {
        $(
            #[test]
            #[ignore = "needs root: network namespaces"]
            fn $name() {
                if !MODE.skipped_here() {
                    $call
                }
            }
        )*
    };
}

ipvs_cases! {
    cluster_policy_flows_behave_as_explained: ipvs_lab::flows_behave_as_explained("Cluster");
    local_policy_flows_behave_as_explained: ipvs_lab::flows_behave_as_explained("Local");
    the_scheduler_is_the_configured_one: ipvs_lab::the_scheduler_is_the_configured_one();
    session_affinity_is_persistence: ipvs_lab::session_affinity_is_persistence();
    graceful_termination_drains_a_removed_endpoint: ipvs_lab::graceful_termination_drains_a_removed_endpoint();
    kube_ipvs0_addresses_follow_the_services: ipvs_lab::kube_ipvs0_addresses_follow_the_services();
    load_balancer_and_external_ips_follow_the_external_policy: ipvs_lab::load_balancer_and_external_ips_follow_the_external_policy();
    source_ranges_admit_only_the_listed_clients: ipvs_lab::source_ranges_admit_only_the_listed_clients();
    taking_over_from_kube_proxy_in_ipvs_mode: ipvs_takeover::taking_over_from_kube_proxy_in_ipvs_mode();
}
