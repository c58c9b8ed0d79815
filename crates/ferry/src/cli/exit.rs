//! The process's exit codes beyond success and failure (the `status` client and the agent's
//! start-up share them).

/// EX_USAGE: bad flags or configuration.
pub const EXIT_USAGE: u8 = 64;
