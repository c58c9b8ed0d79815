//! kubelet's HTTP probe (`pkg/probe/http`): a `GET` per connection, success 200–399, redirects
//! followed on the same host only.

use std::sync::Arc;

use bytes::Bytes;
use ferry_model::HttpScheme;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::check::USER_AGENT;
use super::threshold::Outcome;
use super::{tls, Target};

/// Redirects kubelet follows at most (Go's `http.Client` default).
const MAX_REDIRECTS: usize = 10;

/// Where one request goes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Url {
    scheme: HttpScheme,
    host: String,
    port: u16,
    path: String,
}

impl Url {
    fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Runs an `httpGet` probe: one `GET` on a fresh connection (`Connection: close`), with `Host`
/// from the probe's headers or the URL, and `User-Agent: kube-probe/…` and `Accept: */*` unless
/// the probe sets them (an empty `Accept` removes it). Success is a status from 200 to 399.
/// A redirect (301, 302, 303, 307, 308) to the same host name is followed, at most 10 times;
/// one to another host ends the probe with success, as kubelet's "probe terminated redirects"
/// warning does. Certificates are not verified (HTTPS).
pub(super) async fn probe(tls: &Arc<rustls::ClientConfig>, target: &Target) -> Outcome {
    let Target::Http {
        scheme,
        host,
        port,
        path,
        headers,
    } = target
    else {
        return Outcome::Error("not an HTTP probe".into());
    };
    let mut url = Url {
        scheme: *scheme,
        host: host.to_string(),
        port: *port,
        path: path.to_string(),
    };
    for _ in 0..=MAX_REDIRECTS {
        let (status, location) = match get(tls, &url, headers).await {
            Ok(answer) => answer,
            Err(e) => return Outcome::Failure(format!("{target}: {e}")),
        };
        let redirect = matches!(status, 301 | 302 | 303 | 307 | 308);
        match location.filter(|_| redirect) {
            Some(location) => match follow(&url, &location) {
                Some(next) if next.host == **host => url = next,
                // Another host (or a Location Ferry cannot follow): kubelet stops there and
                // counts the redirect itself, a 3xx, as success.
                _ => return Outcome::Success,
            },
            None if (200..400).contains(&status) => return Outcome::Success,
            None => {
                return Outcome::Failure(format!("HTTP probe failed with statuscode: {status}"))
            }
        }
    }
    Outcome::Failure(format!("{target}: stopped after {MAX_REDIRECTS} redirects"))
}

/// The URL a `Location` header points to, from `url`.
fn follow(url: &Url, location: &str) -> Option<Url> {
    if location.starts_with('/') {
        return Some(Url {
            path: location.to_owned(),
            ..url.clone()
        });
    }
    let Ok(uri) = location.parse::<http::Uri>() else {
        return None;
    };
    let Some(scheme) = uri.scheme_str() else {
        // A relative path: next to the current one.
        let dir = url.path.rsplit_once('/').map_or("", |(dir, _)| dir);
        return Some(Url {
            path: format!("{dir}/{location}"),
            ..url.clone()
        });
    };
    let (scheme, default_port) = match scheme {
        "http" => (HttpScheme::Http, 80),
        "https" => (HttpScheme::Https, 443),
        _ => return None,
    };
    let host = uri.host()?.trim_start_matches('[').trim_end_matches(']');
    Some(Url {
        scheme,
        host: host.to_owned(),
        port: uri.port_u16().unwrap_or(default_port),
        path: uri
            .path_and_query()
            .map_or_else(|| "/".to_owned(), |p| p.as_str().to_owned()),
    })
}

/// One `GET`; the status and the `Location` header.
async fn get(
    tls: &Arc<rustls::ClientConfig>,
    url: &Url,
    headers: &[(Box<str>, Box<str>)],
) -> Result<(u16, Option<String>), String> {
    let authority = url.authority();
    let stream = TcpStream::connect(&authority)
        .await
        .map_err(|e| format!("dial tcp {authority}: {e}"))?;
    let mut request = http::Request::get(&url.path);
    let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
    if !has("host") {
        request = request.header(http::header::HOST, &authority);
    }
    if !has("user-agent") {
        request = request.header(http::header::USER_AGENT, USER_AGENT);
    }
    if !has("accept") {
        request = request.header(http::header::ACCEPT, "*/*");
    }
    let wanted =
        |(n, v): &&(Box<str>, Box<str>)| !v.is_empty() || !n.eq_ignore_ascii_case("accept");
    for (name, value) in headers.iter().filter(wanted) {
        request = request.header(&**name, &**value);
    }
    let request = request
        .header(http::header::CONNECTION, "close")
        .body(Empty::<Bytes>::new())
        .map_err(|e| format!("bad request: {e}"))?;
    let response = match url.scheme {
        HttpScheme::Http => exchange(TokioIo::new(stream), request).await,
        HttpScheme::Https => {
            let stream = tls::connect(tls, &url.host, stream)
                .await
                .map_err(|e| format!("TLS handshake: {e}"))?;
            exchange(TokioIo::new(stream), request).await
        }
    }
    .map_err(|e| e.to_string())?;
    let location = response
        .headers()
        .get(http::header::LOCATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    Ok((response.status().as_u16(), location))
}

/// Sends one request on a new HTTP/1.1 connection; returns the response (its body unread).
async fn exchange<IO>(
    io: IO,
    request: http::Request<Empty<Bytes>>,
) -> Result<http::Response<hyper::body::Incoming>, hyper::Error>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    // The connection task ends with the exchange (the request says `Connection: close`) or
    // when the sender and the response are dropped.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    sender.send_request(request).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(path: &str) -> Url {
        Url {
            scheme: HttpScheme::Http,
            host: "10.0.0.1".into(),
            port: 8080,
            path: path.into(),
        }
    }

    #[test]
    fn locations_resolve_like_a_browser() {
        let cases = [
            ("/ready", Some(url("/ready"))),
            ("ready", Some(url("/a/ready"))),
            (
                "http://10.0.0.1:9090/x?y=1",
                Some(Url {
                    port: 9090,
                    ..url("/x?y=1")
                }),
            ),
            (
                "https://10.0.0.2/",
                Some(Url {
                    scheme: HttpScheme::Https,
                    host: "10.0.0.2".into(),
                    port: 443,
                    path: "/".into(),
                }),
            ),
            ("ftp://10.0.0.1/", None),
        ];
        for (location, want) in cases {
            assert_eq!(follow(&url("/a/b"), location), want, "{location}");
        }
    }
}
