//! One client over both eras: what the probe and `check` do to a server, whichever era it
//! speaks. Connecting picks the era (detected for `auto`, or pinned); afterwards the caller asks
//! for a request, a liveness proof, or the notification channel, and this type does what the
//! era prescribes (`ping` or `server/discover`; the GET stream or `subscriptions/listen`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::duplex::Duplex;
use super::error::{McpError, Reason};
use super::http::{HttpTransport, Limits, NotificationStream, StreamEnd};
use super::inbox::Inbox;
use super::modern::{self, Detected, ModernClient};
use super::session::{ServerInfo, Session};
use super::version::{Era, ProtocolVersion};
use super::{legacy_sse, stdio};
use crate::listing::list::List;

/// How long a program started for a stdio session has to answer its `initialize`, when that is
/// longer than the request timeout. Its first line waits for the program to load (an interpreter
/// importing its SDK, `npx` or `uvx` fetching a package on a cold cache): were that bounded by the
/// request timeout, a slow start would be taken for a dead server, the program killed and started
/// again, just as slowly, and the session never opened.
pub const STDIO_STARTUP: Duration = Duration::from_secs(30);

/// A connected client of one server, in the era it speaks.
#[derive(Debug)]
pub enum Client {
    Legacy(Session),
    Modern(ModernClient),
}

