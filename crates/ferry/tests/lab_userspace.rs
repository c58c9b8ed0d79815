//! The seed matrix with real packets, userspace mode (the expectations that differ say why:
//! the proxy connects to the endpoints from the node). Needs root.

const MODE: seed::Mode = seed::Mode::Userspace;

include!("support/cases.rs");
