//! HTTP from inside the lab: running the real `curl` in a namespace and classifying what
//! happened ([`CurlResult`]), and a minimal keep-alive HTTP/1.1 client for a
//! [`std::net::TcpStream`] that lives in a namespace ([`get`]).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};
use std::time::Duration;

use crate::netns;

/// Errors of the keep-alive client [`get`].
#[derive(Debug, thiserror::Error)]
pub enum HttpError {
    /// Reading or writing the stream failed (including read timeouts).
    #[error("HTTP {op} on {peer}: {source}")]
    Io {
        /// `write request` or `read response`.
        op: &'static str,
        /// The stream's peer, as far as known.
        peer: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The response was not valid HTTP/1.x.
    #[error("bad HTTP response from {peer}: {detail}")]
    Malformed {
        /// The stream's peer, as far as known.
        peer: String,
        /// What was wrong.
        detail: String,
    },
}

/// Options of a `curl` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CurlOptions {
    /// `--connect-timeout` (default 2 s).
    pub connect_timeout: Duration,
    /// `--max-time` for the whole transfer (default 5 s, [`crate::scaled`]).
    pub max_time: Duration,
    /// Extra arguments, placed before the URL (e.g. `["--local-port", "40000"]`).
    pub extra_args: Vec<String>,
}

impl Default for CurlOptions {
    fn default() -> Self {
        CurlOptions {
            connect_timeout: crate::scaled(Duration::from_secs(2)),
            max_time: crate::scaled(Duration::from_secs(5)),
            extra_args: Vec::new(),
        }
    }
}

/// What a `curl` run amounted to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CurlResult {
    /// A response with status below 400; the body.
    Ok(String),
    /// A response with status 400 or more.
    Http {
        /// The status code.
        status: u16,
        /// The body.
        body: String,
    },
    /// The connection was refused (RST, or ICMP port unreachable): curl exit 7.
    Refused,
    /// Connect or transfer timed out: curl exit 28 (e.g. packets dropped).
    TimedOut,
    /// No route / host or network unreachable (curl exit 7); curl's stderr.
    Unreachable(String),
    /// The connection was reset or closed without a response after connecting (curl exit 52
    /// or 56); curl's stderr.
    Reset(String),
    /// Anything else; curl's exit code (-1 if killed) and stderr.
    Failed {
        /// curl's exit code.
        code: i32,
        /// The `curl:` error lines of stderr.
        stderr: String,
    },
}

impl CurlResult {
    /// The body of a successful response.
    pub fn body(&self) -> Option<&str> {
        match self {
            CurlResult::Ok(b) => Some(b),
            _ => None,
        }
    }

    /// True for [`CurlResult::Ok`].
    pub fn is_ok(&self) -> bool {
        matches!(self, CurlResult::Ok(_))
    }
}

/// Builds `ip netns exec <ns> curl -v -sS --max-time … --connect-timeout … <extra> <url>`.
/// (`-v` makes curl print the real connect error, e.g. "Connection refused", on stderr; the
/// body alone goes to stdout.)
pub fn curl_command(ns: &str, url: &str, opts: &CurlOptions) -> Command {
    let secs = |d: Duration| format!("{:.3}", d.as_secs_f64());
    let mut args = vec![
        "-v".to_string(),
        "-sS".to_string(),
        "--max-time".to_string(),
        secs(opts.max_time),
        "--connect-timeout".to_string(),
        secs(opts.connect_timeout),
    ];
    args.extend(opts.extra_args.iter().cloned());
    args.push(url.to_string());
    netns::exec_command(ns, "curl", args)
}

/// Classifies a finished `curl -v -sS` run.
pub fn classify(out: &Output) -> CurlResult {
    let stderr = String::from_utf8_lossy(&out.stderr);
    let body = String::from_utf8_lossy(&out.stdout).into_owned();
    let code = out.status.code().unwrap_or(-1);
    let errors: String = stderr
        .lines()
        .filter(|l| l.starts_with("curl:"))
        .collect::<Vec<_>>()
        .join("\n");
    let has = |s: &str| stderr.lines().any(|l| l.starts_with('*') && l.contains(s));
    match code {
        0 => {
            // Last status line wins (e.g. after a 100 Continue).
            let status = stderr
                .lines()
                .filter_map(|l| l.strip_prefix("< HTTP/"))
                .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u16>().ok())
                .next_back()
                .unwrap_or(200);
            if status >= 400 {
                CurlResult::Http { status, body }
            } else {
                CurlResult::Ok(body)
            }
        }
        7 if has("Connection refused") => CurlResult::Refused,
        7 if has("No route to host") || has("Network is unreachable") => {
            CurlResult::Unreachable(errors)
        }
        28 => CurlResult::TimedOut,
        52 | 56 => CurlResult::Reset(errors),
        _ => CurlResult::Failed {
            code,
            stderr: if errors.is_empty() {
                stderr.trim().to_string()
            } else {
                errors
            },
        },
    }
}

