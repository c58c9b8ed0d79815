//! The seed matrix with real packets, iptables mode on the nft backend (`iptables-nft`). Needs root (skips otherwise).

const MODE: seed::Mode = seed::Mode::IptablesNft;

include!("support/cases.rs");
