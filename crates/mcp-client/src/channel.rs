//! The notification channel keeper: the one re-open policy for the channel `list_changed`
//! arrives on — the legacy GET stream or a modern `subscriptions/listen` stream — shared by the
//! probe and `check`.
//!
//! It opens the channel, notices when it ends, and re-opens it after the server's SSE `retry`
//! (clamped) or an exponential backoff with jitter. Every re-open is reported, because the
//! notifications sent while the channel was down are lost in both eras (the modern era has no
//! resumption at all): the owner must re-list after each gap.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::backoff::Backoff;
use crate::mcp::http::StreamEnd;
use crate::mcp::{Channel, Client, Inbox, McpError, Reason};
use crate::task::{OwnedTask, Slot, poll_slot, sleep_opt};

/// Shortest and longest wait honoured from an SSE `retry` field.
pub const MIN_RETRY: Duration = Duration::from_millis(100);
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// What happened to the channel.
#[derive(Debug)]
pub enum ChannelEvent {
    /// The channel is open. `after_gap`: opened by a retry, so changes may have been missed
    /// (re-list); `reconnected`: it had been open before in this session.
    Opened {
        after_gap: bool,
        reconnected: bool,
        /// Whether the server will send tool list changes on it (the listen acknowledgement).
        tools_list_changed: bool,
    },
    /// The server offers no channel (GET 405; `subscriptions/listen` not implemented). Not
    /// retried within this session.
    Unavailable,
    /// The channel ended, or failed to open; it is re-opened after `retry_in`.
    Lost {
        error: Option<McpError>,
        retry_in: Duration,
    },
    /// The session is gone (404 on its id): the owner opens a new one.
    Expired,
    /// The session's one two-way channel ended (stdio process exited, HTTP+SSE stream lost):
    /// the session is over, and the owner opens a new one after its backoff.
    Closed(McpError),
}

/// Keeps one session's notification channel open.
pub struct ChannelKeeper {
    reader: Option<OwnedTask<StreamEnd>>,
    /// Whether the open channel's end ends the session.
    ends_session: bool,
    opening: Slot<Result<Option<Channel>, McpError>>,
    retry_at: Option<Instant>,
    backoff: Backoff,
    retried: bool,
    was_open: bool,
}

impl Default for ChannelKeeper {
    fn default() -> Self {
        Self::new()
    }
}

impl ChannelKeeper {
    pub fn new() -> Self {
        ChannelKeeper {
            reader: None,
            ends_session: false,
            opening: None,
            retry_at: None,
            backoff: Backoff::default(),
            retried: false,
            was_open: false,
        }
    }

    /// Whether the channel is open now.
    pub fn is_open(&self) -> bool {
        self.reader.is_some()
    }

    /// Open now and wait for the outcome (the first open, before the first walk, so a change
    /// during the walk is heard).
    pub async fn open_now(&mut self, client: &Arc<Client>, inbox: &Arc<Inbox>) -> ChannelEvent {
        self.start_opening(client);
        self.next(client, inbox).await
    }

    fn start_opening(&mut self, client: &Arc<Client>) {
        let c = client.clone();
        self.opening = Some(Box::pin(async move { c.open_channel().await }));
    }

    /// The next thing that happens to the channel; pending while it is open and well, or after
    /// it turned out unavailable. Cancel-safe: everything it waits on lives in `self`.
    pub async fn next(&mut self, client: &Arc<Client>, inbox: &Arc<Inbox>) -> ChannelEvent {
        if let Some(reader) = &mut self.reader {
            let end = reader.join().await.unwrap_or(StreamEnd {
                error: None,
                retry: None,
            });
            self.reader = None;
            if self.ends_session {
                let e = end.error.unwrap_or_else(|| {
                    McpError::new(Reason::StreamClosed, "the session's channel ended")
                });
                return ChannelEvent::Closed(e);
            }
            if end
                .error
                .as_ref()
                .is_some_and(|e| e.reason == Reason::SessionExpired)
            {
                return ChannelEvent::Expired;
            }
            let retry_in = end
                .retry
                .map(|r| r.clamp(MIN_RETRY, MAX_RETRY))
                .unwrap_or_else(|| self.backoff.next_delay());
            return self.lost(end.error, retry_in);
        }
        if self.opening.is_none() {
            if self.retry_at.is_none() {
                return std::future::pending().await;
            }
            sleep_opt(self.retry_at).await;
            self.retry_at = None;
            self.start_opening(client);
        }
        let opened = poll_slot(&mut self.opening).await;
        self.opening = None;
        match opened {
            Ok(Some(channel)) => {
                self.backoff.reset();
                let inbox = inbox.clone();
                let stream = channel.stream;
                self.ends_session = stream.ends_session();
                self.reader = Some(OwnedTask::spawn(async move { stream.run(&inbox).await }));
                let event = ChannelEvent::Opened {
                    after_gap: self.retried,
                    reconnected: self.was_open,
                    tools_list_changed: channel.tools_list_changed,
                };
                self.was_open = true;
                event
            }
            Ok(None) => ChannelEvent::Unavailable,
            Err(e) if e.reason == Reason::SessionExpired => ChannelEvent::Expired,
            Err(e) => {
                let retry_in = self.backoff.next_delay();
                self.lost(Some(e), retry_in)
            }
        }
    }

    fn lost(&mut self, error: Option<McpError>, retry_in: Duration) -> ChannelEvent {
        self.retry_at = Some(Instant::now() + retry_in);
        self.retried = true;
        ChannelEvent::Lost { error, retry_in }
    }
}
