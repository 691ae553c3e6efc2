//! MCP authorization discovery: from the MCP server's URL (and a challenge's
//! `resource_metadata`) to an authorization server's token endpoint.
//!
//! Order and checks follow the MCP authorization spec: protected resource metadata (RFC 9728)
//! from the challenge, else path-based then root well-known; its `resource` must name this
//! server (else a server could collect tokens meant for another); authorization server metadata
//! at the RFC 8414 and OpenID Connect locations in the spec's order, whose `issuer` must be the
//! very string we built the URL from (else a metadata host could redirect our credentials).
//! Servers of the 2025-03-26 era publish no resource metadata: their authorization server is the
//! MCP server's origin, with metadata at its root or the default `/token`.
//!
//! What a server says is not trusted on its word ([`Trust`]): the credentials go only to an
//! authorization server the configuration names (`oauth2.issuer`) or, when it names none, to one
//! on the MCP URL's own origin; metadata is fetched only from that origin, the issuer's and
//! `oauth2.metadata_origins` (the rule of `net::origin`). A server naming anything else gets an
//! error with its own reason (`untrusted_authorization_server`, `untrusted_metadata_origin`) and
//! no request: otherwise one compromised MCP server would collect the client secret of every
//! exporter probing it, or make them fetch any URL it likes (a cloud metadata address).

use super::fetch::{self, Answer};
use crate::net::origin::{self, Origins};
use crate::net::refusal::{AuthError, AuthStep};
use url::Url;

/// Cap on `scopes_supported` and `token_endpoint_auth_methods_supported` entries kept.
const MAX_LIST: usize = 64;

/// Where and how to ask for tokens for one MCP server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Discovered {
    /// The `resource` parameter: the protected resource metadata's `resource`, exactly as
    /// published, else the canonical server URI.
    pub resource: String,
    /// The protected resource's `scopes_supported` (empty when absent).
    pub scopes_supported: Vec<String>,
    /// The authorization server's issuer identifier, when known from metadata.
    pub issuer: Option<String>,
    pub token_endpoint: Url,
    /// `token_endpoint_auth_methods_supported` (empty when absent or unknown).
    pub auth_methods: Vec<String>,
}

/// Which authorization servers may receive the credentials and where metadata may be fetched
/// from, decided by the configuration alone.
#[derive(Debug, Clone)]
pub(crate) struct Trust {
    server: Url,
    /// `oauth2.issuer`: the one trusted authorization server; `None`: any on the server's origin.
    issuer: Option<Url>,
    /// The server's origin, the issuer's and `oauth2.metadata_origins`.
    metadata: Origins,
}

impl Trust {
    pub(crate) fn new(server: &Url, issuer: Option<&Url>, metadata_origins: &[Url]) -> Trust {
        let mut metadata = Origins::of(server);
        for u in issuer.into_iter().chain(metadata_origins) {
            metadata = metadata.with(u);
        }
        Trust {
            server: server.clone(),
            issuer: issuer.cloned(),
            metadata,
        }
    }

    /// Whether the credentials may go to the authorization server `candidate` (an issuer
    /// identifier): the configured issuer (compared as URLs: a bare origin with or without its
    /// `/` is the same), else one on the MCP URL's origin.
    pub(crate) fn issuer(&self, candidate: &Url) -> bool {
        match &self.issuer {
            Some(configured) => configured == candidate,
            None => origin::same_origin(&self.server, candidate),
        }
    }

    /// `Ok` when metadata may be fetched from `url`; the refusal otherwise (nothing is sent).
    fn fetch(&self, url: &Url, what: &str) -> Result<(), AuthError> {
        if self.metadata.allow(url) {
            return Ok(());
        }
        Err(AuthError::new(
            AuthStep::UntrustedMetadataOrigin,
            format!(
                "{what} is on {}, which is neither the MCP server's origin nor one the \
                 configuration names: not fetched (add the origin to oauth2.metadata_origins if \
                 you trust it)",
                shown(&origin::shown(url))
            ),
        ))
    }

