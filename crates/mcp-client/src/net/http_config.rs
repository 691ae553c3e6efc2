//! How the exporter reaches one target over HTTP: credentials, TLS and proxy, validated.
//!
//! The blocks have the names and meaning of Prometheus' `http_config` (`authorization`,
//! `basic_auth`, `oauth2`, `tls_config`, `proxy_url`, `no_proxy`, `proxy_from_environment`) so an
//! operator can copy them from a scrape config. They may be given in `global` (the default for
//! every HTTP target) and per target (replacing the global block of the same name).
//!
//! Secrets and key material named by a `*_file` field stay paths here: they are read when used
//! and re-read when the file changes, so a rotated secret or a renewed certificate is picked up
//! without a restart (see `net`). At load time every such file must exist and parse, so a typo
//! is refused before it replaces a working configuration.

use crate::secret::Secret;
use std::path::PathBuf;
use std::time::Duration;

/// `http_config` of one target, resolved against `global`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpClientConfig {
    /// At most one way to authenticate: the type makes two of them unrepresentable.
    pub auth: TargetAuth,
    pub tls: TlsConfig,
    pub proxy: ProxyConfig,
    /// `idle_connection_timeout` (ours, not Prometheus'): how long a request connection is kept
    /// for the next request.
    pub idle: IdleTimeout,
}

/// How long an idle request connection is kept for the next request to the same server.
///
/// The default, 4 s, is below the 5 s after which Node's and uvicorn's HTTP servers (those of
/// the official SDKs) close an idle connection, so a request never goes out on a connection the
/// server is closing at that moment. It also keeps a large fleet light: a kept connection costs
/// about 26 KB (hyper's buffers and dispatch channel), and with 15 s pings every target would
/// keep one or two. Longer keeps connections warm across pings and audits (no new TCP and TLS
/// handshake per check, a notified target re-lists on a warm connection) for servers, or the
/// proxies in front of them, that keep idle connections at least that long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdleTimeout(Duration);

impl IdleTimeout {
    pub const DEFAULT: IdleTimeout = IdleTimeout(Duration::from_secs(4));

    /// Any positive duration (the configuration bounds what it accepts).
    pub fn new(d: Duration) -> Option<IdleTimeout> {
        (!d.is_zero()).then_some(IdleTimeout(d))
    }

    pub fn get(self) -> Duration {
        self.0
    }
}

impl Default for IdleTimeout {
    fn default() -> IdleTimeout {
        IdleTimeout::DEFAULT
    }
}

/// A secret given inline (after `${VAR}` expansion) or as a file re-read when it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Inline(Secret),
    /// Absolute path (relative paths are resolved against the configuration file's folder).
    File(PathBuf),
}

/// How requests to the target are authenticated (beyond any static `headers`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum TargetAuth {
    #[default]
    None,
    /// `authorization`: `Authorization: <scheme> <credentials>`; scheme defaults to `Bearer`.
    Authorization {
        scheme: String,
        credentials: SecretSource,
    },
    /// `basic_auth`.
    Basic {
        username: SecretSource,
        password: Option<SecretSource>,
    },
    /// `oauth2`: OAuth 2.0 client credentials, with MCP authorization discovery when
    /// `token_url` is not given.
    OAuth2(Box<OAuth2Config>),
}

/// `oauth2`, Prometheus' fields plus what the MCP client-credentials extension needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OAuth2Config {
    pub client_id: String,
    /// How the client authenticates at the token endpoint.
    pub client_auth: ClientAuth,
    /// `scopes`: requested when set; otherwise the challenge's `scope`, else the protected
    /// resource's `scopes_supported`, else none (MCP scope selection strategy).
    pub scopes: Vec<String>,
    /// `token_url`: when absent, found by MCP authorization discovery (RFC 9728 protected
    /// resource metadata, then RFC 8414 / OpenID Connect authorization server metadata).
    pub token_url: Option<url::Url>,
    /// `issuer`: the authorization server (RFC 8414 issuer identifier) the credentials belong
    /// to. Discovery uses only this one; `None`: only an authorization server on the MCP URL's
    /// own origin is trusted. With `token_url`, the audience of a client assertion.
    pub issuer: Option<url::Url>,
    /// `metadata_origins`: further origins (besides the MCP URL's and the issuer's) from which
    /// Protected Resource Metadata a challenge names may be fetched.
    pub metadata_origins: Vec<url::Url>,
    /// `endpoint_params`: extra form parameters of the token request.
    pub endpoint_params: Vec<(String, String)>,
    /// `tls_config` and proxy for the authorization server (discovery and token requests).
    pub tls: TlsConfig,
    pub proxy: ProxyConfig,
}

