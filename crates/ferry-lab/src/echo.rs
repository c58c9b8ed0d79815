//! The lab's "pod" program: the seed's url-analysis app. `GET /hello` answers
//! `ClientIp : <peer ip>, ServerName : <name>, ServerIp : <local ip>` plus a newline, so a test
//! sees which pod answered and which source address reached it (i.e. whether SNAT happened).
//!
//! [`serve_echo`] is what this crate's `ferry-lab-echo` binary runs; `ferry lab-pod --name N
//! --listen ADDR` runs it together with [`serve_echo_udp`] on the same address (a datagram is
//! answered with the same body, so UDP clients see the pod's name too). Std only, one thread
//! per connection.

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// Longest request head (request line plus headers) the server reads.
const MAX_HEAD: usize = 64 * 1024;

/// The `/hello` body (with its trailing newline) for a server `name` seeing a request from
/// `client` on its address `server`.
pub fn echo_body(name: &str, client: IpAddr, server: IpAddr) -> String {
    format!("ClientIp : {client}, ServerName : {name}, ServerIp : {server}\n")
}

/// Serves HTTP/1.1 on `listen` forever (returns only if binding fails or accepting fails
/// persistently). `GET`/`HEAD /hello` → 200 with [`echo_body`]; any other path → 404.
/// Keep-alive is supported (`Content-Length` is always set); `Connection: close` and HTTP/1.0
/// without keep-alive close after the response.
pub fn serve_echo(name: &str, listen: SocketAddr) -> io::Result<()> {
    serve_echo_listener(name, TcpListener::bind(listen)?)
}

/// Like [`serve_echo`], on an already bound listener. A listener bound inside a namespace (see
/// [`crate::netns::run_in`]) stays there, so this can serve a pod from a thread of the calling
/// process.
pub fn serve_echo_listener(name: &str, listener: TcpListener) -> io::Result<()> {
    serve_echo_listener_failing(name, listener, None)
}

/// Like [`serve_echo_listener`]; while the file `<fail_dir>/<name>` exists, `/hello` answers
/// `503 Service Unavailable`: a pod whose readiness probe starts failing, and recovers when the
/// file is removed.
pub fn serve_echo_listener_failing(
    name: &str,
    listener: TcpListener,
    fail_dir: Option<&Path>,
) -> io::Result<()> {
    let fail_file: Option<Arc<Path>> = fail_dir.map(|d| Arc::from(d.join(name)));
    eprintln!(
        "lab-pod {name}: listening on tcp {}",
        listener.local_addr()?
    );
    let mut consecutive_errors = 0u32;
    for conn in listener.incoming() {
        match conn {
            Ok(stream) => {
                consecutive_errors = 0;
                let name = name.to_string();
                let fail_file = fail_file.clone();
                std::thread::spawn(move || {
                    if let Err(e) = handle_conn(&name, stream, fail_file.as_deref()) {
                        if e.kind() != io::ErrorKind::UnexpectedEof {
                            eprintln!("lab-pod {name}: connection error: {e}");
                        }
                    }
                });
            }
            Err(e) => {
                consecutive_errors += 1;
                eprintln!("lab-pod {name}: accept: {e}");
                if consecutive_errors > 1000 {
                    return Err(e);
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    Ok(())
}

/// UDP variant: every datagram received on `listen` is answered with [`echo_body`] (client =
/// the datagram's source). Runs forever; returns only on a socket error.
pub fn serve_echo_udp(name: &str, listen: SocketAddr) -> io::Result<()> {
    let sock = UdpSocket::bind(listen)?;
    let local = sock.local_addr()?;
    eprintln!("lab-pod {name}: listening on udp {local}");
    let mut buf = [0u8; 2048];
    loop {
        let (_, peer) = sock.recv_from(&mut buf)?;
        // With a wildcard bind the reply's source is picked by routing; report the bound IP.
        let body = echo_body(name, peer.ip(), local.ip());
        sock.send_to(body.as_bytes(), peer)?;
    }
}

/// Serves [`serve_echo`] (TCP) and [`serve_echo_udp`] on the same address, as `ferry lab-pod`
/// does: a UDP service port of the lab reaches the same pods. A UDP socket that cannot be bound
/// is reported and TCP is served anyway.
pub fn serve_echo_tcp_and_udp(name: &str, listen: SocketAddr) -> io::Result<()> {
    serve_echo_tcp_and_udp_failing(name, listen, None)
}

/// [`serve_echo_tcp_and_udp`] with [`serve_echo_listener_failing`]'s switch for TCP.
pub fn serve_echo_tcp_and_udp_failing(
    name: &str,
    listen: SocketAddr,
    fail_dir: Option<&Path>,
) -> io::Result<()> {
    let udp_name = name.to_string();
    std::thread::spawn(move || {
        if let Err(e) = serve_echo_udp(&udp_name, listen) {
            eprintln!("lab-pod {udp_name}: udp {listen}: {e}");
        }
    });
    serve_echo_listener_failing(name, TcpListener::bind(listen)?, fail_dir)
}

/// One parsed request head.
struct Request {
    method: String,
    path: String,
    keep_alive: bool,
    content_length: usize,
}

/// Reads one request head; `Ok(None)` on a clean EOF before any byte.
fn read_request(r: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut total = line.len();
    let mut parts = line.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let target = parts.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_string();
    let version = parts.next().unwrap_or("HTTP/1.0").to_string();
    let mut keep_alive = version == "HTTP/1.1";
    let mut content_length = 0usize;
    loop {
        let mut h = String::new();
        let n = r.read_line(&mut h)?;
        total += n;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if total > MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request head too long",
            ));
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("connection") {
                if v.eq_ignore_ascii_case("close") {
                    keep_alive = false;
                } else if v.eq_ignore_ascii_case("keep-alive") {
                    keep_alive = true;
                }
            } else if k.eq_ignore_ascii_case("content-length") {
                content_length = v.parse().map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidData, "bad Content-Length")
                })?;
            }
        }
    }
    Ok(Some(Request {
        method,
        path,
        keep_alive,
        content_length,
    }))
}