    /// The refusal of the authorization server `named` (the first of `count` listed, none
    /// trusted).
    fn untrusted(&self, named: &str, count: usize) -> AuthError {
        let trusted = match &self.issuer {
            Some(i) => format!(
                "the configured oauth2.issuer is {}",
                crate::secret::redact_url(i)
            ),
            None => format!(
                "with no oauth2.issuer only an authorization server on the MCP server's origin \
                 ({}) is trusted; set oauth2.issuer to the one you trust",
                origin::shown(&self.server)
            ),
        };
        let others = match count {
            0 | 1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        AuthError::new(
            AuthStep::UntrustedAuthorizationServer,
            format!(
                "the server names authorization server {}{others}, which the configuration does \
                 not trust: no request sent to it; {trusted}",
                shown(named)
            ),
        )
    }
}

/// The canonical URI of an MCP server (RFC 8707 §2 as the MCP spec uses it): no fragment, and
/// no trailing slash on a bare origin.
pub(crate) fn canonical_resource(server: &Url) -> String {
    let mut u = server.clone();
    u.set_fragment(None);
    let s = u.as_str();
    if u.path() == "/" && u.query().is_none() {
        s.trim_end_matches('/').to_owned()
    } else {
        s.to_owned()
    }
}

/// Protected resource metadata well-known URLs, in the order the spec has clients try them:
/// path-based (when the server URL has a path), then root.
pub(crate) fn prm_candidates(server: &Url) -> Vec<Url> {
    well_known(server, "oauth-protected-resource")
}

/// `{origin}/.well-known/{suffix}{path}` when the URL has a path, then `{origin}/.well-known/{suffix}`.
fn well_known(base: &Url, suffix: &str) -> Vec<Url> {
    let origin = base.origin().ascii_serialization();
    let path = base.path().trim_end_matches('/');
    let mut out = Vec::with_capacity(2);
    if !path.is_empty() {
        out.extend(Url::parse(&format!("{origin}/.well-known/{suffix}{path}")).ok());
    }
    out.extend(Url::parse(&format!("{origin}/.well-known/{suffix}")).ok());
    out
}

/// Authorization server metadata URLs for an issuer, in the spec's order: RFC 8414 path
/// insertion, OIDC path insertion, OIDC path appending (issuers with a path); RFC 8414, then
/// OIDC (issuers without one).
pub(crate) fn as_metadata_candidates(issuer: &Url) -> Vec<Url> {
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    let urls = if path.is_empty() {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ]
    } else {
        vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ]
    };
    urls.iter().filter_map(|u| Url::parse(u).ok()).collect()
}

/// Does a protected resource metadata `resource` name this server? Same origin, and its path a
/// prefix of the server's at a segment boundary (a server may protect `/` for all its paths).
pub(crate) fn resource_matches(resource: &str, server: &Url) -> bool {
    let Ok(r) = Url::parse(resource) else {
        return false;
    };
    if !origin::same_origin(server, &r) || r.fragment().is_some() {
        return false;
    }
    let rp = r.path().trim_end_matches('/');
    let sp = server.path().trim_end_matches('/');
    rp.is_empty() || sp == rp || sp.starts_with(&format!("{rp}/"))
}

/// Discovers the token endpoint of the MCP server `trust` was made for, within what `trust`
/// allows. `resource_metadata`: the URL a challenge named.
pub(crate) async fn discover(
    http: &reqwest::Client,
    trust: &Trust,
    resource_metadata: Option<&Url>,
) -> Result<Discovered, AuthError> {
    let server = &trust.server;
    let prm = match find_prm(http, trust, resource_metadata).await? {
        Some(prm) => prm,
        // No resource metadata: the configured issuer, else (2025-03-26) the server's origin.
        None => {
            return match &trust.issuer {
                Some(i) if !(i.path() == "/" && origin::same_origin(i, server)) => {
                    let mut d = from_issuer(http, trust, i.as_str(), i, true).await?;
                    d.resource = canonical_resource(server);
                    Ok(d)
                }
                _ => legacy(http, trust).await,
            };
        }
    };
    let resource = prm
        .get("resource")
        .and_then(|v| v.as_str())
        .ok_or_else(|| discovery("protected resource metadata has no resource"))?;
    if !resource_matches(resource, server) {
        return Err(discovery(format!(
            "protected resource metadata names resource {}, not this server ({})",
            shown(resource),
            canonical_resource(server)
        )));
    }
    let listed: Vec<&str> = prm
        .get("authorization_servers")
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|v| v.as_str()).take(MAX_LIST).collect())
        .unwrap_or_default();
    let first = *listed
        .first()
        .ok_or_else(|| discovery("protected resource metadata lists no authorization server"))?;
    // The first listed that the configuration trusts; the others are never contacted.
    let (issuer, issuer_url) = listed
        .iter()
        .find_map(|s| {
            Url::parse(s)
                .ok()
                .filter(|u| trust.issuer(u))
                .map(|u| (*s, u))
        })
        .ok_or_else(|| match Url::parse(first) {
            Ok(_) => trust.untrusted(first, listed.len()),
            Err(_) => discovery(format!(
                "authorization server {} is not a URL",
                shown(first)
            )),
        })?;
    let mut d = from_issuer(http, trust, issuer, &issuer_url, false).await?;
    d.resource = resource.to_owned();
    d.scopes_supported = strings(prm.get("scopes_supported"));
    Ok(d)
}

