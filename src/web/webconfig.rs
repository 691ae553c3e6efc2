//! `--web.config.file`: TLS, basic authentication and response headers of the exporter's own
//! port, in the file format of Prometheus' exporter-toolkit (`tls_server_config`,
//! `http_server_config`, `basic_auth_users`, `auth_excluded_paths`).
//!
//! Why that format: operators already write it for node_exporter and Prometheus itself, and
//! Prometheus' `promtool check web-config` reads it. Field names, values and defaults are the
//! toolkit's; keys it knows that rustls cannot honour are refused by name rather than ignored,
//! so a file never promises more than the port does.
//!
//! Why re-read: like the toolkit, the file is read again for every TLS handshake (certificate,
//! key and client CA included) and for every request (users, headers), so a renewed certificate,
//! a new user or a revoked one takes effect without a restart or a reload signal. The parsed file
//! and the built TLS configuration are kept while their bytes are unchanged, so a steady file
//! costs a read and a comparison, not a parse. A file that turns unreadable or invalid refuses
//! (handshake failure, 500) and is logged; it never falls back to an open or plain port. Whether
//! the port speaks TLS is decided at startup.

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::http::{HeaderName, HeaderValue};
use rustls::crypto::{CryptoProvider, SupportedKxGroup, aws_lc_rs};
use rustls::pki_types::CertificateDer;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::{ServerConfig, WebPkiClientVerifier};
use rustls::{DistinguishedName, RootCertStore, SupportedCipherSuite, SupportedProtocolVersion};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::throttle::Throttle;
use crate::config::{PemSource, TlsVersion};
use mcp_client::net::files;

/// Largest web configuration file, certificate chain, key or CA bundle read: far above any real
/// one, and a bound on what a mistaken path (a log file, a device) can make us hold.
const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// Headers `http_server_config.headers` may set, with their allowed values (none: any). The
/// toolkit's list, kept the same for consistency across the Prometheus ecosystem.
const ALLOWED_HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// A web configuration file that cannot be used, with the file and the field at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebConfigError {
    pub path: PathBuf,
    /// Like `tls_server_config.cert_file`; `None` for read and YAML errors (whose message
    /// carries the key and line).
    pub field: Option<String>,
    pub why: String,
}

impl fmt::Display for WebConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "--web.config.file {}: ", self.path.display())?;
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.why)
    }
}

impl std::error::Error for WebConfigError {}

/// The file as written; every key of the toolkit is known here, so an unknown one is a typo.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawFile {
    tls_server_config: Option<RawTls>,
    http_server_config: Option<RawHttp>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    auth_excluded_paths: Option<Vec<String>>,
    rate_limit: Option<RawRateLimit>,
}

/// `rate_limit`, as in the toolkit: a token bucket over every request of the port.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawRateLimit {
    /// Go duration: time between two requests (one token per interval); 0 disables.
    interval: Option<String>,
    /// Requests allowed at once (the bucket's size).
    burst: Option<u32>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_ca_file: Option<String>,
    client_auth_type: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    curve_preferences: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    client_allowed_sans: Option<Vec<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawHttp {
    /// Accepted for compatibility; the port serves HTTP/1.1 only.
    #[allow(dead_code)]
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

/// The toolkit's `client_auth_type` (Go's `tls.ClientAuthType` names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    NoClientCert,
    /// Ask for a certificate; accept the connection without one, and any certificate unverified.
    RequestClientCert,
    /// Require a certificate, not verified against a CA.
    RequireAnyClientCert,
    /// Verify a certificate against `client_ca_file` when one is sent.
    VerifyClientCertIfGiven,
    /// Require a certificate signed by `client_ca_file`: the one setting that authenticates.
    RequireAndVerifyClientCert,
}

