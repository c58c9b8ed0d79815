// The seed matrix, one test per case, for the proxy mode `MODE` of the including test file
// (`lab_nftables.rs`, `lab_iptables_nft.rs`, `lab_iptables_legacy.rs`, `lab_ipvs.rs`): one
// list, every mode. IPVS mode's cases run only inside the IPVS guest.

#[path = "matrix.rs"]
mod matrix;
#[path = "ownership.rs"]
mod ownership;
#[path = "seed.rs"]
mod seed;

macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        $(
            #[test]
            #[ignore = "needs root: network namespaces"]
            fn $name() {
                if !MODE.skipped_here() {
                    matrix::$name(MODE)
                }
            }
        )*
    };
}

cases!(
    pod_to_cluster_ip_reaches_every_endpoint_without_snat,
    node_to_cluster_ip_works_and_is_masqueraded,
    hairpin_traffic_is_masqueraded,
    cluster_policy_node_port_works_on_every_node_with_snat,
    local_policy_keeps_client_ip_and_drops_where_no_local_endpoint,
    local_policy_short_circuits_pod_traffic,
    service_without_endpoints_refuses_connections,
    readiness_changes_take_effect_without_restart,
    restarting_ferry_keeps_established_connections,
    seed_curl_table,
    seed_commands_show_the_seeds_chains,
    an_invalid_edit_keeps_the_last_good_rules,
    cleanup_removes_only_ferrys_rules,
    flushed_chains_are_repaired_within_one_sync_period,
    deleting_all_of_ferrys_rules_is_repaired_at_the_next_sync,
);
