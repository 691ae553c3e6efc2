//! What a 2025-era client of a modern server hears of tool list changes: measured, not inferred.
//!
//! A dual-era server may serve its legacy clients quite differently from its modern ones: the
//! Python SDK's `MCPServer` declares no `listChanged` on its legacy path and announces only to
//! listen streams; rmcp declares `tools: {}`; fastmcp declares `listChanged` and opens a GET
//! stream it never writes to. Reading the declarations alone called all three fine. So connection
//! 0 of a modern target keeps a legacy session of its own on the same URL, as a 2025 client would
//! (initialize, GET stream), and each change the modern path sees is held against that stream: a `list_changed` on it within `notification_grace` (or since the last judgement,
//! as the server may tell the legacy stream before a walk notices) means legacy clients hear
//! changes; none means they do not. A session that declares no `listChanged`, or gets no GET
//! stream, is deaf at once. A gap in the legacy stream voids the judgement in flight (the
//! notification may have been lost with it); the stream is re-opened on the same session after a
//! backoff, and the session itself only when the server forgot it.
//!
//! Costs one session and one idle GET stream per modern target (connection 0 only).

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use mcp_client::backoff::Backoff;
use mcp_client::mcp::client::{self, LegacyPath};
use mcp_client::mcp::http::{NotificationStream, StreamEnd};
use mcp_client::mcp::{HttpTransport, Inbox, McpError, Reason, Session};
use mcp_client::task::{OwnedTask, Slot, poll_slot, sleep_opt};

/// What a legacy client of the server hears, as far as measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LegacyVerdict {
    /// The server turns legacy `initialize` down.
    NotServed,
    /// The legacy session declares no `tools.listChanged`.
    DeclaresNone,
    /// It declares `listChanged` but gets no GET stream.
    NoStream,
    /// Declared and streaming; no change has been seen to test it yet.
    Untested,
    /// A change reached the GET stream as `list_changed`.
    Delivered,
    /// A change did not reach the GET stream within the grace.
    StreamSilent,
}

impl LegacyVerdict {
    /// `mcp_probe_legacy_path_hears_changes`: unknown until measured.
    pub fn hears(self) -> Option<bool> {
        match self {
            LegacyVerdict::Delivered => Some(true),
            LegacyVerdict::DeclaresNone | LegacyVerdict::NoStream | LegacyVerdict::StreamSilent => {
                Some(false)
            }
            LegacyVerdict::NotServed | LegacyVerdict::Untested => None,
        }
    }

    /// The closed set `/status.json` shows.
    pub fn as_str(self) -> &'static str {
        match self {
            LegacyVerdict::NotServed => "not_served",
            LegacyVerdict::DeclaresNone => "declares_none",
            LegacyVerdict::NoStream => "no_stream",
            LegacyVerdict::Untested => "untested",
            LegacyVerdict::Delivered => "delivered",
            LegacyVerdict::StreamSilent => "stream_silent",
        }
    }

    /// For people: the status page, `check --legacy-clients`, the log.
    pub fn words(self) -> &'static str {
        match self {
            LegacyVerdict::NotServed => {
                "the server turns legacy initialize down: it serves modern clients only"
            }
            LegacyVerdict::DeclaresNone => {
                "the legacy (2025) path declares no listChanged: 2025-era clients cache the \
                 list anyway and are stale after each change"
            }
            LegacyVerdict::NoStream => {
                "the legacy (2025) path declares listChanged but offers no GET stream: 2025-era \
                 clients never hear a change"
            }
            LegacyVerdict::Untested => {
                "the legacy (2025) path declares listChanged and opens a GET stream; no change \
                 has tested it yet"
            }
            LegacyVerdict::Delivered => {
                "the legacy (2025) path delivered the last change as list_changed on its GET stream"
            }
            LegacyVerdict::StreamSilent => {
                "the legacy (2025) path declares listChanged and opens a GET stream, but the \
                 last change never arrived on it: 2025-era clients stay stale"
            }
        }
    }
}

/// What the watch is waiting for: a whole legacy session, or a new GET stream on the one it has.
enum Opening {
    Session(Result<LegacyPath, McpError>),
    Stream(Result<Option<NotificationStream>, McpError>),
}

/// Keeps the legacy session and judges each change against its stream.
pub struct LegacyWatch {
    transport: Arc<HttpTransport>,
    timeout: Duration,
    grace: Duration,
    inbox: Arc<Inbox>,
    opening: Slot<Opening>,
    /// The kept session, ended (DELETE) when the watch is dropped.
    session: Option<Arc<Session>>,
    reader: Option<OwnedTask<StreamEnd>>,
    retry_at: Option<Instant>,
    backoff: Backoff,
    /// A change seen: when its grace ends, and the stream's `list_changed` count it is judged
    /// against.
    pending: Option<(Instant, u64)>,
    /// The stream's `list_changed` count at the last judgement.
    judged: u64,
}