fn handle_conn(name: &str, stream: TcpStream, fail_file: Option<&Path>) -> io::Result<()> {
    // A server listening on `[::]` sees IPv4 peers as `::ffff:a.b.c.d`: report them as IPv4.
    let peer = SocketAddr::new(stream.peer_addr()?.ip().to_canonical(), 0);
    let local = SocketAddr::new(stream.local_addr()?.ip().to_canonical(), 0);
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut writer = stream;
    while let Some(req) = read_request(&mut reader)? {
        // Discard any request body.
        io::copy(
            &mut (&mut reader).take(req.content_length as u64),
            &mut io::sink(),
        )?;
        let (status, body) = match (req.method.as_str(), req.path.as_str()) {
            ("GET" | "HEAD", "/hello") if fail_file.is_some_and(Path::exists) => {
                ("503 Service Unavailable", "failing\n".to_string())
            }
            ("GET" | "HEAD", "/hello") => ("200 OK", echo_body(name, peer.ip(), local.ip())),
            _ => ("404 Not Found", "not found\n".to_string()),
        };
        let mut resp = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n",
            body.len()
        );
        if !req.keep_alive {
            resp.push_str("Connection: close\r\n");
        }
        resp.push_str("\r\n");
        if req.method != "HEAD" {
            resp.push_str(&body);
        }
        writer.write_all(resp.as_bytes())?;
        writer.flush()?;
        if !req.keep_alive {
            break;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn body_matches_seed_format() {
        let b = echo_body(
            "url-analysis-deployment-547845566c-hgnlm",
            IpAddr::V4(Ipv4Addr::new(192, 168, 235, 192)),
            IpAddr::V4(Ipv4Addr::new(192, 168, 169, 144)),
        );
        assert_eq!(
            b,
            "ClientIp : 192.168.235.192, ServerName : url-analysis-deployment-547845566c-hgnlm, ServerIp : 192.168.169.144\n"
        );
    }

    #[test]
    fn parses_request_head() {
        let raw = b"GET /hello?x=1 HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: 3\r\n\r\nabc";
        let mut r = io::Cursor::new(&raw[..]);
        let req = read_request(&mut r).expect("io").expect("request");
        assert_eq!(req.method, "GET");
        assert_eq!(req.path, "/hello");
        assert!(!req.keep_alive);
        assert_eq!(req.content_length, 3);
        let mut empty = io::Cursor::new(&b""[..]);
        assert!(read_request(&mut empty).expect("io").is_none());
    }

    #[test]
    fn serves_keep_alive_and_404_on_loopback() {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        std::thread::spawn(move || serve_echo_listener("p1", l));
        let mut s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let want = echo_body("p1", addr.ip(), addr.ip());
        for _ in 0..2 {
            let r = crate::http::get(&mut s, "/hello").expect("get");
            assert_eq!((r.status, r.body.as_str()), (200, want.as_str()));
        }
        let r = crate::http::get(&mut s, "/nope").expect("get");
        assert_eq!(r.status, 404);
    }

    #[test]
    fn hello_fails_while_the_pods_fail_file_exists() {
        let dir = tempfile::tempdir().expect("tempdir");
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let fail_dir = dir.path().to_path_buf();
        std::thread::spawn(move || serve_echo_listener_failing("p1", l, Some(&fail_dir)));
        let status = || {
            let mut s = TcpStream::connect(addr).expect("connect");
            s.set_read_timeout(Some(Duration::from_secs(5)))
                .expect("timeout");
            crate::http::get(&mut s, "/hello").expect("get").status
        };
        assert_eq!(status(), 200);
        std::fs::write(dir.path().join("p1"), "").expect("fail");
        assert_eq!(status(), 503);
        std::fs::remove_file(dir.path().join("p1")).expect("recover");
        assert_eq!(status(), 200);
    }
}
