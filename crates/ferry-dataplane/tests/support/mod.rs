//! Helpers shared by the kernel tests: a private network namespace per test, and `nft` (both
//! from ferry-lab, which the in-crate kernel tests use too).

// Each test binary compiles this module and uses only some of it.
#[allow(unused_imports)]
pub use ferry_lab::netns::{in_private_netns as in_new_netns, nft};
