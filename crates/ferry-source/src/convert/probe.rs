//! A container's `readinessProbe` → [`ferry_model::Probe`], with the API server's defaults.

use ferry_model::{HttpGetAction, HttpScheme, ObjectRef, Probe, ProbeHandler};
use k8s_openapi::api::core::v1 as k8s;

use super::{non_empty, port, port_ref};
use crate::InvalidObject;

/// Default `periodSeconds`.
pub const DEFAULT_PERIOD_SECONDS: u32 = 10;
/// Default `timeoutSeconds`.
pub const DEFAULT_TIMEOUT_SECONDS: u32 = 1;
/// Default `successThreshold`.
pub const DEFAULT_SUCCESS_THRESHOLD: u32 = 1;
/// Default `failureThreshold`.
pub const DEFAULT_FAILURE_THRESHOLD: u32 = 3;

/// Converts a probe found at `at` (e.g. `spec.containers[0].readinessProbe`).
pub(super) fn probe(p: &k8s::Probe, object: &ObjectRef, at: &str) -> Result<Probe, InvalidObject> {
    let handlers = [
        p.http_get.is_some(),
        p.tcp_socket.is_some(),
        p.grpc.is_some(),
        p.exec.is_some(),
    ];
    let handler = match handlers.iter().filter(|h| **h).count() {
        0 => Err("must have one of httpGet, tcpSocket, grpc or exec"),
        1 => Ok(()),
        _ => Err("must have only one of httpGet, tcpSocket, grpc or exec"),
    };
    handler.map_err(|reason| InvalidObject::new(object, at, reason))?;
    let handler = if let Some(h) = &p.http_get {
        ProbeHandler::HttpGet(http_get(h, object, &format!("{at}.httpGet"))?)
    } else if let Some(t) = &p.tcp_socket {
        ProbeHandler::TcpSocket {
            host: non_empty(t.host.as_deref()).map(Into::into),
            port: port_ref(&t.port, object, &format!("{at}.tcpSocket.port"))?,
        }
    } else if let Some(g) = &p.grpc {
        ProbeHandler::Grpc {
            port: port(g.port, object, &format!("{at}.grpc.port"))?,
            service: g.service.as_deref().unwrap_or("").into(),
        }
    } else {
        ProbeHandler::Exec
    };
    let seconds = |value: Option<i32>, name: &str, default: u32, min: i32| {
        match value {
            // The API server's defaulting turns an unset or zero value into the default.
            None | Some(0) => Ok(default),
            Some(v) if v >= min => Ok(v.unsigned_abs()),
            Some(v) => Err(InvalidObject::new(
                object,
                format!("{at}.{name}"),
                format!("must be greater than or equal to {min}, got {v}"),
            )),
        }
    };
    Ok(Probe {
        handler,
        initial_delay_seconds: seconds(p.initial_delay_seconds, "initialDelaySeconds", 0, 0)?,
        period_seconds: seconds(p.period_seconds, "periodSeconds", DEFAULT_PERIOD_SECONDS, 1)?,
        timeout_seconds: seconds(
            p.timeout_seconds,
            "timeoutSeconds",
            DEFAULT_TIMEOUT_SECONDS,
            1,
        )?,
        success_threshold: seconds(
            p.success_threshold,
            "successThreshold",
            DEFAULT_SUCCESS_THRESHOLD,
            1,
        )?,
        failure_threshold: seconds(
            p.failure_threshold,
            "failureThreshold",
            DEFAULT_FAILURE_THRESHOLD,
            1,
        )?,
    })
}

/// `httpGet`: the scheme (`HTTP` or `HTTPS`), header names and values as HTTP allows them, and
/// the path starting with `/` (kubelet's URL has one either way).
fn http_get(
    h: &k8s::HTTPGetAction,
    object: &ObjectRef,
    at: &str,
) -> Result<HttpGetAction, InvalidObject> {
    let scheme = match non_empty(h.scheme.as_deref()) {
        None | Some("HTTP") => HttpScheme::Http,
        Some("HTTPS") => HttpScheme::Https,
        Some(other) => {
            return Err(InvalidObject::new(
                object,
                format!("{at}.scheme"),
                format!("unsupported value {other:?} (want HTTP or HTTPS)"),
            ))
        }
    };
    let mut headers = Vec::new();
    for (i, header) in h.http_headers.iter().flatten().enumerate() {
        if http::HeaderName::from_bytes(header.name.as_bytes()).is_err() {
            return Err(InvalidObject::new(
                object,
                format!("{at}.httpHeaders[{i}].name"),
                format!("must be an HTTP header name, got {:?}", header.name),
            ));
        }
        if http::HeaderValue::from_str(&header.value).is_err() {
            return Err(InvalidObject::new(
                object,
                format!("{at}.httpHeaders[{i}].value"),
                "must be a valid HTTP header value (visible ASCII, spaces and tabs)",
            ));
        }
        headers.push((header.name.as_str().into(), header.value.as_str().into()));
    }
    let path = h.path.as_deref().unwrap_or("");
    let path = if path.starts_with('/') {
        path.into()
    } else {
        format!("/{path}").into()
    };
    Ok(HttpGetAction {
        scheme,
        host: non_empty(h.host.as_deref()).map(Into::into),
        path,
        port: port_ref(&h.port, object, &format!("{at}.port"))?,
        headers,
    })
}
