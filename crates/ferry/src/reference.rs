//! The book's reference pages, generated from the code so they cannot drift: the command line
//! (from clap's definition, [`flags`]), the `KubeProxyConfiguration` fields (from the typed
//! configuration and its defaulting, [`config`]) and the metrics (from a fresh registry,
//! [`metrics`]).
//!
//! Test-only: each generator is a pure function returning the page's Markdown; `tests`
//! compares it with the committed page under `docs/src/reference/` and, with `FERRY_BLESS=1`,
//! rewrites the page.

mod config;
mod flags;
pub(crate) mod metrics;
mod table;

#[cfg(test)]
mod tests;

/// The first lines of every generated page: where it comes from and how to regenerate it.
fn generated_header(title: &str, source: &str) -> String {
    format!(
        "# {title}\n\n<!-- Generated from {source} by \
         `FERRY_BLESS=1 cargo test -p ferry --bin ferry reference`. Do not edit by hand: \
         a test fails when this page differs from what the code generates. -->\n\n"
    )
}

/// Every generated page: its path under `docs/src/` and its text.
pub fn pages() -> Vec<(&'static str, String)> {
    vec![
        ("reference/flags.md", flags::page()),
        ("reference/configuration.md", config::page()),
        ("reference/metrics.md", metrics::page()),
    ]
}
