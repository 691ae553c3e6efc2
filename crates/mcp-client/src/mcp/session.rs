//! A legacy-era MCP session (2024-11-05 … 2025-11-25): `initialize`, the session id and protocol
//! version headers, requests with deadlines, and the end of the session — over Streamable HTTP,
//! or over a [`Duplex`] (stdio, HTTP+SSE), where the session is the channel itself.
//!
//! A `Session` is one server-side session: its id never changes. When the server forgets it (404),
//! every request fails with [`Reason::SessionExpired`] and the owner opens a new `Session` — that
//! is how the probe sees and counts expiries instead of papering over them.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::header::HeaderValue;
use serde_json::{Value, json};

use super::duplex::Duplex;
use super::error::{McpError, Reason, truncate};
use super::http::{
    HttpTransport, NotificationStream, PostReply, SessionHeaders, session_id_is_visible_ascii,
};
use super::inbox::Inbox;
use super::jsonrpc::{self, RpcError};
pub use super::version::Era;
use super::version::ProtocolVersion;

/// What the server told us about itself (`initialize`, or `server/discover` in the modern era).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerInfo {
    pub protocol_version: String,
    pub name: String,
    pub version: String,
    /// `capabilities.tools` is present.
    pub tools: bool,
    /// `capabilities.tools.listChanged` is true.
    pub list_changed: bool,
    /// The other lists the server declares: `capabilities.prompts` and `capabilities.resources`
    /// (which covers resource templates too), and whether each declares `listChanged`.
    pub prompts: Option<ListChanged>,
    pub resources: Option<ListChanged>,
}

/// Whether a declared list's capability says `listChanged: true`.
pub type ListChanged = bool;

impl ServerInfo {
    /// Whether the server declares `list` and, if it does, whether it announces its changes
    /// (`listChanged`): `None` when the capability is absent.
    pub fn declares(&self, list: crate::listing::list::List) -> Option<ListChanged> {
        use crate::listing::list::List;
        match list {
            List::Tools => self.tools.then_some(self.list_changed),
            List::Prompts => self.prompts,
            List::Resources | List::ResourceTemplates => self.resources,
        }
    }
}

/// What a session's messages travel on.
#[derive(Debug)]
enum Wire {
    /// Streamable HTTP: a POST per message, with the session's headers.
    Http {
        transport: Arc<HttpTransport>,
        headers: SessionHeaders,
    },
    /// One two-way channel; the session lives as long as it does.
    Duplex(Arc<Duplex>),
}

/// One open session.
#[derive(Debug)]
pub struct Session {
    wire: Wire,
    info: ServerInfo,
    next_id: AtomicU64,
    inbox: Arc<Inbox>,
    timeout: Duration,
}

impl Session {
    /// Run the handshake: `initialize` offering `preferred`, accept a counter-offer we speak, then
    /// `notifications/initialized`.
    pub async fn open(
        transport: Arc<HttpTransport>,
        preferred: ProtocolVersion,
        inbox: Arc<Inbox>,
        timeout: Duration,
    ) -> Result<Session, McpError> {
        Self::open_as(transport, preferred, inbox, timeout, CLIENT_NAME).await
    }

    /// [`Session::open`] under another `clientInfo.name`: the demo's clients of its proxy
    /// (`mcp_lab::demo_clients`), which the proxy tells apart by that name.
    pub async fn open_as(
        transport: Arc<HttpTransport>,
        preferred: ProtocolVersion,
        inbox: Arc<Inbox>,
        timeout: Duration,
        client_name: &str,
    ) -> Result<Session, McpError> {
        let params = initialize_params(preferred, client_name);
        let body = jsonrpc::request(0, "initialize", Some(params));
        let none = SessionHeaders::default();
        let reply = deadline(timeout, transport.post(&none, body, Some(0), &inbox)).await?;
        let PostReply::Response {
            outcome,
            session_id,
            ..
        } = reply
        else {
            unreachable!("post with an expected id returns a response")
        };
        let result = outcome.map_err(McpError::from)?;
        if let Some(id) = &session_id
            && !session_id_is_visible_ascii(id)
        {
            return Err(McpError::new(
                Reason::InvalidResponse,
                "session id is not visible ASCII",
            ));
        }
        let info = parse_initialize(&result)?;
        let mut headers = SessionHeaders {
            session_id,
            protocol_version: None,
        };
        let Some(version) = ProtocolVersion::parse(&info.protocol_version) else {
            transport.delete(&headers).await;
            return Err(unsupported(&info.protocol_version));
        };
        if version.sends_version_header() {
            headers.protocol_version = HeaderValue::from_str(&info.protocol_version).ok();
        }
        Session::initialized(Wire::Http { transport, headers }, info, inbox, timeout).await
    }