/// Client authentication at the token endpoint (RFC 7591 `token_endpoint_auth_method` names).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientAuth {
    /// `client_secret_basic` (HTTP Basic with the form-encoded id and secret).
    SecretBasic(SecretSource),
    /// `client_secret_post` (id and secret as form parameters).
    SecretPost(SecretSource),
    /// `private_key_jwt` (RFC 7523 §2.2 client assertion signed with a configured key).
    PrivateKeyJwt(JwtKey),
    /// `none`: a public client; only `client_id` is sent.
    None,
    /// A secret is configured and `token_endpoint_auth_method` is not: use what the
    /// authorization server's metadata lists (basic preferred), basic when there is none.
    SecretAuto(SecretSource),
}

/// The key that signs `private_key_jwt` client assertions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JwtKey {
    /// PEM (PKCS#8, or PKCS#1/SEC1) private key; checked to parse for `algorithm` at load.
    pub key: SecretSource,
    /// `kid` header, when the authorization server needs it.
    pub key_id: Option<String>,
    pub algorithm: JwtAlgorithm,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum JwtAlgorithm {
    #[default]
    Rs256,
    Rs384,
    Rs512,
    Ps256,
    Es256,
    Es384,
    EdDsa,
}

/// `tls_config`, Prometheus' fields.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TlsConfig {
    /// `ca` / `ca_file`: trusted roots instead of the platform's.
    pub ca: Option<PemSource>,
    /// `cert` / `cert_file` and `key` / `key_file`: the client certificate (both or neither).
    pub client_cert: Option<ClientCert>,
    pub server_name: Option<String>,
    pub insecure_skip_verify: bool,
    pub min_version: Option<TlsVersion>,
    pub max_version: Option<TlsVersion>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCert {
    pub cert: PemSource,
    pub key: SecretSource,
}

/// PEM text that is not secret (certificates), inline or as a file re-read when it changes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PemSource {
    Inline(String),
    File(PathBuf),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Tls12,
    Tls13,
}

impl TlsVersion {
    /// The one reader of a TLS version's name, as Prometheus writes it (`TLS12`, `TLS13`): for
    /// a target's `tls_config` and the web server's `tls_server_config` alike.
    pub fn parse(name: &str) -> Result<TlsVersion, String> {
        match name {
            "TLS12" => Ok(TlsVersion::Tls12),
            "TLS13" => Ok(TlsVersion::Tls13),
            "TLS10" | "TLS11" => Err(format!(
                "{name} is not supported: the exporter's TLS (rustls) speaks TLS12 and TLS13 only"
            )),
            other => Err(format!(
                "unknown TLS version {other:?}; allowed: TLS12, TLS13"
            )),
        }
    }
}

/// `proxy_url`, `no_proxy`, `proxy_from_environment`. `Debug` and `Display` show the proxy URL
/// through [`crate::secret::redact_url`] (its password is a secret).
#[derive(Clone, PartialEq, Eq, Default)]
pub enum ProxyConfig {
    #[default]
    Direct,
    /// `proxy_url` (its password is a secret: shown redacted), except hosts in `no_proxy`.
    Url {
        url: url::Url,
        no_proxy: Vec<String>,
    },
    /// `proxy_from_environment: true`: HTTP(S)_PROXY and NO_PROXY.
    FromEnvironment,
}

impl std::fmt::Display for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyConfig::Direct => f.write_str("direct"),
            ProxyConfig::FromEnvironment => f.write_str("from the environment"),
            ProxyConfig::Url { url, no_proxy } if no_proxy.is_empty() => {
                f.write_str(&crate::secret::redact_url(url))
            }
            ProxyConfig::Url { url, no_proxy } => write!(
                f,
                "{} (except {})",
                crate::secret::redact_url(url),
                no_proxy.join(",")
            ),
        }
    }
}

impl std::fmt::Debug for ProxyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProxyConfig::Direct => f.write_str("Direct"),
            ProxyConfig::FromEnvironment => f.write_str("FromEnvironment"),
            ProxyConfig::Url { url, no_proxy } => f
                .debug_struct("Url")
                .field("url", &crate::secret::redact_url(url))
                .field("no_proxy", no_proxy)
                .finish(),
        }
    }
}