impl ClientAuth {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "" | "NoClientCert" => ClientAuth::NoClientCert,
            "RequestClientCert" => ClientAuth::RequestClientCert,
            // The second name is the toolkit's old spelling, still accepted there.
            "RequireAnyClientCert" | "RequireClientCert" => ClientAuth::RequireAnyClientCert,
            "VerifyClientCertIfGiven" => ClientAuth::VerifyClientCertIfGiven,
            "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerifyClientCert,
            _ => return None,
        })
    }

    fn verifies(self) -> bool {
        matches!(
            self,
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert
        )
    }
}

/// `tls_server_config`, checked.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    cert: PemSource,
    key: PemSource,
    client_ca: Option<PemSource>,
    pub client_auth: ClientAuth,
    versions: Vec<&'static SupportedProtocolVersion>,
    /// `cipher_suites`: the TLS 1.2 suites allowed, in order; `None` for rustls' defaults.
    /// TLS 1.3 suites are not configurable (as in Go).
    tls12_suites: Option<Vec<SupportedCipherSuite>>,
    /// `curve_preferences`, in order; `None` for rustls' defaults.
    curves: Option<Vec<&'static dyn SupportedKxGroup>>,
    prefer_server_cipher_suites: bool,
}

/// The web configuration file, checked.
#[derive(Debug, Clone)]
pub struct WebConfig {
    /// `None`: plain HTTP (no `tls_server_config`, or one without any certificate setting).
    pub tls: Option<TlsSettings>,
    /// `http_server_config.headers` to add to every response (blank values left out).
    pub headers: Vec<(HeaderName, HeaderValue)>,
    /// `basic_auth_users`: user → bcrypt hash. Empty: no basic authentication.
    pub users: BTreeMap<String, String>,
    /// `auth_excluded_paths`: request paths served without basic authentication.
    pub excluded_paths: HashSet<String>,
    /// `rate_limit`; `None` when absent or its interval is 0.
    pub rate_limit: Option<RateLimit>,
}

/// `rate_limit`, checked: one request per `interval` on average, `burst` at once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub interval: Duration,
    pub burst: u32,
}

/// `rate_limit` of the file: `None` when absent or disabled (an interval of 0, as in the
/// toolkit); a burst of 0 would refuse every request, so it is an error rather than that.
fn rate_limit(raw: Option<RawRateLimit>) -> Result<Option<RateLimit>, (String, String)> {
    let Some(raw) = raw else { return Ok(None) };
    let interval = match given(raw.interval) {
        None => Duration::ZERO,
        Some(text) if text.trim() == "0" => Duration::ZERO,
        Some(text) => humantime::parse_duration(text.trim()).map_err(|e| {
            (
                "rate_limit.interval".to_string(),
                format!("{text:?} is not a duration (such as 100ms, 1s, 1m): {e}"),
            )
        })?,
    };
    if interval.is_zero() {
        return Ok(None);
    }
    match raw.burst.unwrap_or(0) {
        0 => Err((
            "rate_limit.burst".into(),
            "0 with a non-zero interval would refuse every request; at least 1".into(),
        )),
        burst => Ok(Some(RateLimit { interval, burst })),
    }
}

/// Go's zero value: an empty string is the same as no value.
fn given(s: Option<String>) -> Option<String> {
    s.filter(|s| !s.is_empty())
}