    /// The handshake over a two-way channel (stdio, HTTP+SSE): no headers, the channel is the
    /// session. `handshake` bounds the initialize (a program just started may take longer than
    /// a request), `timeout` every later request.
    pub async fn open_over(
        duplex: Arc<Duplex>,
        preferred: ProtocolVersion,
        inbox: Arc<Inbox>,
        handshake: Duration,
        timeout: Duration,
    ) -> Result<Session, McpError> {
        let params = initialize_params(preferred, CLIENT_NAME);
        let body = jsonrpc::request(0, "initialize", Some(params));
        let (outcome, _) = deadline(handshake, duplex.request(0, body, usize::MAX)).await?;
        let info = parse_initialize(&outcome.map_err(McpError::from)?)?;
        if ProtocolVersion::parse(&info.protocol_version).is_none() {
            duplex.close().await;
            return Err(unsupported(&info.protocol_version));
        }
        Session::initialized(Wire::Duplex(duplex), info, inbox, timeout).await
    }

    /// The session `initialize` opened on `wire`, once the server is told it is initialized.
    async fn initialized(
        wire: Wire,
        info: ServerInfo,
        inbox: Arc<Inbox>,
        timeout: Duration,
    ) -> Result<Session, McpError> {
        let session = Session {
            wire,
            info,
            next_id: AtomicU64::new(1),
            inbox,
            timeout,
        };
        session.notify("notifications/initialized").await?;
        Ok(session)
    }

    /// The channel under a stdio or HTTP+SSE session.
    pub fn duplex(&self) -> Option<&Arc<Duplex>> {
        match &self.wire {
            Wire::Duplex(d) => Some(d),
            Wire::Http { .. } => None,
        }
    }

    pub fn info(&self) -> &ServerInfo {
        &self.info
    }

    pub fn era(&self) -> Era {
        Era::Legacy
    }

    /// Send a request and wait (at most the session timeout) for its result.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, McpError> {
        self.request_within(method, params, usize::MAX)
            .await
            .map(|(result, _)| result)
    }

    /// [`Session::request`] whose answer may be at most `max_bytes` (else `body_too_large`,
    /// refused before it is parsed); returns the result and the bytes the answer took.
    pub async fn request_within(
        &self,
        method: &str,
        params: Option<Value>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let body = jsonrpc::request(id, method, params);
        let (outcome, bytes) = match &self.wire {
            Wire::Http { transport, headers } => {
                let limits = transport.limits().within(max_bytes);
                let reply = deadline(
                    self.timeout,
                    transport.post_within(headers, body, Some(id), &self.inbox, limits),
                )
                .await?;
                match reply {
                    PostReply::Response { outcome, bytes, .. } => (outcome, bytes),
                    PostReply::Accepted => {
                        unreachable!("post with an expected id returns a response")
                    }
                }
            }
            Wire::Duplex(d) => deadline(self.timeout, d.request(id, body, max_bytes)).await?,
        };
        outcome.map(|r| (r, bytes)).map_err(McpError::from)
    }

    /// One `tools/list` page: the first (`cursor` none) or the one `cursor` names, its answer
    /// held to `max_bytes` (what a walk's [`Pager`](crate::listing::walker::Pager) is asked for).
    pub async fn tools_list_page(
        &self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        self.list_page(crate::listing::list::List::Tools, cursor, max_bytes)
            .await
    }

    /// One page of `list`'s listing method.
    pub async fn list_page(
        &self,
        list: crate::listing::list::List,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let params = cursor.map(|c| json!({ "cursor": c }));
        self.request_within(list.method(), params, max_bytes).await
    }

    /// Send a notification.
    pub async fn notify(&self, method: &str) -> Result<(), McpError> {
        self.send(jsonrpc::notification(method)).await
    }

    /// Send a message that expects no answer (a notification, or a response to the server).
    async fn send(&self, body: Vec<u8>) -> Result<(), McpError> {
        let sent = async {
            match &self.wire {
                Wire::Http { transport, headers } => transport
                    .post(headers, body, None, &self.inbox)
                    .await
                    .map(|_| ()),
                Wire::Duplex(d) => d.send(body).await,
            }
        };
        deadline(self.timeout, sent).await
    }

    /// Answer a request the server sent us: `ping` gets the empty result the spec requires,
    /// anything else "method not found" (this client offers no capabilities).
    pub async fn answer(&self, id: &Value, method: &str) -> Result<(), McpError> {
        let outcome = if method == "ping" {
            Ok(json!({}))
        } else {
            Err(RpcError {
                code: jsonrpc::METHOD_NOT_FOUND,
                message: "Method not found".into(),
                data: None,
            })
        };
        self.send(jsonrpc::response(id, outcome)).await
    }

    /// Open the GET notification stream; `None` when the server offers none (405) or the
    /// session is a two-way channel (its notifications arrive on it).
    pub async fn open_stream(&self) -> Result<Option<NotificationStream>, McpError> {
        match &self.wire {
            Wire::Http { transport, headers } => {
                deadline(self.timeout, transport.open_stream(headers)).await
            }
            Wire::Duplex(_) => Ok(None),
        }
    }

    /// End the session on the server (DELETE; the channel's end), best effort.
    pub async fn close(&self) {
        match &self.wire {
            Wire::Http { transport, headers } if headers.session_id.is_some() => {
                transport.delete(headers).await
            }
            Wire::Http { .. } => {}
            Wire::Duplex(d) => d.close().await,
        }
    }
}

