//! The proxy ports of a userspace table left in the kernel (by this node's previous Ferry):
//! read back at start-up, so that the rules still in place keep pointing at the same
//! service ports once the new process listens again ([`ProxyPorts::restore`]).
//!
//! [`ProxyPorts::restore`]: ferry_compile::userspace::ProxyPorts::restore

use std::process::Command;

use serde_json::Value;

use ferry_compile::family::nft_family;
use ferry_compile::nft::TABLE;
use ferry_compile::userspace::service_port_of;
use ferry_model::{IpFamily, Protocol, ServicePortName};

use crate::Error;

/// The `proxy-ports` elements of Ferry's table of `family`: each service port (from the
/// element's comment) with its proxy port. Empty when there is no such table or set.
pub(crate) fn read(family: IpFamily) -> Result<Vec<(ServicePortName, u16)>, Error> {
    let out = Command::new("nft")
        .args([
            "-j",
            "list",
            "set",
            nft_family(family),
            TABLE,
            "proxy-ports",
        ])
        .output()
        .map_err(|source| Error::Spawn {
            program: "nft".into(),
            source,
        })?;
    if !out.status.success() {
        // No table, or a table of another mode (no such set): nothing to restore.
        return Ok(Vec::new());
    }
    let json: Value = serde_json::from_slice(&out.stdout).map_err(|e| Error::Rejected {
        program: "nft -j list set".into(),
        status: "unparsable output".into(),
        stderr: e.to_string(),
    })?;
    Ok(parse(&json))
}

/// The elements of `nft -j list set … proxy-ports` output; those that do not parse are
/// skipped.
pub(crate) fn parse(json: &Value) -> Vec<(ServicePortName, u16)> {
    let elems = json["nftables"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|o| o["set"]["elem"].as_array())
        .flatten();
    elems
        .filter_map(|e| {
            let elem = &e["elem"];
            let concat = elem["val"]["concat"].as_array()?;
            let protocol = match concat.first()?.as_str()? {
                "tcp" => Protocol::Tcp,
                "udp" => Protocol::Udp,
                _ => return None,
            };
            let port = u16::try_from(concat.get(1)?.as_u64()?).ok()?;
            let name = service_port_of(elem["comment"].as_str()?, protocol)?;
            Some((name, port))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_each_proxy_port_with_the_service_port_of_its_comment() {
        let json: Value = serde_json::from_str(
            r#"{"nftables": [{"metainfo": {}}, {"set": {"name": "proxy-ports", "elem": [
                {"elem": {"val": {"concat": ["tcp", 46744]}, "comment": "dev/url-analysis:http"}},
                {"elem": {"val": {"concat": ["udp", 40053]}, "comment": "kube-system/dns"}},
                {"elem": {"val": {"concat": ["tcp", 40054]}}}
            ]}}]}"#,
        )
        .expect("json");
        let got = parse(&json);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[0].0.to_string(), "dev/url-analysis:http");
        assert_eq!((got[0].0.protocol, got[0].1), (Protocol::Tcp, 46744));
        assert_eq!(got[1].0.port, "");
        assert_eq!((got[1].0.protocol, got[1].1), (Protocol::Udp, 40053));
    }
}