/// Parse and check the text of the file at `path` (relative paths in it are against its folder).
fn parse(path: &Path, text: &[u8]) -> Result<WebConfig, WebConfigError> {
    let err = |field: &str, why: String| WebConfigError {
        path: path.to_owned(),
        field: Some(field.to_string()),
        why,
    };
    let raw: RawFile = if text.iter().all(u8::is_ascii_whitespace) {
        RawFile::default()
    } else {
        yaml_serde::from_slice(text).map_err(|e| WebConfigError {
            path: path.to_owned(),
            field: None,
            why: e.to_string(),
        })?
    };
    let rate_limit = rate_limit(raw.rate_limit).map_err(|(field, why)| err(&field, why))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let tls = match raw.tls_server_config {
        Some(t) => tls_settings(t, dir).map_err(|(field, why)| err(&field, why))?,
        None => None,
    };
    let mut headers = Vec::new();
    for (name, value) in raw
        .http_server_config
        .and_then(|h| h.headers)
        .unwrap_or_default()
    {
        let field = format!("http_server_config.headers.{name}");
        let Some((_, allowed)) = ALLOWED_HEADERS.iter().find(|(n, _)| *n == name) else {
            let names: Vec<_> = ALLOWED_HEADERS.iter().map(|(n, _)| *n).collect();
            return Err(err(
                &field,
                format!(
                    "this header can not be configured (allowed: {})",
                    names.join(", ")
                ),
            ));
        };
        if !allowed.is_empty() && !allowed.contains(&value.as_str()) {
            return Err(err(
                &field,
                format!("expected one of {allowed:?}, got {value:?}"),
            ));
        }
        if value.is_empty() {
            continue;
        }
        let value = HeaderValue::from_str(&value)
            .map_err(|_| err(&field, "not a valid header value".into()))?;
        headers.push((
            HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| err(&field, "not a valid header name".into()))?,
            value,
        ));
    }
    let users = raw.basic_auth_users.unwrap_or_default();
    for (user, hash) in &users {
        // Never echo the hash: it is what an attacker would brute-force offline.
        if bcrypt::HashParts::from_str(hash).is_err() {
            return Err(err(
                &format!("basic_auth_users.{user}"),
                "not a bcrypt hash (e.g. from `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)".into(),
            ));
        }
    }
    Ok(WebConfig {
        tls,
        headers,
        users,
        excluded_paths: raw
            .auth_excluded_paths
            .unwrap_or_default()
            .into_iter()
            .collect(),
        rate_limit,
    })
}

fn pem_source(
    inline: Option<String>,
    file: Option<String>,
    name: &str,
    dir: &Path,
) -> Result<Option<PemSource>, (String, String)> {
    match (given(inline), given(file)) {
        (Some(_), Some(_)) => Err((
            format!("tls_server_config.{name}"),
            format!("give either {name} or {name}_file, not both"),
        )),
        (Some(pem), None) => Ok(Some(PemSource::Inline(pem))),
        (None, Some(f)) => Ok(Some(PemSource::File(dir.join(f)))),
        (None, None) => Ok(None),
    }
}

fn tls_version(field: &str, value: Option<String>) -> Result<Option<TlsVersion>, (String, String)> {
    given(value)
        .map(|name| {
            TlsVersion::parse(&name).map_err(|why| (format!("tls_server_config.{field}"), why))
        })
        .transpose()
}

