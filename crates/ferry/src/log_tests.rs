//! The log writer: one stream, or kube-proxy's split streams.

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

use super::log_writer;

/// A writer into a shared buffer.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'w> MakeWriter<'w> for Buffer {
    type Writer = Buffer;
    fn make_writer(&'w self) -> Buffer {
        self.clone()
    }
}

impl Buffer {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().expect("lock").clone()).expect("utf-8")
    }
}

/// Logs one line of each level through `log_writer(split, …)`; returns (stdout, stderr).
fn log_each_level(split: bool) -> (String, String) {
    let (info, errors) = (Buffer::default(), Buffer::default());
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::DEBUG)
        .with_ansi(false)
        .with_writer(log_writer(split, info.clone(), errors.clone()))
        .finish();
    tracing::subscriber::with_default(subscriber, || {
        tracing::error!("an-error");
        tracing::warn!("a-warning");
        tracing::info!("an-info");
        tracing::debug!("a-debug");
    });
    (info.text(), errors.text())
}

#[test]
fn split_streams_send_errors_to_stderr_and_the_rest_to_stdout() {
    let (stdout, stderr) = log_each_level(true);
    assert!(stderr.contains("an-error"), "{stderr}");
    for line in ["a-warning", "an-info", "a-debug"] {
        assert!(stdout.contains(line) && !stderr.contains(line), "{line}");
    }
    assert!(!stdout.contains("an-error"), "{stdout}");
}

#[test]
fn one_stream_sends_everything_to_stderr() {
    let (stdout, stderr) = log_each_level(false);
    assert_eq!(stdout, "");
    for line in ["an-error", "a-warning", "an-info", "a-debug"] {
        assert!(stderr.contains(line), "{line}");
    }
}