/// A response read by [`get`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpResponse {
    /// Status code.
    pub status: u16,
    /// Headers in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body (lossy UTF-8).
    pub body: String,
}

impl HttpResponse {
    /// The first header with this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends `GET <path> HTTP/1.1` with keep-alive on `stream` and reads one response, which must
/// carry `Content-Length` (as the lab's echo server's do). Use a read timeout on the stream
/// ([`crate::Lab::connect`] sets one) so a dead peer cannot block forever. Requests and
/// responses alternate, so nothing beyond the response is consumed from the stream.
pub fn get(stream: &mut TcpStream, path: &str) -> Result<HttpResponse, HttpError> {
    let peer = stream
        .peer_addr()
        .map_or_else(|_| "<unconnected>".to_string(), |a| a.to_string());
    let io_err = |op, source| HttpError::Io {
        op,
        peer: peer.clone(),
        source,
    };
    let bad = |detail: String| HttpError::Malformed {
        peer: peer.clone(),
        detail,
    };
    let req = format!("GET {path} HTTP/1.1\r\nHost: {peer}\r\nUser-Agent: ferry-lab\r\n\r\n");
    stream
        .write_all(req.as_bytes())
        .and_then(|()| stream.flush())
        .map_err(|e| io_err("write request", e))?;
    let mut r = BufReader::new(&*stream);
    let mut line = String::new();
    let n = r
        .read_line(&mut line)
        .map_err(|e| io_err("read response", e))?;
    if n == 0 {
        return Err(bad("connection closed before the status line".into()));
    }
    let status = line
        .strip_prefix("HTTP/1.")
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse::<u16>().ok())
        .ok_or_else(|| bad(format!("status line {:?}", line.trim_end())))?;
    let mut headers = Vec::new();
    loop {
        let mut h = String::new();
        if r.read_line(&mut h)
            .map_err(|e| io_err("read response", e))?
            == 0
        {
            return Err(bad("connection closed inside the headers".into()));
        }
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h
            .split_once(':')
            .ok_or_else(|| bad(format!("header line {h:?}")))?;
        headers.push((k.trim().to_string(), v.trim().to_string()));
    }
    let mut resp = HttpResponse {
        status,
        headers,
        body: String::new(),
    };
    let len: u64 = resp
        .header("content-length")
        .ok_or_else(|| bad("no Content-Length".into()))?
        .parse()
        .map_err(|_| bad("bad Content-Length".into()))?;
    let mut body = Vec::new();
    r.take(len)
        .read_to_end(&mut body)
        .map_err(|e| io_err("read response", e))?;
    if body.len() as u64 != len {
        return Err(bad(format!(
            "body ended after {} of {len} bytes",
            body.len()
        )));
    }
    resp.body = String::from_utf8_lossy(&body).into_owned();
    Ok(resp)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::ExitStatusExt;
    use std::process::ExitStatus;

    fn out(code: i32, stdout: &str, stderr: &str) -> Output {
        Output {
            status: ExitStatus::from_raw(code << 8),
            stdout: stdout.as_bytes().to_vec(),
            stderr: stderr.as_bytes().to_vec(),
        }
    }

    #[test]
    fn classifies_curl_outcomes() {
        let ok = out(0, "hi\n", "< HTTP/1.1 200 OK\n< Content-Length: 3\n");
        assert_eq!(classify(&ok), CurlResult::Ok("hi\n".into()));
        let nf = out(0, "nf", "< HTTP/1.1 404 Not Found\n");
        assert_eq!(
            classify(&nf),
            CurlResult::Http {
                status: 404,
                body: "nf".into()
            }
        );
        let refused = out(
            7,
            "",
            "* connect to 1.2.3.4 port 1 failed: Connection refused\ncurl: (7) Failed to connect\n",
        );
        assert_eq!(classify(&refused), CurlResult::Refused);
        let unreach = out(
            7,
            "",
            "* Immediate connect fail for 10.9.9.9: Network is unreachable\ncurl: (7) x\n",
        );
        assert_eq!(
            classify(&unreach),
            CurlResult::Unreachable("curl: (7) x".into())
        );
        assert_eq!(
            classify(&out(28, "", "curl: (28) t\n")),
            CurlResult::TimedOut
        );
        assert!(matches!(
            classify(&out(6, "", "curl: (6) dns\n")),
            CurlResult::Failed { code: 6, .. }
        ));
    }
}