fn tls_settings(raw: RawTls, dir: &Path) -> Result<Option<TlsSettings>, (String, String)> {
    let field = |f: &str| format!("tls_server_config.{f}");
    let cert = pem_source(raw.cert, raw.cert_file, "cert", dir)?;
    let key = pem_source(raw.key, raw.key_file, "key", dir)?;
    let client_ca = pem_source(raw.client_ca, raw.client_ca_file, "client_ca", dir)?;
    let auth_given = given(raw.client_auth_type);
    // As in the toolkit: TLS is on when any of these is set, and then needs all it requires.
    if cert.is_none() && key.is_none() && client_ca.is_none() && auth_given.is_none() {
        return Ok(None);
    }
    let cert = cert.ok_or((
        field("cert_file"),
        "missing: TLS needs a certificate".into(),
    ))?;
    let key = key.ok_or((field("key_file"), "missing: TLS needs a private key".into()))?;
    let auth_text = auth_given.unwrap_or_default();
    let client_auth = ClientAuth::parse(&auth_text).ok_or_else(|| {
        (
            field("client_auth_type"),
            format!("invalid {auth_text:?} (NoClientCert, RequestClientCert, RequireAnyClientCert, VerifyClientCertIfGiven, RequireAndVerifyClientCert)"),
        )
    })?;
    if client_ca.is_some() && client_auth == ClientAuth::NoClientCert {
        return Err((
            field("client_ca_file"),
            "a client CA is configured without a client_auth_type that asks for client certificates".into(),
        ));
    }
    if client_ca.is_none() && client_auth.verifies() {
        return Err((
            field("client_ca_file"),
            format!(
                "required with client_auth_type {auth_text}: the CA that signs client certificates"
            ),
        ));
    }
    if raw.client_allowed_sans.is_some_and(|s| !s.is_empty()) {
        return Err((
            field("client_allowed_sans"),
            "not supported by mcp_exporter; let client_ca_file sign only the clients allowed"
                .into(),
        ));
    }
    let min = tls_version("min_version", raw.min_version)?;
    let max = tls_version("max_version", raw.max_version)?;
    let versions = mcp_client::net::tls::versions(min, max);
    if versions.is_empty() {
        return Err((field("min_version"), "is above max_version".into()));
    }
    let tls12_suites = match raw.cipher_suites.filter(|s| !s.is_empty()) {
        None => None,
        Some(names) => Some(cipher_suites(&names).map_err(|why| (field("cipher_suites"), why))?),
    };
    let curves = match raw.curve_preferences.filter(|c| !c.is_empty()) {
        None => None,
        Some(names) => Some(curves(&names).map_err(|why| (field("curve_preferences"), why))?),
    };
    Ok(Some(TlsSettings {
        cert,
        key,
        client_ca,
        client_auth,
        versions,
        tls12_suites,
        curves,
        prefer_server_cipher_suites: raw.prefer_server_cipher_suites.unwrap_or(true),
    }))
}

/// Go's names of the TLS 1.3 suites: accepted and, as in Go, without effect.
const TLS13_SUITE_NAMES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// `cipher_suites` by Go's names: the TLS 1.2 suites of the provider, in the order given.
fn cipher_suites(names: &[String]) -> Result<Vec<SupportedCipherSuite>, String> {
    let offered: Vec<SupportedCipherSuite> = aws_lc_rs::DEFAULT_CIPHER_SUITES
        .iter()
        .copied()
        .filter(|s| s.version() == &rustls::version::TLS12)
        .collect();
    let mut chosen = Vec::new();
    for name in names {
        if TLS13_SUITE_NAMES.contains(&name.as_str()) {
            continue;
        }
        match offered.iter().find(|s| format!("{:?}", s.suite()) == *name) {
            Some(s) => chosen.push(*s),
            None => {
                let names: Vec<_> = offered.iter().map(|s| format!("{:?}", s.suite())).collect();
                return Err(format!(
                    "{name:?} is not available (the exporter's TLS 1.2 suites: {})",
                    names.join(", ")
                ));
            }
        }
    }
    if chosen.is_empty()
        && names
            .iter()
            .all(|n| TLS13_SUITE_NAMES.contains(&n.as_str()))
    {
        // Only TLS 1.3 names: nothing restricts TLS 1.2, as in Go.
        return Ok(offered);
    }
    Ok(chosen)
}

/// `curve_preferences` by Go's names, in the order given.
fn curves(names: &[String]) -> Result<Vec<&'static dyn SupportedKxGroup>, String> {
    names
        .iter()
        .map(|name| match name.as_str() {
            "X25519" => Ok(aws_lc_rs::kx_group::X25519),
            "CurveP256" => Ok(aws_lc_rs::kx_group::SECP256R1),
            "CurveP384" => Ok(aws_lc_rs::kx_group::SECP384R1),
            "CurveP521" => Err(format!(
                "{name} is not supported by the exporter's TLS (X25519, CurveP256, CurveP384)"
            )),
            _ => Err(format!(
                "unknown curve {name:?} (X25519, CurveP256, CurveP384)"
            )),
        })
        .collect()
}

/// The TLS material of one handshake: the bytes read, then what rustls builds of them.
struct Material {
    cert: Vec<u8>,
    key: Vec<u8>,
    client_ca: Option<Vec<u8>>,
}

