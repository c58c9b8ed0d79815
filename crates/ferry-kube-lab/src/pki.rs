//! The lab cluster's certificates and keys, made fresh for every control plane (rcgen, ECDSA
//! P-256): a cluster CA, the API server's serving certificate, client certificates for the lab's
//! administrator (`system:masters`) and for kube-controller-manager, and the ServiceAccount
//! token signing key. Written as PEM files into the control plane's folder.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};

/// Files of the cluster's PKI, all under one folder.
#[derive(Debug, Clone)]
pub struct Pki {
    /// The cluster CA's certificate (what a Pod finds as `ca.crt`).
    pub ca: PathBuf,
    /// The API server's serving certificate and key.
    pub apiserver: (PathBuf, PathBuf),
    /// The lab administrator's client certificate and key (`system:masters`).
    pub admin: (PathBuf, PathBuf),
    /// kube-controller-manager's client certificate and key.
    pub controller_manager: (PathBuf, PathBuf),
    /// The ServiceAccount token signing key.
    pub service_account_key: PathBuf,
    /// Its public half (what the API server verifies tokens with).
    pub service_account_pub: PathBuf,
}

/// Why the PKI could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    /// rcgen refused.
    #[error("making the {what}: {source}")]
    Rcgen {
        /// Which certificate or key.
        what: &'static str,
        /// rcgen's error.
        source: rcgen::Error,
    },
    /// A file could not be written.
    #[error("writing {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The error.
        source: std::io::Error,
    },
}

impl Pki {
    /// Makes every certificate and key under `dir`. `addresses` and `names` are the API
    /// server's subject alternative names (every address it is reached at).
    pub fn create(dir: &Path, addresses: &[IpAddr], names: &[&str]) -> Result<Pki, PkiError> {
        let rc = |what| move |source| PkiError::Rcgen { what, source };
        let ca_key = KeyPair::generate().map_err(rc("CA key"))?;
        let mut ca_params = CertificateParams::default();
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "ferry-lab-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key).map_err(rc("CA"))?;
        let ca = write(dir, "ca.crt", &ca_cert.pem())?;
        let issuer = Issuer::new(ca_params, ca_key);

        let mut sans: Vec<SanType> = addresses.iter().map(|a| SanType::IpAddress(*a)).collect();
        for n in names {
            sans.push(SanType::DnsName(
                (*n).try_into().map_err(rc("API server name"))?,
            ));
        }
        let apiserver = leaf(
            dir,
            "apiserver",
            "kube-apiserver",
            None,
            sans,
            ExtendedKeyUsagePurpose::ServerAuth,
            &issuer,
        )?;
        let admin = leaf(
            dir,
            "admin",
            "ferry-lab-admin",
            Some("system:masters"),
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
            &issuer,
        )?;
        let controller_manager = leaf(
            dir,
            "controller-manager",
            "system:kube-controller-manager",
            None,
            Vec::new(),
            ExtendedKeyUsagePurpose::ClientAuth,
            &issuer,
        )?;
        let sa = KeyPair::generate().map_err(rc("ServiceAccount key"))?;
        let service_account_key = write(dir, "sa.key", &sa.serialize_pem())?;
        let service_account_pub = write(dir, "sa.pub", &sa.public_key_pem())?;
        Ok(Pki {
            service_account_pub,
            ca,
            apiserver,
            admin,
            controller_manager,
            service_account_key,
        })
    }
}

/// A key and a certificate signed by the CA: `<file>.crt`, `<file>.key`.
fn leaf(
    dir: &Path,
    file: &str,
    common_name: &str,
    organization: Option<&str>,
    sans: Vec<SanType>,
    usage: ExtendedKeyUsagePurpose,
    issuer: &Issuer<'_, KeyPair>,
) -> Result<(PathBuf, PathBuf), PkiError> {
    let rc = |source| PkiError::Rcgen {
        what: "certificate",
        source,
    };
    let key = KeyPair::generate().map_err(rc)?;
    let mut params = CertificateParams::default();
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    if let Some(o) = organization {
        params.distinguished_name.push(DnType::OrganizationName, o);
    }
    params.subject_alt_names = sans;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    let cert = params.signed_by(&key, issuer).map_err(rc)?;
    Ok((
        write(dir, &format!("{file}.crt"), &cert.pem())?,
        write(dir, &format!("{file}.key"), &key.serialize_pem())?,
    ))
}

fn write(dir: &Path, name: &str, text: &str) -> Result<PathBuf, PkiError> {
    let path = dir.join(name);
    std::fs::write(&path, text).map_err(|source| PkiError::Write {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// A kubeconfig for one user of the cluster at `server`: `auth` is the `user:` section's
/// lines (client certificate, `token`, or `tokenFile`), indented by four spaces.
pub fn kubeconfig(server: &str, ca: &Path, user: &str, auth: &[(&str, String)]) -> String {
    let mut text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: lab\n  cluster:\n    server: {server}\n    \
         certificate-authority: {}\ncontexts:\n- name: {user}@lab\n  context:\n    cluster: lab\n    \
         user: {user}\ncurrent-context: {user}@lab\nusers:\n- name: {user}\n  user:\n",
        ca.display()
    );
    for (key, value) in auth {
        text.push_str(&format!("    {key}: {value}\n"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_is_written_as_pem() {
        let dir = tempfile::tempdir().expect("tempdir");
        let pki = Pki::create(
            dir.path(),
            &["10.1.1.200".parse().expect("ip")],
            &["kubernetes"],
        )
        .expect("pki");
        for f in [&pki.ca, &pki.apiserver.0, &pki.admin.0] {
            let text = std::fs::read_to_string(f).expect("read");
            assert!(text.starts_with("-----BEGIN CERTIFICATE-----"), "{text}");
        }
        let key = std::fs::read_to_string(&pki.service_account_key).expect("read");
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
    }

    #[test]
    fn a_kubeconfig_names_the_server_the_ca_and_the_user() {
        let text = kubeconfig(
            "https://10.1.1.200:6443",
            Path::new("/x/ca.crt"),
            "ferry",
            &[("tokenFile", "/x/token".into())],
        );
        assert!(text.contains("server: https://10.1.1.200:6443"), "{text}");
        assert!(text.contains("certificate-authority: /x/ca.crt"), "{text}");
        assert!(text.contains("    tokenFile: /x/token\n"), "{text}");
        assert!(text.contains("current-context: ferry@lab"), "{text}");
    }
}
