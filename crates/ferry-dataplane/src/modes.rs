//! The mode table: every proxy mode's line, joining its pure renderer (ferry-compile) with its
//! kernel half (this crate). The binary asks this table for whatever depends on the mode and
//! never matches on the mode itself.
//!
//! Adding a mode: a renderer in ferry-compile, a module here with an
//! [`Applier`](crate::Applier) and a [`ModeEntry`], and its line in [`MODES`].

use ferry_compile::mode::ProxyMode;

use crate::mode::ModeEntry;

/// Every mode, in [`ProxyMode::ALL`]'s order.
pub const MODES: [ModeEntry; 4] = [
    crate::nft::MODE,
    crate::iptables::MODE,
    crate::ipvs::MODE,
    crate::userspace::MODE,
];

/// The line of `mode`.
pub fn entry(mode: ProxyMode) -> &'static ModeEntry {
    MODES
        .iter()
        .find(|e| e.mode == mode)
        .expect("every ProxyMode has a line in MODES")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_one_line() {
        for mode in ProxyMode::ALL {
            assert_eq!(entry(mode).mode, mode);
            assert_eq!(entry(mode).renderer.mode(), mode);
        }
        assert_eq!(MODES.len(), ProxyMode::ALL.len());
    }
}
