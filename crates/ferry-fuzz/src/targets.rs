//! The targets: each takes any bytes and must not panic; a panic (in-process) or a `ferry`
//! that dies of one (exit 101, a signal, or no answer within [`process::TIMEOUT`]) is a crash.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

pub mod convert;
pub mod manifest;
pub mod netlink;
pub mod process;
pub mod yaml;

/// How a target runs.
#[derive(Debug, Clone, Copy)]
pub enum Run {
    /// In this process: a panic is a crash.
    InProcess(fn(&[u8]) -> u64),
    /// Through the `ferry` binary (given as the path): `Err` is a crash.
    Ferry(fn(&Path, &[u8]) -> Result<u64, String>),
}

/// One fuzz target.
#[derive(Debug, Clone, Copy)]
pub struct Target {
    /// Its name, also its corpus directory's.
    pub name: &'static str,
    /// What it exercises.
    pub about: &'static str,
    /// The function.
    pub run: Run,
}

/// Every target, in the order the drill runs them.
pub const TARGETS: [Target; 6] = [
    Target {
        name: "manifest",
        about: "manifest files (YAML streams, JSON, lists) -> objects, cross-file checks, re-reads",
        run: Run::InProcess(manifest::run),
    },
    Target {
        name: "yaml",
        about: "YAML streams: the manifest source's fast path against serde-saphyr",
        run: Run::InProcess(yaml::run),
    },
    Target {
        name: "convert",
        about: "k8s-openapi objects (JSON) -> ferry-model objects",
        run: Run::InProcess(convert::run),
    },
    Target {
        name: "config",
        about: "`ferry check --config FILE`: Ferry's config file, KubeProxyConfiguration",
        run: Run::Ferry(process::config),
    },
    Target {
        name: "flags",
        about: "`ferry check FLAGS...`: the command line, kube-proxy's flags included",
        run: Run::Ferry(process::flags),
    },
    Target {
        name: "netlink",
        about: "nfnetlink encoder round trip: delta -> batch -> decoded -> compared",
        run: Run::InProcess(netlink::run),
    },
];

/// The target named `name`.
pub fn by_name(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

impl Target {
    /// Runs the target on `input`: its signature, or the crash (the panic's message and
    /// place). `ferry` is needed by the targets that run the binary.
    /// A panic of the harness around `ferry` (not of `ferry`) is a crash too.
    pub fn exec(&self, ferry: Option<&Path>, input: &[u8]) -> Result<u64, String> {
        let run = || match self.run {
            Run::InProcess(f) => Ok(f(input)),
            Run::Ferry(f) => match ferry {
                Some(ferry) => f(ferry, input),
                None => Err(format!("target {} needs the ferry binary", self.name)),
            },
        };
        catch_unwind(AssertUnwindSafe(run)).unwrap_or_else(|payload| {
            let text = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_else(|| "a panic".to_owned());
            let place = LAST_PANIC.with(|p| p.take()).unwrap_or_default();
            Err(format!("panicked at {place}: {text}"))
        })
    }
}

std::thread_local! {
    /// Where the last panic on this thread happened (set by [`quiet_panics`]' hook).
    static LAST_PANIC: std::cell::Cell<Option<String>> = const { std::cell::Cell::new(None) };
}

/// Replaces the panic hook with one that only records where a panic happened (a fuzzer
/// expects them; the default hook would print each one). Returns the previous hook's guard.
pub fn quiet_panics() -> PanicHookGuard {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(|info| {
        let place = info
            .location()
            .map(|l| format!("{}:{}", l.file(), l.line()))
            .unwrap_or_default();
        LAST_PANIC.with(|p| p.set(Some(place)));
    }));
    PanicHookGuard {
        previous: Some(previous),
    }
}

/// Hook type of [`std::panic::take_hook`].
type Hook = Box<dyn Fn(&std::panic::PanicHookInfo<'_>) + Sync + Send + 'static>;

/// Puts the previous panic hook back when dropped.
pub struct PanicHookGuard {
    previous: Option<Hook>,
}

impl Drop for PanicHookGuard {
    fn drop(&mut self) {
        // The hook cannot be changed from a panicking thread (that would abort the process).
        if std::thread::panicking() {
            return;
        }
        if let Some(previous) = self.previous.take() {
            std::panic::set_hook(previous);
        }
    }
}

/// A signature of anything hashable (an outcome's shape).
pub fn signature(x: impl Hash) -> u64 {
    let mut h = DefaultHasher::new();
    x.hash(&mut h);
    h.finish()
}

/// The shape of an error message: digits and quoted text dropped, so `port 70000` and
/// `port 80000` count once, while a different field or reason counts anew.
pub fn shape(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars() {
        match c {
            '"' => quoted = !quoted,
            _ if quoted || c.is_ascii_digit() => {}
            _ => out.push(c),
        }
    }
    // At most 120 bytes, cut at a character boundary.
    let mut end = out.len().min(120);
    while !out.is_char_boundary(end) {
        end -= 1;
    }
    out.truncate(end);
    out
}

#[cfg(test)]
mod tests {
    use super::shape;

    #[test]
    fn shapes_are_cut_at_a_character_boundary() {
        // A fuzzed message with a 3-byte character across byte 120 once panicked here.
        let message = format!("{}\u{feff}{}", "a".repeat(119), "b".repeat(10));
        assert_eq!(shape(&message), "a".repeat(119));
        assert_eq!(shape("port 70000 \"x\" ok"), "port   ok");
    }
}
