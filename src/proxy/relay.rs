//! The upstream's answer body on its way to the client: streamed chunk by chunk, shown to the
//! observer as it passes (which reads its JSON-RPC, see [`super::answers`]), within its time
//! budget (`upstream_timeout` for a whole body, `stream_idle_timeout` between a stream's bytes),
//! with healing's frames slipped in between a stream's events.
//!
//! It exists apart from [`super::forward`] because it outlives the handler: the handler returns
//! the answer's head at once, and this stream carries the body for as long as the upstream sends
//! it, ending cleanly or, for a body cut short, with an error that aborts the connection.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::Stream;

use super::Shared;
use super::exchange::{Exchange, is_stream_key, stream_key_of};
use super::observe::{Asked, JsonBody, SseReader};
use crate::proxy::metrics::Rejected;

/// How an answer's body is read as it passes.
pub(super) enum Kind {
    Sse(SseReader),
    Json(JsonBody),
    None,
}

impl Kind {
    /// By the answer's content type; a JSON body is kept (up to a bound) only when the
    /// exchange asked something its answer tells about.
    pub(super) fn of(resp: &reqwest::Response, exchange: &Exchange) -> Kind {
        match mcp_client::mcp::http::content_kind(resp.headers()) {
            mcp_client::mcp::http::ContentKind::EventStream => Kind::Sse(SseReader::default()),
            mcp_client::mcp::http::ContentKind::Json => {
                let asked = |f: fn(&Asked) -> bool| exchange.requests.iter().any(|r| f(&r.asked));
                let keep = if asked(|a| matches!(a, Asked::ToolsList { .. } | Asked::List { .. })) {
                    super::observe::MAX_OBSERVED_BYTES
                } else if asked(|a| matches!(a, Asked::ToolsCall { .. })) {
                    super::observe::MAX_CALL_ANSWER_BYTES
                } else {
                    0
                };
                Kind::Json(JsonBody::new(keep, resp.content_length()))
            }
            _ => Kind::None,
        }
    }
}

pub(super) struct Observer {
    sh: Arc<Shared>,
    exchange: Exchange,
    kind: Kind,
    /// A GET stream of the MCP path: its `endpoint` events name a message path to forward.
    learn_endpoints: bool,
}

impl Observer {
    pub(super) fn new(
        sh: Arc<Shared>,
        exchange: Exchange,
        kind: Kind,
        learn_endpoints: bool,
    ) -> Observer {
        Observer {
            sh,
            exchange,
            kind,
            learn_endpoints,
        }
    }

    fn chunk(&mut self, chunk: &[u8]) {
        match &mut self.kind {
            Kind::Sse(r) => {
                let mut seen = Vec::new();
                r.push(chunk, |m| seen.push(m));
                if let Some(endpoint) = r.take_endpoint()
                    && self.learn_endpoints
                    && let Some(url) = self.sh.paths.learn_endpoint(&endpoint)
                {
                    // This GET stream is an HTTP+SSE session's: its messages answer the POSTs
                    // to the URL it named.
                    self.exchange.key = stream_key_of(url.query());
                }
                for m in seen {
                    match self.exchange.key.as_deref() {
                        Some(k) if is_stream_key(k) => self.sh.on_stream_message(k, m),
                        _ => self.sh.on_answer(&self.exchange, m),
                    }
                }
            }
            Kind::Json(b) => {
                if b.push(chunk) {
                    self.settle_json();
                }
            }
            Kind::None => {}
        }
    }

    /// A JSON answer is complete: account what it answered (once).
    fn settle_json(&mut self) {
        let Kind::Json(b) = std::mem::replace(&mut self.kind, Kind::None) else {
            return;
        };
        let messages = b.messages();
        if messages.is_empty() {
            // Not kept (or not JSON-RPC): its end still times every request it answered.
            let took = self.exchange.started.elapsed();
            for r in &self.exchange.requests {
                self.sh.metrics.duration(r.method, took);
            }
        }
        for m in messages {
            self.sh.on_answer(&self.exchange, m);
        }
    }

    fn finish(mut self) {
        self.settle_json();
    }
}

/// The time budget of an answer's body.
#[derive(Clone, Copy)]
enum Timer {
    /// Not a stream: the whole body by the request's `upstream_timeout` deadline.
    Deadline,
    /// A stream: a byte at least every this long.
    Idle(Duration),
}

/// The upstream's body on its way to the client, shown to the observer chunk by chunk, within
/// its time budget. A body with a length is dropped without being polled to its end: the
/// observer finishes then.
pub(super) struct Observed {
    inner: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
    timer: Timer,
    expires: Pin<Box<tokio::time::Sleep>>,
    /// The budget ran out (or the body ended): nothing more is polled.
    ended: bool,
    /// Healing's frames for this stream, sent between the upstream's events.
    heal: Option<super::heal::Tap>,
    metrics: Arc<crate::proxy::metrics::ProxyMetrics>,
    obs: Option<Observer>,
}

impl Observed {
    /// `resp`'s body, within `deadline` (the request's `upstream_timeout`) unless it is a
    /// stream, which has `stream_idle_timeout` between its bytes instead.
    pub(super) fn new(
        resp: reqwest::Response,
        deadline: tokio::time::Instant,
        heal: Option<super::heal::Tap>,
        obs: Observer,
    ) -> Observed {
        let timer = match obs.kind {
            Kind::Sse(_) => Timer::Idle(obs.sh.config.stream_idle_timeout),
            _ => Timer::Deadline,
        };
        let first = match timer {
            Timer::Idle(d) => tokio::time::Instant::now() + d,
            Timer::Deadline => deadline,
        };
        Observed {
            inner: Box::pin(resp.bytes_stream()),
            timer,
            expires: Box::pin(tokio::time::sleep_until(first)),
            ended: false,
            heal,
            metrics: obs.sh.metrics.clone(),
            obs: Some(obs),
        }
    }
}

impl Stream for Observed {
    type Item = std::io::Result<Bytes>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match self.inner.as_mut().poll_next(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if let Timer::Idle(d) = self.timer {
                    self.expires.as_mut().reset(tokio::time::Instant::now() + d);
                }
                if let Some(o) = &mut self.obs {
                    o.chunk(&chunk);
                }
                Poll::Ready(Some(Ok(chunk)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(std::io::Error::other(e)))),
            Poll::Ready(None) => {
                self.ended = true;
                if let Some(o) = self.obs.take() {
                    o.finish();
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                let this = &mut *self;
                if let (
                    Some(tap),
                    Some(Observer {
                        kind: Kind::Sse(r), ..
                    }),
                ) = (&mut this.heal, &this.obs)
                    && let Some(frame) = tap.poll_frame(cx, r.at_event_boundary())
                {
                    return Poll::Ready(Some(Ok(frame)));
                }
                if self.expires.as_mut().poll(cx).is_pending() {
                    return Poll::Pending;
                }
                self.ended = true;
                match self.timer {
                    // A stream quiet for too long ends like any stream: cleanly.
                    Timer::Idle(_) => Poll::Ready(None),
                    // A body cut short must not look complete: the error aborts the connection.
                    Timer::Deadline => {
                        self.metrics.rejected(Rejected::UpstreamTimeout);
                        Poll::Ready(Some(Err(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "the MCP server's answer did not end within upstream_timeout",
                        ))))
                    }
                }
            }
        }
    }
}

impl Drop for Observed {
    fn drop(&mut self) {
        if let Some(o) = self.obs.take() {
            o.finish();
        }
    }
}
