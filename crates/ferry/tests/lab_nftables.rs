//! The seed matrix with real packets, nftables mode. Needs root (skips otherwise).

const MODE: seed::Mode = seed::Mode::Nftables;

include!("support/cases.rs");
