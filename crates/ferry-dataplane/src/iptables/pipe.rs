//! Writing a restore's text into the tool's input as it is produced.

/// A `fmt::Write` into a pipe, counting the bytes and keeping the pipe's error (a
/// `fmt::Error` says nothing).
pub(super) struct Counted<'a> {
    pipe: &'a mut dyn std::io::Write,
    pub(super) bytes: usize,
    error: Option<std::io::Error>,
}

impl<'a> Counted<'a> {
    pub(super) fn new(pipe: &'a mut dyn std::io::Write) -> Self {
        Self {
            pipe,
            bytes: 0,
            error: None,
        }
    }

    /// Why a write failed.
    pub(super) fn error(&mut self) -> std::io::Error {
        self.error
            .take()
            .unwrap_or_else(|| std::io::Error::other("the restore text could not be written"))
    }
}

impl std::fmt::Write for Counted<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        match self.pipe.write_all(s.as_bytes()) {
            Ok(()) => {
                self.bytes += s.len();
                Ok(())
            }
            Err(e) => {
                self.error = Some(e);
                Err(std::fmt::Error)
            }
        }
    }
}
