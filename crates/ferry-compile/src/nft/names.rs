//! Stable, readable chain names.

use data_encoding::BASE32;
use sha2::{Digest, Sha256};

use ferry_model::ServicePortName;

/// Prefix of a service port's cluster-set chain (upstream's "service-" chain).
pub const SERVICE_PREFIX: &str = "service-";
/// Prefix of a service port's local-set chain.
pub const LOCAL_PREFIX: &str = "local-";
/// Prefix of a service port's external-traffic chain.
pub const EXTERNAL_PREFIX: &str = "external-";

/// `HASH-namespace/name/protocol/port`, as upstream's nftables mode names chains: the first 8
/// characters of the base32 SHA-256 of `namespace/name:port` + protocol keep names unique, the
/// rest keeps them readable in `nft list`.
pub fn chain_base(name: &ServicePortName) -> String {
    let proto = name.protocol.as_str();
    let digest = Sha256::digest(format!("{name}{proto}").as_bytes());
    let hash = BASE32.encode(&digest);
    format!(
        "{}-{}/{}/{}/{}",
        &hash[..8],
        name.service.namespace,
        name.service.name,
        proto,
        name.port
    )
}
