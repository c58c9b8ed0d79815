//! The seed matrix with real packets, iptables mode on the legacy backend (`iptables-legacy`). Needs root (skips otherwise).

const MODE: seed::Mode = seed::Mode::IptablesLegacy;

include!("support/cases.rs");