pub(crate) async fn deadline<T>(
    timeout: Duration,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    tokio::time::timeout(timeout, fut)
        .await
        .unwrap_or_else(|_| {
            Err(McpError::new(
                Reason::Timeout,
                format!("no answer within {timeout:?}"),
            ))
        })
}

/// The `clientInfo.name` the exporter introduces itself with.
const CLIENT_NAME: &str = "mcp_exporter";

fn initialize_params(preferred: ProtocolVersion, client_name: &str) -> Value {
    json!({
        "protocolVersion": preferred.as_str(),
        "capabilities": {},
        "clientInfo": {"name": client_name, "version": env!("CARGO_PKG_VERSION")},
    })
}

fn unsupported(chosen: &str) -> McpError {
    McpError::new(
        Reason::UnsupportedVersion,
        format!("server chose protocol version {}", truncate(chosen, 40)),
    )
}

fn parse_initialize(result: &Value) -> Result<ServerInfo, McpError> {
    let bad =
        |what: &str| McpError::new(Reason::InvalidResponse, format!("InitializeResult: {what}"));
    let protocol_version = result
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| bad("no protocolVersion"))?
        .to_string();
    let caps = result
        .get("capabilities")
        .filter(|c| c.is_object())
        .ok_or_else(|| bad("no capabilities object"))?;
    Ok(ServerInfo::read(
        &protocol_version,
        caps,
        result.get("serverInfo"),
    ))
}

impl ServerInfo {
    /// From a capabilities object and an `Implementation` (name, version), in either era.
    pub(crate) fn read(protocol_version: &str, caps: &Value, server: Option<&Value>) -> ServerInfo {
        let tools = caps.get("tools");
        let declared = |capability: &str| {
            let c = caps.get(capability).filter(|c| c.is_object())?;
            Some(
                c.get("listChanged")
                    .and_then(Value::as_bool)
                    .unwrap_or(false),
            )
        };
        let text = |v: Option<&Value>| {
            v.and_then(Value::as_str)
                .map(|s| truncate(s, 64))
                .unwrap_or_default()
        };
        ServerInfo {
            protocol_version: truncate(protocol_version, 64),
            name: text(server.and_then(|s| s.get("name"))),
            version: text(server.and_then(|s| s.get("version"))),
            tools: tools.is_some_and(Value::is_object),
            list_changed: tools
                .and_then(|t| t.get("listChanged"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            prompts: declared("prompts"),
            resources: declared("resources"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listing::list::List;

    #[test]
    fn reads_capabilities_and_server_info() {
        let info = parse_initialize(&json!({
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {"listChanged": true}},
            "serverInfo": {"name": "kb", "version": "1.2"}
        }))
        .unwrap();
        assert_eq!(info.protocol_version, "2025-06-18");
        assert!(info.tools && info.list_changed);
        assert_eq!((info.name.as_str(), info.version.as_str()), ("kb", "1.2"));

        let bare = parse_initialize(&json!({"protocolVersion": "2025-03-26", "capabilities": {}}))
            .unwrap();
        assert!(!bare.tools && !bare.list_changed);
        assert_eq!(bare.name, "");
        assert!(List::ALL.iter().all(|l| bare.declares(*l).is_none()));

        let lists = parse_initialize(&json!({"protocolVersion": "2025-11-25", "capabilities": {
            "tools": {}, "prompts": {"listChanged": true}, "resources": {"subscribe": true}}}))
        .unwrap();
        let declared = List::ALL.map(|l| lists.declares(l));
        assert_eq!(
            declared,
            [Some(false), Some(true), Some(false), Some(false)]
        );
    }

    #[test]
    fn rejects_results_without_required_fields() {
        for bad in [
            json!({}),
            json!({"protocolVersion": "x"}),
            json!({"protocolVersion": 1, "capabilities": {}}),
        ] {
            assert_eq!(
                parse_initialize(&bad).unwrap_err().reason,
                Reason::InvalidResponse
            );
        }
    }
}
