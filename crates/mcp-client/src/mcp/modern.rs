//! A modern-era (2026-07-28) client: no handshake and no session. Every request carries the
//! protocol version, client info and capabilities in `params._meta` and mirrors the version and
//! method (and a called tool's name) into headers; the server may answer any request on its own.
//!
//! Two things the legacy era had in the session move into requests here: liveness is proven by
//! `server/discover` (`ping` no longer exists), and `list_changed` arrives only on a
//! `subscriptions/listen` stream that the client opens and re-opens itself.
//!
//! [`detect`] is the spec's era detection for `protocol_version: auto`: a modern request, and
//! only the two modern error codes (-32022 unsupported version, -32020 header mismatch) count
//! as "modern served here"; any other refusal means a legacy server, which the caller then
//! greets with `initialize`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::error::{McpError, Reason};
use super::http::{HttpTransport, Listening, ModernHeaders};
use super::inbox::Inbox;
use super::jsonrpc::{self, RpcError};
use super::session::{ServerInfo, deadline};
use super::version::{Era, ProtocolVersion, SUPPORTED};
use crate::listing::list::List;

const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// `UnsupportedProtocolVersionError`: the server is modern but wants another version.
pub const UNSUPPORTED_VERSION: i64 = -32022;
/// `HeaderMismatch`: the server is modern and read our headers.
pub const HEADER_MISMATCH: i64 = -32020;

/// What a listing's cache fields promise (2026-07-28 caching): fresh for `ttl`, shareable or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CacheHint {
    pub ttl: Duration,
    pub public: bool,
}

impl CacheHint {
    /// Read `ttlMs` / `cacheScope` of a result: missing or negative `ttlMs` is 0 (the spec's rule
    /// for older servers), a scope other than `"public"` is private.
    pub fn of(result: &Value) -> CacheHint {
        let ttl_ms = result
            .get("ttlMs")
            .and_then(Value::as_f64)
            .filter(|t| t.is_finite() && *t > 0.0)
            .unwrap_or(0.0)
            .min(u64::MAX as f64 / 2.0);
        CacheHint {
            ttl: Duration::from_millis(ttl_ms as u64),
            public: result.get("cacheScope").and_then(Value::as_str) == Some("public"),
        }
    }
}

/// One modern-era client of one server.
#[derive(Debug)]
pub struct ModernClient {
    transport: Arc<HttpTransport>,
    version: ProtocolVersion,
    info: ServerInfo,
    next_id: AtomicU64,
    inbox: Arc<Inbox>,
    timeout: Duration,
}

/// The outcome of era detection.
pub enum Detected {
    /// The server speaks the modern era; here is a client for it.
    Modern(ModernClient),
    /// It does not (the refusal, for logs): greet it with `initialize`.
    Legacy(McpError),
}

/// Era detection: `server/discover` in `version`. A result, or a refusal with a modern error
/// code, means modern (for -32022 the client retries once with the newest modern version in
/// `supported` that it speaks); any other JSON-RPC refusal or 4xx means legacy; a transport
/// failure fails.
pub async fn detect(
    transport: Arc<HttpTransport>,
    version: ProtocolVersion,
    inbox: Arc<Inbox>,
    timeout: Duration,
) -> Result<Detected, McpError> {
    let mut client = ModernClient::new(transport, version, inbox, timeout);
    let refused = match client
        .exchange("server/discover", None, usize::MAX, Vec::new())
        .await
    {
        // A result that is no DiscoverResult (a legacy server answering any method alike) says
        // nothing about the modern era: greet the server the legacy way.
        Ok((Ok(result), _)) => match parse_discover(&result, client.version) {
            Ok(info) => {
                client.info = info;
                return Ok(Detected::Modern(client));
            }
            Err(e) => return Ok(Detected::Legacy(e)),
        },
        Ok((Err(refusal), _)) => refusal,
        Err(e) if e.reason == Reason::Http4xx => return Ok(Detected::Legacy(e)),
        Err(e) => return Err(e),
    };
    match refused.code {
        // Retried once, even with the version just refused when `supported` lists it again
        // (a server may refuse a first request it could have served; the conformance suite's
        // `request-metadata` scenario does).
        UNSUPPORTED_VERSION => match shared_modern_version(refused.data.as_ref()) {
            Some(v) => {
                client.version = v;
                client.info = client.discover().await?;
                Ok(Detected::Modern(client))
            }
            _ => Ok(Detected::Legacy(refused.into())),
        },
        HEADER_MISMATCH => Err(refused.into()),
        _ => Ok(Detected::Legacy(refused.into())),
    }
}