impl TlsSettings {
    fn field(&self, which: &str, pem: &PemSource) -> String {
        match pem {
            PemSource::Inline(_) => format!("tls_server_config.{which}"),
            PemSource::File(_) => format!("tls_server_config.{which}_file"),
        }
    }

    fn read(&self) -> Result<Material, (String, String)> {
        let read = |which: &str, pem: &PemSource| {
            files::read_pem(pem, MAX_FILE_BYTES).map_err(|e| (self.field(which, pem), e))
        };
        Ok(Material {
            cert: read("cert", &self.cert)?,
            key: read("key", &self.key)?,
            client_ca: self
                .client_ca
                .as_ref()
                .map(|p| read("client_ca", p))
                .transpose()?,
        })
    }

    /// The rustls configuration of `material`.
    fn build(&self, m: &Material) -> Result<ServerConfig, (String, String)> {
        let cert_field = self.field("cert", &self.cert);
        let key_field = self.field("key", &self.key);
        let chain = files::certificates(&m.cert).map_err(|e| (cert_field, e))?;
        let key = files::private_key(&m.key).map_err(|e| (key_field.clone(), e))?;

        let mut provider = aws_lc_rs::default_provider();
        if let Some(tls12) = &self.tls12_suites {
            provider
                .cipher_suites
                .retain(|s| s.version() != &rustls::version::TLS12);
            provider.cipher_suites.extend(tls12.iter().copied());
        }
        if let Some(curves) = &self.curves {
            provider.kx_groups = curves.clone();
        }
        let provider = Arc::new(provider);
        let verifier = self.verifier(m, &provider)?;
        let mut config = ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&self.versions)
            .map_err(|e| ("tls_server_config".to_string(), e.to_string()))?
            .with_client_cert_verifier(verifier)
            .with_single_cert(chain, key)
            .map_err(|e| {
                (
                    key_field,
                    format!("does not fit the certificate or is not usable: {e}"),
                )
            })?;
        config.ignore_client_order = self.prefer_server_cipher_suites;
        Ok(config)
    }

    fn verifier(
        &self,
        m: &Material,
        provider: &Arc<CryptoProvider>,
    ) -> Result<Arc<dyn ClientCertVerifier>, (String, String)> {
        let unverified = |mandatory| -> Arc<dyn ClientCertVerifier> {
            Arc::new(AnyClientCert {
                mandatory,
                provider: provider.clone(),
            })
        };
        Ok(match self.client_auth {
            ClientAuth::NoClientCert => WebPkiClientVerifier::no_client_auth(),
            ClientAuth::RequestClientCert => unverified(false),
            ClientAuth::RequireAnyClientCert => unverified(true),
            ClientAuth::VerifyClientCertIfGiven | ClientAuth::RequireAndVerifyClientCert => {
                let pem = self.client_ca.as_ref().expect("checked at parse");
                let field = self.field("client_ca", pem);
                let mut roots = RootCertStore::empty();
                let certs = files::certificates(m.client_ca.as_deref().unwrap_or_default())
                    .map_err(|e| (field.clone(), e))?;
                for cert in certs {
                    roots.add(cert).map_err(|e| {
                        (field.clone(), format!("not a usable CA certificate: {e}"))
                    })?;
                }
                let builder =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider.clone());
                let builder = if self.client_auth == ClientAuth::VerifyClientCertIfGiven {
                    builder.allow_unauthenticated()
                } else {
                    builder
                };
                builder.build().map_err(|e| (field, e.to_string()))?
            }
        })
    }
}

/// `RequestClientCert` / `RequireAnyClientCert`: a client certificate is taken without a CA,
/// as in Go; the handshake still proves the client holds its key.
#[derive(Debug)]
struct AnyClientCert {
    mandatory: bool,
    provider: Arc<CryptoProvider>,
}

