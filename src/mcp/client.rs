//! One client over both eras: what the probe and `check` do to a server, whichever era it
//! speaks. Connecting picks the era (detected for `auto`, or pinned); afterwards the caller asks
//! for a request, a liveness proof, or the notification channel, and this type does what the
//! era prescribes (`ping` or `server/discover`; the GET stream or `subscriptions/listen`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::error::{McpError, Reason};
use super::http::{HttpTransport, NotificationStream};
use super::inbox::Inbox;
use super::modern::{self, Detected, ModernClient};
use super::session::{ServerInfo, Session};
use super::version::{Era, ProtocolVersion};

/// A connected client of one server, in the era it speaks.
#[derive(Debug)]
pub enum Client {
    Legacy(Session),
    Modern(ModernClient),
}

/// Records one exchange of the connect (method, duration, outcome) — the probe counts them in
/// its request metrics.
pub type Observe<'a> = &'a (dyn Fn(&'static str, Duration, Result<(), Reason>) + Sync);

/// The notification channel of a client, once open.
pub struct Channel {
    pub stream: NotificationStream,
    /// Whether tool list changes will arrive on it: the server's listen acknowledgement in the
    /// modern era; assumed in the legacy era (the GET stream carries whatever the server sends).
    pub tools_list_changed: bool,
}

impl Client {
    /// Connect: `pinned` to one version, or (`None`) the newest era the server serves — a
    /// modern `server/discover` first, `initialize` when the server turns out to be legacy.
    pub async fn connect(
        transport: Arc<HttpTransport>,
        pinned: Option<ProtocolVersion>,
        inbox: Arc<Inbox>,
        timeout: Duration,
        observe: Observe<'_>,
    ) -> Result<Client, McpError> {
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
            Client::Legacy(s) => Ok(s.open_stream().await?.map(|stream| Channel {
                stream,
                tools_list_changed: true,
            })),
            Client::Modern(c) => match c.listen().await {
                Ok(l) => Ok(Some(Channel {
                    stream: l.stream,
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
            Client::Legacy(_) => "GET stream",
            Client::Modern(_) => "listen stream",
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