/// The newest modern version both sides speak, from -32022's `data.supported`.
fn shared_modern_version(data: Option<&Value>) -> Option<ProtocolVersion> {
    let offered = data?.get("supported")?.as_array()?;
    SUPPORTED
        .into_iter()
        .find(|v| v.era() == Era::Modern && offered.iter().any(|o| o.as_str() == Some(v.as_str())))
}

impl ModernClient {
    fn new(
        transport: Arc<HttpTransport>,
        version: ProtocolVersion,
        inbox: Arc<Inbox>,
        timeout: Duration,
    ) -> ModernClient {
        ModernClient {
            transport,
            version,
            info: ServerInfo {
                protocol_version: version.as_str().to_string(),
                ..ServerInfo::default()
            },
            next_id: AtomicU64::new(1),
            inbox,
            timeout,
        }
    }

    /// A client pinned to `version`: `server/discover` must succeed.
    pub async fn connect(
        transport: Arc<HttpTransport>,
        version: ProtocolVersion,
        inbox: Arc<Inbox>,
        timeout: Duration,
    ) -> Result<ModernClient, McpError> {
        let mut client = ModernClient::new(transport, version, inbox, timeout);
        client.info = client.discover().await?;
        Ok(client)
    }

    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    /// `server/discover`: what the server supports, and the cheapest proof that it answers.
    pub async fn discover(&self) -> Result<ServerInfo, McpError> {
        let (result, _) = self
            .request_within("server/discover", None, usize::MAX)
            .await?;
        parse_discover(&result, self.version)
    }

    /// Send a request and wait (at most the client timeout) for its result; an answer over
    /// `max_bytes` fails with `body_too_large` before it is parsed.
    pub async fn request_within(
        &self,
        method: &str,
        params: Option<Value>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        self.request_with(method, params, max_bytes, Vec::new())
            .await
    }

    /// [`ModernClient::request_within`] with `Mcp-Param-*` headers (a `tools/call` of a tool
    /// with `x-mcp-header` parameters).
    pub async fn request_with(
        &self,
        method: &str,
        params: Option<Value>,
        max_bytes: usize,
        param_headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    ) -> Result<(Value, usize), McpError> {
        let (outcome, bytes) = self
            .exchange(method, params, max_bytes, param_headers)
            .await?;
        let result = outcome?;
        match result.get("resultType").and_then(Value::as_str) {
            None | Some("complete") => Ok((result, bytes)),
            Some(other) => Err(McpError::new(
                Reason::InvalidResponse,
                format!(
                    "result type {} (a monitoring client has no input to give)",
                    crate::text::bounded(other, 40)
                ),
            )),
        }
    }

    /// One request and its answer, a JSON-RPC refusal kept whole (its `data`).
    async fn exchange(
        &self,
        method: &str,
        params: Option<Value>,
        max_bytes: usize,
        param_headers: Vec<(reqwest::header::HeaderName, reqwest::header::HeaderValue)>,
    ) -> Result<(Result<Value, RpcError>, usize), McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut headers = self.headers(method, params.as_ref());
        headers.params = param_headers;
        let body = jsonrpc::request(id, method, Some(self.with_meta(params)));
        let limits = self.transport.limits().within(max_bytes);
        deadline(
            self.timeout,
            self.transport
                .post_modern(&headers, body, id, &self.inbox, limits),
        )
        .await
    }

    /// Open a `subscriptions/listen` stream for changes to tool list and to every other list
    /// the server declares (prompts, resources), waiting at most the client timeout for its
    /// acknowledgement.
    pub async fn listen(&self) -> Result<Listening, McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut filter = Map::new();
        filter.insert(List::Tools.listen_filter().into(), Value::Bool(true));
        for list in [List::Prompts, List::Resources] {
            if self.info.declares(list).is_some() {
                filter.insert(list.listen_filter().into(), Value::Bool(true));
            }
        }
        let params = json!({ "notifications": filter });
        let headers = self.headers("subscriptions/listen", None);
        let body = jsonrpc::request(
            id,
            "subscriptions/listen",
            Some(self.with_meta(Some(params))),
        );
        deadline(
            self.timeout,
            self.transport.open_listen(&headers, body, id, &self.inbox),
        )
        .await
    }

    fn headers(&self, method: &str, params: Option<&Value>) -> ModernHeaders {
        let name = matches!(method, "tools/call" | "prompts/get" | "resources/read")
            .then(|| params.and_then(|p| p.get("name").or_else(|| p.get("uri"))))
            .flatten()
            .and_then(Value::as_str);
        ModernHeaders::new(self.version.as_str(), method, name)
    }

    /// `params` with the request `_meta` every modern request carries.
    fn with_meta(&self, params: Option<Value>) -> Value {
        let mut params = match params {
            Some(Value::Object(map)) => map,
            _ => Map::new(),
        };
        let meta = params
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(META_VERSION.into(), self.version.as_str().into());
            meta.insert(META_CAPABILITIES.into(), json!({}));
            meta.insert(
                META_CLIENT_INFO.into(),
                json!({"name": "mcp_exporter", "version": env!("CARGO_PKG_VERSION")}),
            );
        }
        Value::Object(params)
    }
}