impl ClientCertVerifier for AnyClientCert {
    fn client_auth_mandatory(&self) -> bool {
        self.mandatory
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The `--web.config.file` of a running port: re-read on every handshake and request.
pub struct WebConfigFile {
    path: PathBuf,
    /// Whether the port speaks TLS: decided by the file at startup, for the life of the process.
    tls: bool,
    /// The last file read and what it parsed to.
    parsed: Mutex<Option<(Vec<u8>, Arc<WebConfig>)>>,
    /// Digest of the file and TLS material of the last handshake, and the configuration built.
    built: Mutex<Option<([u8; 32], Arc<ServerConfig>)>>,
    /// One error line per period while the file stays broken.
    failing: Mutex<Throttle>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl WebConfigFile {
    /// Read and check the file at startup, TLS material included: any problem is an error
    /// naming the file and the field, and the exporter does not start.
    pub fn open(path: PathBuf) -> Result<Self, WebConfigError> {
        let mut file = WebConfigFile {
            path,
            tls: false,
            parsed: Mutex::new(None),
            built: Mutex::new(None),
            failing: Mutex::new(Throttle::default()),
        };
        let config = file.current()?;
        if config.tls.is_some() {
            file.tls = true;
            file.tls_config()?;
        }
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the port speaks TLS.
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// The file as it is now (blocking: a file read).
    pub fn current(&self) -> Result<Arc<WebConfig>, WebConfigError> {
        self.current_with_bytes().map(|(_, c)| c)
    }

    fn current_with_bytes(&self) -> Result<(Vec<u8>, Arc<WebConfig>), WebConfigError> {
        let bytes =
            files::read_bounded(&self.path, MAX_FILE_BYTES).map_err(|why| WebConfigError {
                path: self.path.clone(),
                field: None,
                why,
            })?;
        let mut parsed = lock(&self.parsed);
        if let Some((seen, config)) = &*parsed
            && *seen == bytes
        {
            return Ok((bytes, config.clone()));
        }
        let config = Arc::new(parse(&self.path, &bytes)?);
        *parsed = Some((bytes.clone(), config.clone()));
        Ok((bytes, config))
    }

    /// The TLS configuration for a new handshake, from the file and the TLS material as they
    /// are now (blocking: file reads). Errors when the file no longer configures TLS: the port
    /// never turns plain.
    pub fn tls_config(&self) -> Result<Arc<ServerConfig>, WebConfigError> {
        let (bytes, config) = self.current_with_bytes()?;
        let err = |(field, why): (String, String)| WebConfigError {
            path: self.path.clone(),
            field: Some(field),
            why,
        };
        let Some(tls) = &config.tls else {
            return Err(err((
                "tls_server_config".into(),
                "no longer configures TLS; the port stays TLS until the exporter restarts".into(),
            )));
        };
        let material = tls.read().map_err(err)?;
        let mut digest = Sha256::new();
        for part in [
            Some(&bytes),
            Some(&material.cert),
            Some(&material.key),
            material.client_ca.as_ref(),
        ] {
            let part = part.map(Vec::as_slice).unwrap_or_default();
            digest.update((part.len() as u64).to_be_bytes());
            digest.update(part);
        }
        let digest: [u8; 32] = digest.finalize().into();
        let mut built = lock(&self.built);
        if let Some((seen, server)) = &*built
            && *seen == digest
        {
            return Ok(server.clone());
        }
        let server = Arc::new(tls.build(&material).map_err(err)?);
        *built = Some((digest, server.clone()));
        Ok(server)
    }

    /// Log a runtime failure to use the file: one line per period while it stays broken.
    pub fn report(&self, error: &WebConfigError, refused: &str) {
        if let Some(failures) = lock(&self.failing).hit(Instant::now()) {
            tracing::error!(error = %error, failures, "web configuration file unusable; {refused}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Result<WebConfig, WebConfigError> {
        parse(Path::new("/etc/web.yml"), text.as_bytes())
    }

    fn field_of(text: &str) -> String {
        let e = parsed(text).expect_err("refused");
        e.field.clone().unwrap_or_else(|| e.why.clone())
    }

    #[test]
    fn an_empty_file_is_plain_and_open() {
        let c = parsed("").unwrap();
        assert!(c.tls.is_none() && c.users.is_empty() && c.headers.is_empty());
        let c = parsed("tls_server_config:\n  min_version: TLS13\n").unwrap();
        assert!(
            c.tls.is_none(),
            "no certificate setting: TLS stays off, as in the toolkit"
        );
    }

    #[test]
    fn unknown_keys_are_refused_with_their_name() {
        assert!(field_of("tls_server_config:\n  cert_fil: x\n").contains("cert_fil"));
        assert!(field_of("basic_auth_user: {}\n").contains("basic_auth_user"));
    }

    #[test]
    fn rate_limit_is_the_toolkits_token_bucket() {
        let c = parsed("rate_limit:\n  interval: 100ms\n  burst: 5\n").unwrap();
        assert_eq!(
            c.rate_limit,
            Some(RateLimit {
                interval: Duration::from_millis(100),
                burst: 5
            })
        );
        for off in [
            "rate_limit: {}\n",
            "rate_limit:\n  interval: 0\n  burst: 3\n",
            "",
        ] {
            assert_eq!(parsed(off).unwrap().rate_limit, None, "{off}");
        }
        assert_eq!(
            field_of("rate_limit:\n  interval: 1s\n"),
            "rate_limit.burst"
        );
        assert_eq!(
            field_of("rate_limit:\n  interval: often\n  burst: 1\n"),
            "rate_limit.interval"
        );
        assert!(field_of("rate_limit:\n  interval: 1s\n  bursts: 1\n").contains("bursts"));
    }

    #[test]
    fn toolkit_keys_rustls_cannot_honour_are_refused_by_name() {
        let t = "tls_server_config:\n  cert_file: c\n  key_file: k\n";
        assert_eq!(
            field_of(&format!(
                "{t}  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca\n  client_allowed_sans: [a]\n"
            )),
            "tls_server_config.client_allowed_sans"
        );
        assert_eq!(
            field_of(&format!("{t}  min_version: TLS10\n")),
            "tls_server_config.min_version"
        );
        assert_eq!(
            field_of(&format!("{t}  curve_preferences: [CurveP521]\n")),
            "tls_server_config.curve_preferences"
        );
        assert_eq!(
            field_of(&format!(
                "{t}  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n"
            )),
            "tls_server_config.cipher_suites"
        );
    }

    #[test]
    fn tls_settings_are_checked_as_in_the_toolkit() {
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: c\n"),
            "tls_server_config.key_file"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert_file: c\n  key_file: k\n  client_ca_file: ca\n"),
            "tls_server_config.client_ca_file"
        );
        assert_eq!(
            field_of(
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  client_auth_type: Maybe\n"
            ),
            "tls_server_config.client_auth_type"
        );
        assert_eq!(
            field_of("tls_server_config:\n  cert: x\n  cert_file: c\n  key_file: k\n"),
            "tls_server_config.cert"
        );
        assert_eq!(
            field_of(
                "tls_server_config:\n  cert_file: c\n  key_file: k\n  min_version: TLS13\n  max_version: TLS12\n"
            ),
            "tls_server_config.min_version"
        );
        let ok = parsed(
            "tls_server_config:\n  cert_file: c.pem\n  key_file: k.pem\n  cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n  curve_preferences: [X25519, CurveP256]\n  prefer_server_cipher_suites: false\n",
        )
        .unwrap();
        let tls = ok.tls.unwrap();
        assert_eq!(
            tls.cert,
            PemSource::File(PathBuf::from("/etc/c.pem")),
            "relative to the file"
        );
        assert_eq!(tls.tls12_suites.unwrap().len(), 1);
        assert_eq!(tls.curves.unwrap().len(), 2);
        assert!(!tls.prefer_server_cipher_suites);
    }

    #[test]
    fn headers_are_the_toolkits_with_its_values() {
        let c = parsed("http_server_config:\n  http2: true\n  headers:\n    X-Frame-Options: deny\n    Content-Security-Policy: \"default-src 'self'\"\n    X-XSS-Protection: \"\"\n").unwrap();
        assert_eq!(c.headers.len(), 2, "blank values are left out");
        assert_eq!(
            field_of("http_server_config:\n  headers:\n    X-Frame-Options: allow\n"),
            "http_server_config.headers.X-Frame-Options"
        );
        assert_eq!(
            field_of("http_server_config:\n  headers:\n    Server: me\n"),
            "http_server_config.headers.Server"
        );
    }

    /// A folder with a CA, a server certificate and key signed by it, and `web.yml`.
    fn tls_folder(web_yml: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_pem = ca.self_signed(&ca_key).unwrap().pem();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
            .unwrap()
            .signed_by(&key, &issuer)
            .unwrap();
        for (name, text) in [
            ("ca.crt", ca_pem),
            ("server.crt", cert.pem()),
            ("server.key", key.serialize_pem()),
            ("web.yml", web_yml.to_string()),
        ] {
            std::fs::write(dir.path().join(name), text).unwrap();
        }
        let path = dir.path().join("web.yml");
        (dir, path)
    }

    const TLS: &str = "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n";

    #[test]
    fn every_client_auth_type_and_tuning_builds_a_server_config() {
        for auth in [
            "NoClientCert",
            "RequestClientCert",
            "RequireAnyClientCert",
            "VerifyClientCertIfGiven",
            "RequireAndVerifyClientCert",
        ] {
            let ca = if auth == "NoClientCert" {
                ""
            } else {
                "  client_ca_file: ca.crt\n"
            };
            let (_dir, path) = tls_folder(&format!(
                "{TLS}  client_auth_type: {auth}\n{ca}  min_version: TLS12\n  max_version: TLS12\n  cipher_suites: [TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256]\n  curve_preferences: [CurveP384, X25519]\n"
            ));
            let file = WebConfigFile::open(path).unwrap_or_else(|e| panic!("{auth}: {e}"));
            assert!(file.tls());
            let config = file.tls_config().unwrap();
            assert!(
                config.ignore_client_order,
                "prefer_server_cipher_suites defaults to true"
            );
        }
    }

    #[test]
    fn the_tls_config_is_rebuilt_only_when_a_file_changes() {
        let (dir, path) = tls_folder(TLS);
        let file = WebConfigFile::open(path.clone()).unwrap();
        let first = file.tls_config().unwrap();
        assert!(
            Arc::ptr_eq(&first, &file.tls_config().unwrap()),
            "unchanged: reused"
        );
        // A renewed certificate (here: the same one rewritten with a trailing newline).
        let cert = dir.path().join("server.crt");
        let mut text = std::fs::read_to_string(&cert).unwrap();
        text.push('\n');
        std::fs::write(&cert, text).unwrap();
        let renewed = file.tls_config().unwrap();
        assert!(
            !Arc::ptr_eq(&first, &renewed),
            "a changed certificate file is read again"
        );
        // A key that does not fit, or a file without TLS: refused, never plain.
        std::fs::write(
            dir.path().join("server.key"),
            rcgen::KeyPair::generate().unwrap().serialize_pem(),
        )
        .unwrap();
        let e = file.tls_config().unwrap_err();
        assert_eq!(
            e.field.as_deref(),
            Some("tls_server_config.key_file"),
            "{e}"
        );
        std::fs::write(&path, "").unwrap();
        let e = file.tls_config().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("tls_server_config"), "{e}");
    }

    #[test]
    fn user_hashes_must_be_bcrypt_and_are_never_echoed() {
        let e = parsed("basic_auth_users:\n  alice: hunter2\n").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("basic_auth_users.alice"));
        assert!(!e.to_string().contains("hunter2"));
        let hash = bcrypt::hash("pw", 4).unwrap();
        let c = parsed(&format!("basic_auth_users:\n  alice: {hash}\n")).unwrap();
        assert_eq!(c.users.len(), 1);
    }
}