/// The trusted authorization server `issuer` (`issuer_url` parsed): its metadata at the RFC 8414
/// and OpenID Connect locations in the spec's order. The metadata's `issuer` must be `issuer`
/// exactly when a server published it; when it is the configured one (`configured`), the same
/// URL (`https://as.example` and `https://as.example/` are one issuer), and is then used as
/// published.
async fn from_issuer(
    http: &reqwest::Client,
    trust: &Trust,
    issuer: &str,
    issuer_url: &Url,
    configured: bool,
) -> Result<Discovered, AuthError> {
    let mut found = None;
    for url in as_metadata_candidates(issuer_url) {
        if let Some(meta) = get_json(http, trust, &url, "authorization server metadata").await? {
            found = Some(meta);
            break;
        }
    }
    let meta = found.ok_or_else(|| {
        discovery(format!(
            "no authorization server metadata for issuer {} (no JSON at its RFC 8414 or OpenID Connect locations)",
            shown(issuer)
        ))
    })?;
    let published = meta.get("issuer").and_then(|v| v.as_str());
    let issuer = match published {
        Some(p) if configured && Url::parse(p).ok().as_ref() == Some(issuer_url) => p,
        _ => issuer,
    };
    from_as_metadata(&meta, issuer)
}

/// The protected resource metadata document, or `None` when the server publishes none.
async fn find_prm(
    http: &reqwest::Client,
    trust: &Trust,
    resource_metadata: Option<&Url>,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, AuthError> {
    if let Some(url) = resource_metadata {
        if !matches!(url.scheme(), "https" | "http") {
            return Err(discovery("resource_metadata is not an HTTP URL"));
        }
        if let Some(doc) = get_json(http, trust, url, "protected resource metadata").await? {
            return Ok(Some(doc));
        }
    }
    for url in prm_candidates(&trust.server) {
        if let Some(doc) = get_json(http, trust, &url, "protected resource metadata").await? {
            return Ok(Some(doc));
        }
    }
    Ok(None)
}

/// 2025-03-26: the authorization server is the MCP server's origin; its metadata at the root
/// well-known location, else the default `/token`.
async fn legacy(http: &reqwest::Client, trust: &Trust) -> Result<Discovered, AuthError> {
    let server = &trust.server;
    let origin = server.origin().ascii_serialization();
    let base = Url::parse(&origin).map_err(|_| discovery("server URL has no origin"))?;
    if !trust.issuer(&base) {
        // A configured issuer elsewhere: the server's origin is not where the credentials go.
        return Err(trust.untrusted(&origin, 1));
    }
    let meta_url = base
        .join("/.well-known/oauth-authorization-server")
        .map_err(|_| discovery("server URL has no origin"))?;
    let mut d = match get_json(http, trust, &meta_url, "authorization server metadata").await? {
        Some(meta) => from_as_metadata(&meta, &origin)?,
        None => Discovered {
            resource: String::new(),
            scopes_supported: Vec::new(),
            issuer: None,
            token_endpoint: base
                .join("/token")
                .map_err(|_| discovery("server URL has no origin"))?,
            auth_methods: Vec::new(),
        },
    };
    d.resource = canonical_resource(server);
    Ok(d)
}

/// Reads validated authorization server metadata fetched for `issuer`.
fn from_as_metadata(
    meta: &serde_json::Map<String, serde_json::Value>,
    issuer: &str,
) -> Result<Discovered, AuthError> {
    match meta.get("issuer").and_then(|v| v.as_str()) {
        Some(i) if i == issuer => {}
        Some(i) => {
            return Err(discovery(format!(
                "authorization server metadata names issuer {}, not {} (refusing to use it)",
                shown(i),
                shown(issuer)
            )));
        }
        None => return Err(discovery("authorization server metadata has no issuer")),
    }
    let token_endpoint = meta
        .get("token_endpoint")
        .and_then(|v| v.as_str())
        .ok_or_else(|| discovery("authorization server metadata has no token_endpoint"))?;
    let token_endpoint = Url::parse(token_endpoint)
        .ok()
        .filter(|u| matches!(u.scheme(), "https" | "http") && u.fragment().is_none())
        .ok_or_else(|| discovery("token_endpoint is not an HTTP URL"))?;
    Ok(Discovered {
        resource: String::new(),
        scopes_supported: Vec::new(),
        issuer: Some(issuer.to_owned()),
        token_endpoint,
        auth_methods: strings(meta.get("token_endpoint_auth_methods_supported")),
    })
}

/// GET a JSON document, only from an origin `trust` allows: `Ok(None)` when it is not there — a non-2xx answer, or a 2xx that is not
/// a JSON object (web apps answer every path with their HTML page) — and an error when the host
/// cannot be reached or the answer is too large.
async fn get_json(
    http: &reqwest::Client,
    trust: &Trust,
    url: &Url,
    what: &str,
) -> Result<Option<serde_json::Map<String, serde_json::Value>>, AuthError> {
    trust.fetch(url, what)?;
    let answer: Answer = fetch::send(http.get(url.clone()), AuthStep::Discovery, what).await?;
    if !answer.ok() {
        return Ok(None);
    }
    match answer.json(AuthStep::Discovery, what) {
        Ok(doc) => Ok(Some(doc)),
        Err(e) => {
            tracing::debug!(url = %crate::secret::redact_url(url), error = %e.detail, "metadata location skipped");
            Ok(None)
        }
    }
}

fn strings(v: Option<&serde_json::Value>) -> Vec<String> {
    v.and_then(|v| v.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str())
                .take(MAX_LIST)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn discovery(detail: impl Into<String>) -> AuthError {
    AuthError::new(AuthStep::Discovery, detail)
}

/// A server-supplied string, made safe and short for an error message.
fn shown(s: &str) -> String {
    crate::text::bounded(s, 200).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    fn strs(v: Vec<Url>) -> Vec<String> {
        v.into_iter().map(String::from).collect()
    }

    #[test]
    fn prm_is_looked_for_path_based_then_at_the_root() {
        assert_eq!(
            strs(prm_candidates(&u("https://ex.com/public/mcp"))),
            [
                "https://ex.com/.well-known/oauth-protected-resource/public/mcp",
                "https://ex.com/.well-known/oauth-protected-resource"
            ]
        );
        assert_eq!(
            strs(prm_candidates(&u("https://ex.com:8443/"))),
            ["https://ex.com:8443/.well-known/oauth-protected-resource"]
        );
    }

    #[test]
    fn as_metadata_follows_the_spec_order() {
        assert_eq!(
            strs(as_metadata_candidates(&u("https://auth.ex.com/tenant1"))),
            [
                "https://auth.ex.com/.well-known/oauth-authorization-server/tenant1",
                "https://auth.ex.com/.well-known/openid-configuration/tenant1",
                "https://auth.ex.com/tenant1/.well-known/openid-configuration",
            ]
        );
        assert_eq!(
            strs(as_metadata_candidates(&u("https://auth.ex.com"))),
            [
                "https://auth.ex.com/.well-known/oauth-authorization-server",
                "https://auth.ex.com/.well-known/openid-configuration",
            ]
        );
    }

    #[test]
    fn resource_must_name_this_server() {
        let server = u("https://mcp.ex.com/api/mcp");
        assert!(resource_matches("https://mcp.ex.com/api/mcp", &server));
        assert!(resource_matches("https://MCP.ex.com/api/mcp/", &server));
        assert!(resource_matches("https://mcp.ex.com", &server));
        assert!(resource_matches("https://mcp.ex.com/api", &server));
        assert!(!resource_matches("https://mcp.ex.com/ap", &server));
        assert!(!resource_matches(
            "https://evil.example.com/api/mcp",
            &server
        ));
        assert!(!resource_matches("http://mcp.ex.com/api/mcp", &server));
        assert!(!resource_matches("https://mcp.ex.com:444/api/mcp", &server));
        assert!(!resource_matches(
            "https://mcp.ex.com/api/mcp/other",
            &server
        ));
        assert!(!resource_matches("not a url", &server));
    }

    #[test]
    fn canonical_resource_drops_fragment_and_bare_slash() {
        assert_eq!(canonical_resource(&u("https://Ex.com/")), "https://ex.com");
        assert_eq!(
            canonical_resource(&u("https://ex.com/mcp#x")),
            "https://ex.com/mcp"
        );
        assert_eq!(
            canonical_resource(&u("https://ex.com/mcp/")),
            "https://ex.com/mcp/"
        );
    }

    #[test]
    fn issuer_must_be_identical() {
        let meta = |issuer: &str| {
            serde_json::json!({"issuer": issuer, "token_endpoint": "https://as.ex.com/token",
                "token_endpoint_auth_methods_supported": ["private_key_jwt"]})
            .as_object()
            .unwrap()
            .clone()
        };
        let d = from_as_metadata(&meta("https://as.ex.com"), "https://as.ex.com").unwrap();
        assert_eq!(d.issuer.as_deref(), Some("https://as.ex.com"));
        assert_eq!(d.auth_methods, ["private_key_jwt"]);
        for wrong in [
            "https://as.ex.com/",
            "https://AS.ex.com",
            "https://attacker.example.com",
        ] {
            let e = from_as_metadata(&meta(wrong), "https://as.ex.com").unwrap_err();
            assert_eq!(e.step, AuthStep::Discovery);
            assert!(e.detail.contains("refusing"), "{}", e.detail);
        }
        let no_issuer = serde_json::json!({"token_endpoint": "https://as.ex.com/token"});
        assert!(from_as_metadata(no_issuer.as_object().unwrap(), "https://as.ex.com").is_err());
    }
}