fn parse_discover(result: &Value, version: ProtocolVersion) -> Result<ServerInfo, McpError> {
    let bad =
        |what: &str| McpError::new(Reason::InvalidResponse, format!("server/discover: {what}"));
    let supported = result
        .get("supportedVersions")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no supportedVersions"))?;
    if !supported
        .iter()
        .any(|v| v.as_str() == Some(version.as_str()))
    {
        return Err(McpError::new(
            Reason::UnsupportedVersion,
            format!("server/discover does not list {version}"),
        ));
    }
    let caps = result
        .get("capabilities")
        .filter(|c| c.is_object())
        .ok_or_else(|| bad("no capabilities object"))?;
    let server = result.pointer(&format!("/_meta/{}", META_SERVER_INFO.replace('/', "~1")));
    Ok(ServerInfo::read(version.as_str(), caps, server))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn discover_results_are_read_and_checked() {
        let info = parse_discover(
            &json!({
                "supportedVersions": ["2026-07-28", "2025-11-25"],
                "capabilities": {"tools": {"listChanged": true}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "kb", "version": "2"}},
                "ttlMs": 0, "cacheScope": "public", "resultType": "complete"
            }),
            ProtocolVersion::V2026_07_28,
        )
        .unwrap();
        assert_eq!(info.protocol_version, "2026-07-28");
        assert!(info.tools && info.list_changed);
        assert_eq!((info.name.as_str(), info.version.as_str()), ("kb", "2"));

        let other = parse_discover(
            &json!({"supportedVersions": ["2027-01-01"], "capabilities": {}}),
            ProtocolVersion::V2026_07_28,
        );
        assert_eq!(other.unwrap_err().reason, Reason::UnsupportedVersion);
        for bad in [json!({}), json!({"supportedVersions": ["2026-07-28"]})] {
            let e = parse_discover(&bad, ProtocolVersion::V2026_07_28).unwrap_err();
            assert_eq!(e.reason, Reason::InvalidResponse);
        }
    }

    #[test]
    fn a_shared_modern_version_is_picked_from_supported() {
        let data = json!({"supported": ["2025-11-25", "2026-07-28"], "requested": "x"});
        assert_eq!(
            shared_modern_version(Some(&data)),
            Some(ProtocolVersion::V2026_07_28)
        );
        // Legacy versions in `supported` are not a modern version to retry with.
        let legacy = json!({"supported": ["2025-11-25"]});
        assert_eq!(shared_modern_version(Some(&legacy)), None);
        assert_eq!(shared_modern_version(None), None);
    }

    #[test]
    fn cache_hints_follow_the_spec_defaults() {
        let h = CacheHint::of(&json!({"ttlMs": 30000, "cacheScope": "public"}));
        assert_eq!(
            h,
            CacheHint {
                ttl: Duration::from_secs(30),
                public: true
            }
        );
        assert_eq!(CacheHint::of(&json!({})), CacheHint::default());
        assert_eq!(
            CacheHint::of(&json!({"ttlMs": -5, "cacheScope": "x"})),
            CacheHint::default()
        );
        assert_eq!(CacheHint::of(&json!({"ttlMs": "9"})).ttl, Duration::ZERO);
    }

    #[test]
    fn every_request_carries_the_meta_fields() {
        let (inbox, _rx) = Inbox::new();
        let transport = HttpTransport::new(
            "http://127.0.0.1:9/mcp".parse().unwrap(),
            &[],
            Default::default(),
        )
        .unwrap();
        let c = ModernClient::new(
            Arc::new(transport),
            ProtocolVersion::V2026_07_28,
            Arc::new(inbox),
            Duration::from_secs(1),
        );
        let p = c.with_meta(Some(json!({"cursor": "", "_meta": {"progressToken": 1}})));
        assert_eq!(p["cursor"], "");
        assert_eq!(p["_meta"]["progressToken"], 1);
        assert_eq!(p["_meta"][META_VERSION], "2026-07-28");
        assert_eq!(p["_meta"][META_CAPABILITIES], json!({}));
        assert_eq!(p["_meta"][META_CLIENT_INFO]["name"], "mcp_exporter");
        let h = c.headers("tools/call", Some(&json!({"name": "search wiki"})));
        assert_eq!(h.name.unwrap(), "search wiki");
        let h = c.headers("tools/call", Some(&json!({"name": "wéb"})));
        assert_eq!(h.name.unwrap(), "=?base64?d8OpYg==?=");
        assert!(c.headers("tools/list", None).name.is_none());
    }
}