/// Records one exchange of the connect (method, duration, outcome) — the probe counts them in
/// its request metrics.
pub type Observe<'a> = &'a (dyn Fn(&'static str, Duration, Result<(), Reason>) + Sync);

/// How to reach a server.
pub enum Dialer {
    /// Streamable HTTP (both eras). With `sse_fallback`, a server that refuses the legacy
    /// `initialize` POST with 400, 404 or 405 is tried as an HTTP+SSE (2024-11-05) server at the
    /// same URL, as the spec's backwards-compatibility section describes.
    Http {
        transport: Arc<HttpTransport>,
        sse_fallback: Option<SseEndpoint>,
    },
    /// HTTP+SSE (2024-11-05): the URL is the SSE (GET) endpoint.
    Sse(SseEndpoint),
    /// A local process on stdio, started for each session.
    Stdio {
        command: stdio::Command,
        limits: Limits,
    },
}

/// Where an HTTP+SSE server's stream is, and the headers it is opened with.
pub struct SseEndpoint {
    /// The target's client and credentials (shared with its Streamable HTTP transport).
    pub net: Arc<crate::target_http::TargetHttp>,
    pub url: url::Url,
    pub headers: Vec<(String, String)>,
    pub limits: Limits,
}

/// What a notification channel reads.
pub enum ChannelStream {
    /// An SSE stream of its own (legacy GET stream, modern listen stream).
    Sse(NotificationStream),
    /// The session's one two-way channel (stdio, HTTP+SSE): its end is the session's end.
    Session(Arc<Duplex>),
}

impl ChannelStream {
    /// Read until the stream ends, filing every message into `inbox`.
    pub async fn run(self, inbox: &Inbox) -> StreamEnd {
        match self {
            ChannelStream::Sse(s) => s.run(inbox).await,
            // The channel's reader files messages itself; here we only wait for its end.
            ChannelStream::Session(d) => StreamEnd {
                error: Some(d.closed().await),
                retry: None,
            },
        }
    }

    /// Whether the end of this stream ends the session.
    pub fn ends_session(&self) -> bool {
        matches!(self, ChannelStream::Session(_))
    }
}

/// The notification channel of a client, once open.
pub struct Channel {
    pub stream: ChannelStream,
    /// Whether tool list changes will arrive on it: the server's listen acknowledgement in the
    /// modern era; assumed in the legacy era (the GET stream carries whatever the server sends).
    pub tools_list_changed: bool,
}

impl Client {
    /// Connect: `pinned` to one version, or (`None`) the newest era the server serves — a
    /// modern `server/discover` first, `initialize` when the server turns out to be legacy (and
    /// over HTTP+SSE when the dialer allows and Streamable HTTP is refused). stdio and HTTP+SSE
    /// speak the legacy era.
    pub async fn connect(
        dialer: &Dialer,
        pinned: Option<ProtocolVersion>,
        inbox: Arc<Inbox>,
        timeout: Duration,
        observe: Observe<'_>,
    ) -> Result<Client, McpError> {
        let legacy = match pinned {
            Some(v) if v.era() == Era::Modern => None,
            Some(v) => Some(v),
            None => Some(ProtocolVersion::NEWEST_LEGACY),
        };
        match dialer {
            Dialer::Http {
                transport,
                sse_fallback,
            } => {
                let tried = Self::connect_http(transport, pinned, inbox.clone(), timeout, observe);
                match (tried.await, sse_fallback) {
                    (Err(e), Some(sse)) if pinned.is_none() && refuses_streamable(&e) => {
                        tracing::debug!(reason = %e.reason, "Streamable HTTP refused; trying HTTP+SSE");
                        Self::connect_sse(
                            sse,
                            ProtocolVersion::NEWEST_LEGACY,
                            inbox,
                            timeout,
                            observe,
                        )
                        .await
                    }
                    (r, _) => r,
                }
            }
            Dialer::Sse(sse) => {
                let v = legacy.ok_or_else(|| legacy_only("HTTP+SSE"))?;
                Self::connect_sse(sse, v, inbox, timeout, observe).await
            }
            Dialer::Stdio { command, limits } => {
                let v = legacy.ok_or_else(|| legacy_only("stdio"))?;
                let duplex = stdio::connect_stdio(command, inbox.clone(), *limits).await?;
                let handshake = timeout.max(STDIO_STARTUP);
                Self::initialize_over(duplex, v, inbox, handshake, timeout, observe).await
            }
        }
    }

    async fn connect_sse(
        sse: &SseEndpoint,
        version: ProtocolVersion,
        inbox: Arc<Inbox>,
        timeout: Duration,
        observe: Observe<'_>,
    ) -> Result<Client, McpError> {
        let duplex = timed(observe, "sse/connect", async {
            legacy_sse::connect_sse(
                sse.net.clone(),
                sse.url.clone(),
                &sse.headers,
                inbox.clone(),
                sse.limits,
                timeout,
            )
            .await
        })
        .await?;
        Self::initialize_over(duplex, version, inbox, timeout, timeout, observe).await
    }

    async fn initialize_over(
        duplex: Duplex,
        version: ProtocolVersion,
        inbox: Arc<Inbox>,
        handshake: Duration,
        timeout: Duration,
        observe: Observe<'_>,
    ) -> Result<Client, McpError> {
        let duplex = Arc::new(duplex);
        let opened = timed(observe, "initialize", async {
            Session::open_over(duplex.clone(), version, inbox, handshake, timeout).await
        })
        .await;
        if opened.is_err() {
            duplex.close().await;
        }
        opened.map(Client::Legacy)
    }

    async fn connect_http(
        transport: &Arc<HttpTransport>,
        pinned: Option<ProtocolVersion>,
        inbox: Arc<Inbox>,
        timeout: Duration,
        observe: Observe<'_>,
    ) -> Result<Client, McpError> {
        let transport = transport.clone();
        let legacy = match pinned {
            Some(v) if v.era() == Era::Legacy => v,
            Some(v) => {
                let c = timed(observe, "server/discover", async {
                    ModernClient::connect(transport, v, inbox, timeout).await
                })
                .await?;
                return Ok(Client::Modern(c));
            }
            None => {
                let detected = timed(observe, "server/discover", async {
                    modern::detect(
                        transport.clone(),
                        ProtocolVersion::NEWEST,
                        inbox.clone(),
                        timeout,
                    )
                    .await
                })
                .await?;
                match detected {
                    Detected::Modern(c) => return Ok(Client::Modern(c)),
                    Detected::Legacy(why) => {
                        tracing::debug!(reason = %why.reason, detail = %why.detail, "not a modern server; initializing");
                        ProtocolVersion::NEWEST_LEGACY
                    }
                }
            }
        };
        let session = timed(observe, "initialize", async {
            Session::open(transport, legacy, inbox, timeout).await
        })
        .await?;
        Ok(Client::Legacy(session))
    }

    pub fn era(&self) -> Era {
        match self {
            Client::Legacy(_) => Era::Legacy,
            Client::Modern(_) => Era::Modern,
        }
    }

    pub fn info(&self) -> &ServerInfo {
        match self {
            Client::Legacy(s) => s.info(),
            Client::Modern(c) => c.info(),
        }
    }

    /// Send a request and wait for its result.
    pub async fn request(&self, method: &str, params: Option<Value>) -> Result<Value, McpError> {
        self.request_within(method, params, usize::MAX)
            .await
            .map(|(result, _)| result)
    }

    /// A request whose answer may take at most `max_bytes`; returns the result and its bytes.
    pub async fn request_within(
        &self,
        method: &str,
        params: Option<Value>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        match self {
            Client::Legacy(s) => s.request_within(method, params, max_bytes).await,
            Client::Modern(c) => c.request_within(method, params, max_bytes).await,
        }
    }

    /// One page of `tools/list` (at `cursor`), its answer bounded by `max_bytes`: what every
    /// walker pager asks for.
    pub async fn tools_list_page(
        &self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        self.list_page(List::Tools, cursor, max_bytes).await
    }

    /// One page of `list`'s listing method, in either era.
    pub async fn list_page(
        &self,
        list: List,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        match self {
            Client::Legacy(s) => s.list_page(list, cursor, max_bytes).await,
            Client::Modern(c) => {
                let params = cursor.map(|c| serde_json::json!({ "cursor": c }));
                c.request_within(list.method(), params, max_bytes).await
            }
        }
    }

    /// `tools/call` with `params`; in the modern era the tool's `x-mcp-header` parameters
    /// (`annotated`) are mirrored into `Mcp-Param-*` headers, as Streamable HTTP clients must.
    pub async fn call_tool(
        &self,
        params: Value,
        annotated: &[super::param_headers::HeaderParam],
    ) -> Result<Value, McpError> {
        match self {
            Client::Legacy(s) => s.request("tools/call", Some(params)).await,
            Client::Modern(c) => {
                let headers = params
                    .get("arguments")
                    .and_then(Value::as_object)
                    .map(|args| super::param_headers::headers(annotated, args))
                    .unwrap_or_default();
                c.request_with("tools/call", Some(params), usize::MAX, headers)
                    .await
                    .map(|(result, _)| result)
            }
        }
    }

    /// The request that proves the server answers: `ping` in the legacy era; in the modern era,
    /// where `ping` is gone, `server/discover` as the spec suggests.
    pub fn liveness_method(&self) -> &'static str {
        match self {
            Client::Legacy(_) => "ping",
            Client::Modern(_) => "server/discover",
        }
    }

    /// Prove liveness (see [`Client::liveness_method`]).
    pub async fn liveness(&self) -> Result<(), McpError> {
        match self {
            Client::Legacy(s) => s.request("ping", None).await.map(|_| ()),
            Client::Modern(c) => c.discover().await.map(|_| ()),
        }
    }

    /// Open the channel on which `list_changed` arrives: the GET stream (legacy; `None` when the
    /// server offers none, 405), or a `subscriptions/listen` stream (modern; `None` when the
    /// server does not implement it).
    pub async fn open_channel(&self) -> Result<Option<Channel>, McpError> {
        match self {
            Client::Legacy(s) => match s.duplex() {
                Some(d) => Ok(Some(Channel {
                    stream: ChannelStream::Session(d.clone()),
                    tools_list_changed: true,
                })),
                None => Ok(s.open_stream().await?.map(|stream| Channel {
                    stream: ChannelStream::Sse(stream),
                    tools_list_changed: true,
                })),
            },
            Client::Modern(c) => match c.listen().await {
                Ok(l) => Ok(Some(Channel {
                    stream: ChannelStream::Sse(l.stream),
                    tools_list_changed: l.tools_list_changed,
                })),
                Err(e) if e.rpc_code == Some(super::jsonrpc::METHOD_NOT_FOUND) => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// What the channel is called in logs and on the status page.
    pub fn channel_name(&self) -> &'static str {
        match self {
            Client::Legacy(s) if s.duplex().is_some() => "session channel",
            Client::Legacy(_) => "GET stream",
            Client::Modern(_) => "listen stream",
        }
    }

    /// The end of what a stdio server wrote to stderr (at most `max_bytes`, safe to show).
    pub fn stderr_tail(&self, max_bytes: usize) -> Option<String> {
        match self {
            Client::Legacy(s) => s.duplex()?.stderr_tail(max_bytes),
            Client::Modern(_) => None,
        }
    }

    /// Answer a request the server sent (legacy only: in the modern era servers send none).
    pub async fn answer(&self, id: &Value, method: &str) -> Result<(), McpError> {
        match self {
            Client::Legacy(s) => s.answer(id, method).await,
            Client::Modern(_) => Ok(()),
        }
    }

    /// End the session (legacy DELETE), best effort; nothing to end in the modern era.
    pub async fn close(&self) {
        if let Client::Legacy(s) = self {
            s.close().await;
        }
    }
}

/// A legacy (2025-11-25) session opened on a modern server's URL: what its 2025-era clients get.
pub enum LegacyPath {
    /// The server turns `initialize` down: it serves modern clients only.
    NotServed,
    /// The legacy session declares no `tools.listChanged`: its clients cache the list all the
    /// same (the 2025 era has no other rule) and never hear a change.
    DeclaresNone,
    /// It declares `listChanged` but offers no GET stream (a stateless legacy fallback answers
    /// GET with 405): its clients wait for notifications that never come.
    NoStream,
    /// It declares `listChanged` and its GET stream is open: whether a change arrives on it is
    /// for the caller to measure (a server may declare and stream, and still announce on the
    /// modern channel only).
    Streaming {
        session: Box<Session>,
        stream: NotificationStream,
    },
}

/// Open a legacy session on a modern server's URL as a 2025-era client does: `initialize`, then
/// the GET stream. It lists nothing: a listing would cost the server a walk for each watch, and
/// a server that announces only to sessions that listed is rare among the SDKs (none of the
/// official ones does). A transport failure is an error; a session that is not kept is ended.
pub async fn legacy_path(
    transport: Arc<HttpTransport>,
    timeout: Duration,
    inbox: Arc<Inbox>,
) -> Result<LegacyPath, McpError> {
    let session =
        match Session::open(transport, ProtocolVersion::NEWEST_LEGACY, inbox, timeout).await {
            Ok(s) => s,
            Err(e) if matches!(e.reason, Reason::Http4xx | Reason::JsonrpcError) => {
                return Ok(LegacyPath::NotServed);
            }
            Err(e) => return Err(e),
        };
    let kept = if !session.info().list_changed {
        Ok(LegacyPath::DeclaresNone)
    } else {
        match session.open_stream().await {
            Ok(Some(stream)) => {
                return Ok(LegacyPath::Streaming {
                    session: Box::new(session),
                    stream,
                });
            }
            Ok(None) => Ok(LegacyPath::NoStream),
            Err(e) => Err(e),
        }
    };
    session.close().await;
    kept
}

/// The spec's signal that a server does not speak Streamable HTTP: the `initialize` POST is
/// refused with 400, 404 or 405 (2025-11-25 transports § backwards compatibility).
fn refuses_streamable(e: &McpError) -> bool {
    matches!(e.http_status, Some(400 | 404 | 405))
}

fn legacy_only(transport: &str) -> McpError {
    McpError::new(
        Reason::UnsupportedVersion,
        format!(
            "{transport} targets speak the legacy era in this build; pin a legacy version or use auto"
        ),
    )
}

async fn timed<T>(
    observe: Observe<'_>,
    method: &'static str,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let start = Instant::now();
    let r = fut.await;
    observe(
        method,
        start.elapsed(),
        r.as_ref().map(|_| ()).map_err(|e| e.reason),
    );
    r
}
