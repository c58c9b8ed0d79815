// One test per (case, proxy mode): the feature lab tests (issue 5) are written once, as
// `fn case(mode: seed::Mode)`, and run in every mode Ferry has. The including test file must
// also include `support/seed.rs` as `mod seed`.
//
//     every_mode!(affinity_sticks, affinity_expires);
//
// expands to `mod affinity_sticks { #[test] fn nftables() … fn iptables_nft() … fn iptables_legacy() … }`,
// each ignored unless run as root with `--include-ignored` (the lab needs network namespaces).

macro_rules! every_mode {
    ($($case:ident),* $(,)?) => {
        $(
            mod $case {
                #[test]
                #[ignore = "needs root: network namespaces"]
                fn nftables() {
                    super::$case(super::seed::Mode::Nftables)
                }
                #[test]
                #[ignore = "needs root: network namespaces"]
                fn iptables_nft() {
                    super::$case(super::seed::Mode::IptablesNft)
                }
                #[test]
                #[ignore = "needs root: network namespaces"]
                fn iptables_legacy() {
                    super::$case(super::seed::Mode::IptablesLegacy)
                }
            }
        )*
    };
}
