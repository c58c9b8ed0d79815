// One test per (case, proxy mode): the feature lab tests (issue 5) are written once, as
// `fn case(mode: seed::Mode)`, and run in every mode Ferry has. The including test file must
// also include `support/seed.rs` as `mod seed`.
//
//     every_mode!(affinity_sticks, affinity_expires);
//
// expands to `mod affinity_sticks { #[test] fn nftables() … fn iptables_nft() … fn iptables_legacy() … }`.

macro_rules! every_mode {
    ($($case:ident),* $(,)?) => {
        $(
            mod $case {
                #[test]
                fn nftables() {
                    super::$case(super::seed::Mode::Nftables)
                }
                #[test]
                fn iptables_nft() {
                    super::$case(super::seed::Mode::IptablesNft)
                }
                #[test]
                fn iptables_legacy() {
                    super::$case(super::seed::Mode::IptablesLegacy)
                }
            }
        )*
    };
}