impl LegacyWatch {
    /// Start opening the legacy session on `transport` (the modern session's).
    pub fn start(transport: Arc<HttpTransport>, timeout: Duration, grace: Duration) -> Self {
        let (inbox, _requests) = Inbox::new();
        let mut w = LegacyWatch {
            transport,
            timeout,
            grace,
            inbox: Arc::new(inbox),
            opening: None,
            session: None,
            reader: None,
            retry_at: None,
            backoff: Backoff::default(),
            pending: None,
            judged: 0,
        };
        w.open();
        w
    }

    fn open(&mut self) {
        self.opening = Some(match &self.session {
            Some(s) => {
                let s = s.clone();
                Box::pin(async move { Opening::Stream(s.open_stream().await) })
            }
            None => {
                let (t, timeout, inbox) =
                    (self.transport.clone(), self.timeout, self.inbox.clone());
                Box::pin(
                    async move { Opening::Session(client::legacy_path(t, timeout, inbox).await) },
                )
            }
        });
    }

    fn listen(&mut self, stream: NotificationStream) {
        self.backoff.reset();
        let inbox = self.inbox.clone();
        self.reader = Some(OwnedTask::spawn(async move { stream.run(&inbox).await }));
    }

    /// The modern path saw the tool list change now: hold it against the legacy stream.
    pub fn change_seen(&mut self) {
        if self.reader.is_some() && self.pending.is_none() {
            self.pending = Some((Instant::now() + self.grace, self.judged));
        }
    }

    /// The next verdict. Cancel-safe: everything it waits on lives in `self`.
    pub async fn next(&mut self) -> LegacyVerdict {
        loop {
            tokio::select! {
                opened = poll_slot(&mut self.opening) => {
                    self.opening = None;
                    match opened {
                        Opening::Session(Ok(LegacyPath::NotServed)) => return LegacyVerdict::NotServed,
                        Opening::Session(Ok(LegacyPath::DeclaresNone)) => {
                            return LegacyVerdict::DeclaresNone;
                        }
                        Opening::Session(Ok(LegacyPath::NoStream)) | Opening::Stream(Ok(None)) => {
                            self.end_session();
                            return LegacyVerdict::NoStream;
                        }
                        Opening::Session(Ok(LegacyPath::Streaming { session, stream })) => {
                            self.session = Some(Arc::from(session));
                            self.listen(stream);
                            return LegacyVerdict::Untested;
                        }
                        Opening::Stream(Ok(Some(stream))) => self.listen(stream),
                        Opening::Session(Err(e)) => self.retry(Some(e)),
                        Opening::Stream(Err(e)) => {
                            if e.reason == Reason::SessionExpired {
                                // The server forgot the session: a new one next time.
                                self.session = None;
                            }
                            self.retry(Some(e));
                        }
                    }
                }
                end = join_opt(&mut self.reader) => {
                    // A gap: a notification may have been lost with the stream.
                    self.reader = None;
                    self.pending = None;
                    if end.is_some_and(|e| e.error.is_some_and(|e| e.reason == Reason::SessionExpired)) {
                        self.session = None;
                    }
                    self.retry(None);
                }
                _ = sleep_opt(self.retry_at) => {
                    self.retry_at = None;
                    self.open();
                }
                _ = sleep_opt(self.pending.map(|(at, _)| at)) => {
                    let (_, before) = self.pending.take().expect("a pending judgement");
                    let now = self.inbox.list_changed_count();
                    self.judged = now;
                    return if now > before {
                        LegacyVerdict::Delivered
                    } else {
                        LegacyVerdict::StreamSilent
                    };
                }
            }
        }
    }

    fn retry(&mut self, e: Option<McpError>) {
        if let Some(e) = e {
            tracing::debug!(reason = %e.reason, "legacy path session failed");
        }
        self.retry_at = Some(Instant::now() + self.backoff.next_delay());
    }

    fn end_session(&mut self) {
        if let Some(s) = self.session.take()
            && let Ok(rt) = tokio::runtime::Handle::try_current()
        {
            rt.spawn(async move { s.close().await });
        }
    }
}

/// Wait for an optional task's end (its output, unless it panicked); pending forever without
/// one.
async fn join_opt<T: Send + 'static>(task: &mut Option<OwnedTask<T>>) -> Option<T> {
    match task {
        Some(t) => t.join().await.ok(),
        None => std::future::pending().await,
    }
}

impl Drop for LegacyWatch {
    fn drop(&mut self) {
        self.end_session();
    }
}
