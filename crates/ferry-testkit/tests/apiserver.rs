//! The fake API server's wire format, read with a plain HTTP/1.1 client (std TcpStream).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::TcpStream;
use std::time::Duration;

use ferry_testkit::{objects, FakeApiServer};
use serde_json::Value;

/// Sends one GET and returns the reader positioned after the response headers.
fn get(server: &FakeApiServer, path: &str) -> (String, BufReader<TcpStream>) {
    let mut stream = TcpStream::connect(server.addr()).expect("connect");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    write!(stream, "GET {path} HTTP/1.1\r\nHost: fake\r\n\r\n").expect("write");
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status).expect("status line");
    loop {
        let mut header = String::new();
        reader.read_line(&mut header).expect("header");
        if header == "\r\n" {
            break;
        }
    }
    (status, reader)
}

/// Reads one chunk of a chunked body; None at the last chunk.
fn chunk(reader: &mut BufReader<TcpStream>) -> Option<Value> {
    let mut size = String::new();
    reader.read_line(&mut size).expect("chunk size");
    let size = usize::from_str_radix(size.trim(), 16).expect("hex size");
    if size == 0 {
        return None;
    }
    let mut data = vec![0; size + 2];
    std::io::Read::read_exact(reader, &mut data).expect("chunk");
    Some(serde_json::from_slice(&data[..size]).expect("json line"))
}

#[test]
fn list_then_watch_replays_history_sends_bookmarks_and_ends_when_dropped() {
    let server = FakeApiServer::start_local().expect("start");
    server.apply(objects::service("dev", "web", "10.96.0.10", 80, 8080));
    let (status, mut r) = get(&server, "/api/v1/services?limit=500");
    assert!(status.contains("200"), "{status}");
    let mut body = String::new();
    r.read_line(&mut body).expect("list body");
    let list: Value = serde_json::from_str(&body).expect("json");
    assert_eq!(list["kind"], "ServiceList");
    assert_eq!(list["metadata"]["resourceVersion"], "1");
    assert_eq!(list["items"][0]["metadata"]["name"], "web");

    server.apply(objects::service("dev", "api", "10.96.0.11", 80, 8080));
    let (_, mut w) = get(
        &server,
        "/api/v1/services?watch=true&allowWatchBookmarks=true&resourceVersion=1",
    );
    let added = chunk(&mut w).expect("event");
    assert_eq!(added["type"], "ADDED");
    assert_eq!(added["object"]["metadata"]["name"], "api");
    assert_eq!(added["object"]["metadata"]["resourceVersion"], "2");
    server.delete("Service", "dev", "web");
    let deleted = chunk(&mut w).expect("event");
    assert_eq!(deleted["type"], "DELETED");
    assert_eq!(deleted["object"]["metadata"]["resourceVersion"], "3");
    server.bookmark();
    server.drop_watches();
    let mark = chunk(&mut w).expect("bookmark");
    assert_eq!(mark["type"], "BOOKMARK");
    assert_eq!(mark["object"]["metadata"]["resourceVersion"], "3");
    assert_eq!(chunk(&mut w), None, "the watch ends after a drop");
}

#[test]
fn a_watch_from_a_compacted_resource_version_gets_410_gone() {
    let server = FakeApiServer::start_local().expect("start");
    server.apply(objects::node("k8s-node2", "10.1.1.9", "192.168.169.128/26"));
    server.apply(objects::node(
        "k8s-node2",
        "10.1.1.10",
        "192.168.169.128/26",
    ));
    server.compact();
    let (_, mut w) = get(&server, "/api/v1/nodes?watch=true&resourceVersion=1");
    let error = chunk(&mut w).expect("event");
    assert_eq!(error["type"], "ERROR");
    assert_eq!(error["object"]["code"], 410);
    assert_eq!(error["object"]["reason"], "Expired");
    assert_eq!(chunk(&mut w), None);
}

/// One list page: its names and its continue token ("" when it is the last).
fn page(server: &FakeApiServer, path: &str) -> (Vec<String>, String) {
    let (status, mut r) = get(server, path);
    assert!(status.contains("200"), "{status}");
    let mut body = String::new();
    r.read_line(&mut body).expect("list body");
    let list: Value = serde_json::from_str(&body).expect("json");
    let names = list["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|o| o["metadata"]["name"].as_str().expect("name").to_owned())
        .collect();
    let token = list["metadata"]["continue"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    (names, token)
}

#[test]
fn a_list_in_pages_resumes_after_the_last_object_of_each_page() {
    let server = FakeApiServer::start_local().expect("start");
    for (i, name) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        let ip = format!("10.96.0.{}", 10 + i);
        server.apply(objects::service("dev", name, &ip, 80, 8080));
    }
    let (names, token) = page(&server, "/api/v1/services?limit=2");
    assert_eq!(names, ["a", "b"]);
    assert_eq!(token, "5:dev/b", "resourceVersion, then the last key");
    // A page is read from the current state: an object added before the resume point is not
    // listed, one after it is.
    server.apply(objects::service("dev", "aa", "10.96.0.20", 80, 8080));
    server.apply(objects::service("dev", "cc", "10.96.0.21", 80, 8080));
    let (names, token) = page(
        &server,
        &format!("/api/v1/services?limit=2&continue={token}"),
    );
    assert_eq!(names, ["c", "cc"]);
    let (names, token) = page(
        &server,
        &format!("/api/v1/services?limit=2&continue={token}"),
    );
    assert_eq!(names, ["d", "e"]);
    assert_eq!(token, "", "no continue token on the last page");
    let (status, _) = get(&server, "/api/v1/services?limit=2&continue=5:7");
    assert!(status.contains("400"), "{status}");
}
