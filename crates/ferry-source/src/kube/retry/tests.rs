//! [`Retry`] over a scripted watcher stream: whether the next item waits for the back-off (an
//! hour here, so "waited" and "went on at once" are told apart by one poll, not by a clock).

use std::time::Duration;

use futures::{stream, FutureExt as _, Stream, StreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::core::Status;
use kube::runtime::watcher::{Error, Event};

use super::{is_desync, Fixed, Retry};

type Item = Result<Event<ConfigMap>, Error>;

fn gone() -> Item {
    Err(expired())
}

/// The server's answer to a watch from a compacted resourceVersion.
fn expired() -> Error {
    let status = Status {
        code: 410,
        reason: "Expired".into(),
        message: "too old resource version: 5 (9)".into(),
        ..Status::default()
    };
    Error::WatchError(Box::new(status))
}

fn failed() -> Item {
    Err(Error::NoResourceVersion)
}

fn apply() -> Item {
    Ok(Event::Apply(ConfigMap::default()))
}

fn paced(items: Vec<Item>) -> Retry<impl Stream<Item = Item> + Unpin> {
    Retry::new(
        stream::iter(items),
        Box::new(Fixed(Duration::from_secs(3600))),
    )
}

/// Takes the next item if it is there without waiting; `None` when the stream is pausing.
fn now(retry: &mut Retry<impl Stream<Item = Item> + Unpin>) -> Option<Item> {
    retry
        .next()
        .now_or_never()
        .map(|item| item.expect("stream ended"))
}

#[test]
fn only_a_watch_error_with_code_410_is_a_desync() {
    assert!(is_desync(&expired()));
    assert!(!is_desync(&Error::NoResourceVersion));
    let other = Status {
        code: 500,
        ..Status::default()
    };
    assert!(!is_desync(&Error::WatchError(Box::new(other))));
}

#[tokio::test(start_paused = true)]
async fn a_failure_waits_for_the_back_off() {
    let mut retry = paced(vec![failed(), Ok(Event::Init)]);
    assert!(now(&mut retry).is_some_and(|i| i.is_err()));
    assert!(now(&mut retry).is_none(), "paused for the back-off");
}

#[tokio::test(start_paused = true)]
async fn a_desync_relists_at_once() {
    let mut retry = paced(vec![apply(), gone(), Ok(Event::Init), Ok(Event::InitDone)]);
    assert!(now(&mut retry).is_some_and(|i| i.is_ok()));
    assert!(now(&mut retry).is_some_and(|i| i.is_err()));
    assert!(matches!(now(&mut retry), Some(Ok(Event::Init))), "no pause");
    assert!(matches!(now(&mut retry), Some(Ok(Event::InitDone))));
}

#[tokio::test(start_paused = true)]
async fn a_second_desync_without_a_watch_event_between_waits() {
    let mut retry = paced(vec![
        gone(),
        Ok(Event::Init),
        Ok(Event::InitDone),
        gone(),
        apply(),
    ]);
    for _ in 0..4 {
        assert!(now(&mut retry).is_some());
    }
    assert!(
        now(&mut retry).is_none(),
        "a server answering 410 again is not hammered"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_event_after_the_relist_allows_the_next_immediate_relist() {
    let mut retry = paced(vec![gone(), Ok(Event::InitDone), apply(), gone(), apply()]);
    for _ in 0..4 {
        assert!(now(&mut retry).is_some());
    }
    assert!(now(&mut retry).is_some_and(|i| i.is_ok()), "no pause");
}
