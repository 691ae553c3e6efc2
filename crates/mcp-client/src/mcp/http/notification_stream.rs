//! The server's long-lived stream (the legacy GET stream, or a modern `subscriptions/listen`
//! stream once acknowledged): opened, then read until it ends, its messages filed into the
//! inbox in bursts. Apart from the POSTs because it outlives every exchange.

use std::time::Duration;

use futures_util::FutureExt;
use reqwest::header::ACCEPT;
use reqwest::{Method, StatusCode};

use super::HttpTransport;
use super::answer::{ContentKind, check_status, content_kind};
use super::capped_events::CappedEvents;
use super::headers::SessionHeaders;
use crate::mcp::error::{McpError, Reason};
use crate::mcp::inbox::Inbox;
use crate::mcp::jsonrpc::{self, Incoming};
use crate::mcp::sse_lines::Cursor;
use crate::target_http::Route;

impl HttpTransport {
    /// Open the GET stream. `None` when the server offers none (405).
    pub async fn open_stream(
        &self,
        session: &SessionHeaders,
    ) -> Result<Option<NotificationStream>, McpError> {
        let resp = self
            .send_by(
                |c| {
                    self.builder(c, Method::GET, session)
                        .header(ACCEPT, "text/event-stream")
                },
                Route::OwnSocket,
            )
            .await?;
        if resp.status() == StatusCode::METHOD_NOT_ALLOWED {
            return Ok(None);
        }
        check_status(resp.status(), session.session_id.is_some())?;
        if content_kind(resp.headers()) != ContentKind::EventStream {
            return Err(McpError::new(
                Reason::ContentType,
                "GET stream is not text/event-stream",
            ));
        }
        Ok(Some(NotificationStream {
            events: CappedEvents::new(resp, self.limits.max_event_bytes, Cursor::default()),
            ends_on: None,
        }))
    }
}

/// The server's long-lived stream of notifications and requests: the legacy GET stream, or a
/// modern `subscriptions/listen` stream.
pub struct NotificationStream {
    pub(super) events: CappedEvents,
    /// The listen request's id: its result is the stream's graceful end.
    pub(super) ends_on: Option<u64>,
}

impl NotificationStream {
    /// Read until the stream ends, filing every message into `inbox`. Returns why it ended.
    ///
    /// Events at hand are delivered as one burst (see [`Inbox::burst`]): the connection is woken
    /// when the stream has nothing more within [`BURST_SETTLE`] of a `list_changed`, or after
    /// [`MAX_BURST_EVENTS`]. The settle is what makes a burst whole: the HTTP client hands over
    /// one chunk of a read at a time, so the second of two notifications written together may
    /// not be at hand yet when the first is.
    pub async fn run(mut self, inbox: &Inbox) -> StreamEnd {
        let mut burst = inbox.burst();
        let mut held = 0usize;
        let error = loop {
            let at_hand = if held >= MAX_BURST_EVENTS {
                None
            } else if burst.waking() {
                tokio::time::timeout(BURST_SETTLE, self.events.next())
                    .await
                    .ok()
            } else {
                self.events.next().now_or_never()
            };
            let ready = match at_hand {
                Some(event) => {
                    held += 1;
                    event
                }
                None => {
                    burst.flush();
                    held = 0;
                    self.events.next().await
                }
            };
            match ready {
                None => break None,
                Some(Err(e)) => break Some(e),
                Some(Ok(event)) if event.data.is_empty() => {}
                Some(Ok(event)) => match jsonrpc::decode(event.data.as_bytes()) {
                    Ok(msgs) => {
                        let mut ended = false;
                        for m in msgs {
                            match m {
                                Incoming::Response { id, .. }
                                    if self
                                        .ends_on
                                        .is_some_and(|s| jsonrpc::id_matches(&id, s)) =>
                                {
                                    ended = true
                                }
                                m => burst.deliver(m),
                            }
                        }
                        if ended {
                            break None;
                        }
                    }
                    Err(e) => break Some(e),
                },
            }
        };
        StreamEnd {
            error,
            retry: self.events.cursor().retry,
        }
    }
}

/// Most events of a notification stream delivered before the connection is woken, however
/// fast they come: a burst is a few messages written together, not a flood held back.
const MAX_BURST_EVENTS: usize = 64;
/// How long a `list_changed` waits for another one written with it before the connection is
/// woken: two notifications a server writes back to back (a change made in two steps) arrive
/// within microseconds; the cost is this much latency on a refresh.
const BURST_SETTLE: Duration = Duration::from_millis(1);

/// Why a GET stream ended: closed cleanly (`error` none) or broken; and the server's `retry` hint.
#[derive(Debug)]
pub struct StreamEnd {
    pub error: Option<McpError>,
    pub retry: Option<Duration>,
}
