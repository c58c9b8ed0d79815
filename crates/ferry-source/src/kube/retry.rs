//! When a watch retries: after a failure, kube-rs's back-off; after a desync (`410 Gone`), at once.
//!
//! kube-rs's `StreamBackoff` sleeps after every error. A watch that reconnects after an outage
//! and is told its resourceVersion is gone (the server compacted its history) would then wait
//! for the grown back-off (up to 30 s) once more before relisting, though the server is up and
//! answering. client-go's reflector relists at once after an "expired" watch and keeps its
//! back-off for failures to reach the server; [`Retry`] does the same.
//!
//! Only the error kube-rs's watcher itself answers with a relist counts as a desync: a
//! `WatchError` event with code 410 (its state goes back to a fresh list). Any other error
//! (a refused connection, a 410 on the watch request itself, which kube-rs retries with the
//! same resourceVersion) backs off, so nothing can loop without a pause. The relist's events
//! reset the back-off, as with `StreamBackoff`; a second desync right after a relist (no watch
//! event in between) backs off too, so a server that keeps answering 410 is not hammered.

use std::future::Future as _;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{ready, Stream, StreamExt as _};
use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use tokio::time::Sleep;

/// True for the watch error kube-rs recovers from by relisting: the server's `410 Gone`
/// (reason `Expired`: the resourceVersion is older than the history it keeps).
pub fn is_desync(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchError(status) if status.code == 410)
}

/// A watcher stream paced by a [`Backoff`] after errors, except right after a desync.
pub struct Retry<S> {
    stream: S,
    backoff: Box<dyn Backoff>,
    sleep: Option<Pin<Box<Sleep>>>,
    /// A desync was let through without a pause, and no watch event has arrived since.
    relisting: bool,
    given_up: bool,
}

impl<S> Retry<S> {
    /// Paces `stream` (a kube-rs watcher) with `backoff`.
    pub fn new(stream: S, backoff: Box<dyn Backoff>) -> Self {
        Self {
            stream,
            backoff,
            sleep: None,
            relisting: false,
            given_up: false,
        }
    }

    /// Decides the pause after `item`, before the watcher is polled again.
    fn after<K>(&mut self, item: &Result<watcher::Event<K>, watcher::Error>) {
        match item {
            Err(e) if is_desync(e) && !self.relisting => self.relisting = true,
            Err(_) => match self.backoff.next() {
                Some(delay) => self.sleep = Some(Box::pin(tokio::time::sleep(delay))),
                None => self.given_up = true,
            },
            Ok(event) => {
                if matches!(event, watcher::Event::Apply(_) | watcher::Event::Delete(_)) {
                    self.relisting = false;
                }
                self.backoff.reset();
            }
        }
    }
}

impl<S, K> Stream for Retry<S>
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Unpin,
{
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<S::Item>> {
        if self.given_up {
            return Poll::Ready(None);
        }
        if let Some(sleep) = self.sleep.as_mut() {
            ready!(sleep.as_mut().poll(cx));
            self.sleep = None;
        }
        let item = ready!(self.stream.poll_next_unpin(cx));
        if let Some(item) = &item {
            self.after(item);
        }
        Poll::Ready(item)
    }
}

/// A constant retry delay (tests).
pub struct Fixed(pub Duration);

impl Iterator for Fixed {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        Some(self.0)
    }
}

impl Backoff for Fixed {
    fn reset(&mut self) {}
}

#[cfg(test)]
mod tests;
