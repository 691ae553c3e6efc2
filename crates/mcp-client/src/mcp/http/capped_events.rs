//! An SSE event stream held to a per-event size cap, counting its bytes and keeping the last
//! event id and `retry` for resumption. Every SSE body this client reads (POST answers, GET and
//! listen streams, the HTTP+SSE stream) goes through it, so no server can make it buffer more.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures_util::{Stream, StreamExt};

use crate::mcp::error::{McpError, Reason};
use crate::mcp::sse_lines::{Cursor, LineFramer, TooLarge};

/// Why the byte stream under an SSE parser stopped.
#[derive(Debug)]
enum ByteFault {
    Http(reqwest::Error),
    EventTooLarge(usize),
}

type ByteStream = std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, ByteFault>> + Send>>;

/// An SSE event stream fed whole lines by a [`LineFramer`], so the pending line and event are
/// capped and every byte is parsed once.
pub(crate) struct CappedEvents {
    inner: std::pin::Pin<Box<eventsource_stream::EventStream<ByteStream>>>,
    total: Arc<AtomicUsize>,
    cursor: Arc<Mutex<Cursor>>,
}

impl CappedEvents {
    /// `start` is where an earlier stream of the same answer left off (default for a new one).
    pub(crate) fn new(resp: reqwest::Response, max_event_bytes: usize, start: Cursor) -> Self {
        let total = Arc::new(AtomicUsize::new(0));
        let seen = total.clone();
        let cursor = Arc::new(Mutex::new(start.clone()));
        let latest = cursor.clone();
        let state = (
            Box::pin(resp.bytes_stream()),
            LineFramer::resuming(max_event_bytes, start),
            std::collections::VecDeque::<Bytes>::new(),
            false,
        );
        let lines = futures_util::stream::unfold(
            state,
            move |(mut body, mut framer, mut queue, failed)| {
                let seen = seen.clone();
                let latest = latest.clone();
                async move {
                    loop {
                        if let Some(line) = queue.pop_front() {
                            return Some((Ok(line), (body, framer, queue, failed)));
                        }
                        if failed {
                            return None;
                        }
                        match body.next().await? {
                            Ok(chunk) => {
                                let mut out = Vec::new();
                                let pushed = framer.push(&chunk, &mut out);
                                seen.store(framer.total(), Ordering::Relaxed);
                                if let Some(c) = framer.take_cursor_change() {
                                    *latest.lock().expect("cursor lock") = c;
                                }
                                queue.extend(out);
                                if let Err(TooLarge(cap)) = pushed {
                                    return Some((
                                        Err(ByteFault::EventTooLarge(cap)),
                                        (body, framer, queue, true),
                                    ));
                                }
                            }
                            Err(e) => {
                                return Some((
                                    Err(ByteFault::Http(e)),
                                    (body, framer, queue, true),
                                ));
                            }
                        }
                    }
                }
            },
        );
        let bytes: ByteStream = Box::pin(lines);
        CappedEvents {
            inner: Box::pin(bytes.eventsource()),
            total,
            cursor,
        }
    }

    pub(super) fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Last event id and `retry` of every line read so far (exact once the stream has ended).
    pub(super) fn cursor(&self) -> Cursor {
        self.cursor.lock().expect("cursor lock").clone()
    }

    pub(crate) async fn next(&mut self) -> Option<Result<Event, McpError>> {
        let item = self.inner.next().await?;
        Some(item.map_err(|e| match e {
            EventStreamError::Transport(ByteFault::Http(e)) => McpError::from_reqwest(&e),
            EventStreamError::Transport(ByteFault::EventTooLarge(cap)) => {
                McpError::new(Reason::BodyTooLarge, format!("SSE event over {cap} bytes"))
            }
            EventStreamError::Utf8(_) => {
                McpError::new(Reason::InvalidJson, "SSE data is not UTF-8")
            }
            EventStreamError::Parser(_) => McpError::new(Reason::InvalidResponse, "malformed SSE"),
        }))
    }
}
