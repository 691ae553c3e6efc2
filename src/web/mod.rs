//! The exporter's own HTTP surface: `/metrics`, the status page (`/`, `/status.json`), health,
//! readiness and reload.
//!
//! Routes only read snapshots (the app merges in the pages of the layers above, such as the
//! proxy's `/proxy`); they never reach into connection state. No route makes the
//! exporter connect anywhere: targets come from the configuration file only. The port itself,
//! with its connection cap and timeouts, is in [`serve`]; who may use it (TLS, basic
//! authentication, `--web.config.file`) in [`webconfig`] and [`auth`]. `POST /-/reload` changes
//! what the exporter does, so it is refused unless `--web.enable-lifecycle` is given, as in
//! Prometheus.
//!
//! `/metrics` renders the scrape off the async workers, in batches of families
//! ([`Scrape`]): each family's buffer goes to the socket as it is and is freed once written, and
//! the next batch is rendered only when the one before is all written, so a scrape holds one
//! batch (a few MiB), not the whole text. A scrape of one batch keeps its exact
//! `Content-Length`; a larger one is sent chunked. The connection counts as serving (not
//! evicted at the cap, its idle clock run by bytes written) until the last chunk is sent or the
//! body dropped (`serve`'s `Turn`), as it did for a body in one piece.

mod auth;
mod page;
mod serve;
mod throttle;
mod webconfig;

pub use page::escape;
pub use serve::{
    Closed, DEFAULT_HEADER_READ_TIMEOUT, DEFAULT_IDLE_TIMEOUT, DEFAULT_MAX_CONNECTIONS, Limits,
    WARN_EVERY, serve, serve_detached,
};
pub use webconfig::{ClientAuth, WebConfigError, WebConfigFile};

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::sync::{mpsc, oneshot};

use crate::probe::status::{MAX_RESPONSE_BYTES, StatusBoard};
#[cfg(doc)]
use crate::telemetry::SCRAPE_BATCH_BYTES;
use crate::telemetry::{Chunks, Scrape, Telemetry};

/// A reload request and where to send its outcome.
pub type ReloadRequest = oneshot::Sender<Result<(), String>>;

#[derive(Clone)]
pub struct WebState {
    pub telemetry: Arc<Telemetry>,
    pub reload: mpsc::Sender<ReloadRequest>,
    pub status: Arc<StatusBoard>,
    /// True once the first configuration is applied: the port is served from the start, so a
    /// slow first load is visible, but readiness waits for the targets.
    pub ready: Arc<AtomicBool>,
    /// `--web.enable-lifecycle`: whether `POST /-/reload` is served.
    pub lifecycle: bool,
    /// Most bytes of samples a `/metrics` batch holds ([`SCRAPE_BATCH_BYTES`]).
    pub scrape_batch_bytes: usize,
}

pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(status_page))
        .route("/status.json", get(status_json))
        .route("/metrics", get(metrics))
        .route("/-/healthy", get(|| async { "Healthy\n" }))
        .route("/-/ready", get(ready))
        .route("/-/reload", post(reload))
        .with_state(state)
}

async fn metrics(State(s): State<WebState>) -> Response {
    // Rendering a large fleet takes a while of CPU: off the async workers, so the status page,
    // health checks and the probe's own tasks are not held up by a scrape. The first batch is
    // rendered before the answer starts, so a failure is still a 500.
    let scrape = Scrape::new(s.telemetry.clone(), s.scrape_batch_bytes);
    let Ok((scrape, chunks)) = tokio::task::spawn_blocking(move || render_next(scrape)).await
    else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "rendering metrics failed\n",
        )
            .into_response();
    };
    let next = match scrape.batches_left() {
        0 => Next::Done,
        _ => Next::Waiting(scrape),
    };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        Body::new(ScrapeBody { chunks, next }),
    )
        .into_response()
}

/// Render a scrape's next batch (blocking: CPU on a large fleet).
fn render_next(mut scrape: Box<Scrape>) -> (Box<Scrape>, Chunks) {
    let chunks = scrape.next_batch().unwrap_or_default();
    (scrape, chunks)
}

/// A scrape as a response body, batch by batch: each family's buffer becomes a frame as it is
/// (a `Bytes` over the same memory, no copy) and is freed once hyper has written it to the
/// socket; the next batch is rendered (off the async workers) only when this one is all
/// written, so a scrape in flight holds one batch. A scrape of one batch keeps its exact
/// `Content-Length`; a longer one is sent chunked, as its size is not known until the end.
struct ScrapeBody {
    chunks: Chunks,
    next: Next,
}

/// What comes after the chunks in hand.
enum Next {
    Waiting(Box<Scrape>),
    Rendering(tokio::task::JoinHandle<(Box<Scrape>, Chunks)>),
    Done,
}

/// A batch could not be rendered: the response is cut off rather than ended as if whole.
#[derive(Debug)]
struct RenderFailed;

impl std::fmt::Display for RenderFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("rendering metrics failed")
    }
}

impl std::error::Error for RenderFailed {}

impl hyper::body::Body for ScrapeBody {
    type Data = Bytes;
    type Error = RenderFailed;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, RenderFailed>>> {
        let this = &mut *self;
        loop {
            if let Some(chunk) = this.chunks.next() {
                return Poll::Ready(Some(Ok(Frame::data(Bytes::from(chunk)))));
            }
            match std::mem::replace(&mut this.next, Next::Done) {
                Next::Done => return Poll::Ready(None),
                Next::Waiting(scrape) => {
                    this.next =
                        Next::Rendering(tokio::task::spawn_blocking(move || render_next(scrape)));
                }
                Next::Rendering(mut rendering) => match Pin::new(&mut rendering).poll(cx) {
                    Poll::Pending => {
                        this.next = Next::Rendering(rendering);
                        return Poll::Pending;
                    }
                    Poll::Ready(Ok((scrape, chunks))) => {
                        this.chunks = chunks;
                        if scrape.batches_left() > 0 {
                            this.next = Next::Waiting(scrape);
                        }
                    }
                    Poll::Ready(Err(_)) => return Poll::Ready(Some(Err(RenderFailed))),
                },
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.chunks.bytes() == 0 && matches!(self.next, Next::Done)
    }

    fn size_hint(&self) -> SizeHint {
        let bytes = self.chunks.bytes() as u64;
        match self.next {
            Next::Done => SizeHint::with_exact(bytes),
            _ => {
                let mut hint = SizeHint::new();
                hint.set_lower(bytes);
                hint
            }
        }
    }
}

async fn ready(State(s): State<WebState>) -> Response {
    if s.ready.load(Ordering::Relaxed) {
        "Ready\n".into_response()
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "Not ready: loading the configuration\n",
        )
            .into_response()
    }
}

async fn reload(State(s): State<WebState>) -> Response {
    if !s.lifecycle {
        return (StatusCode::FORBIDDEN, "Lifecycle API is not enabled.\n").into_response();
    }
    let (tx, rx) = oneshot::channel();
    if s.reload.send(tx).await.is_err() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response();
    }
    match rx.await {
        Ok(Ok(())) => (StatusCode::OK, "config reloaded\n").into_response(),
        Ok(Err(e)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to reload config: {e}\n"),
        )
            .into_response(),
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "shutting down\n").into_response(),
    }
}

async fn status_page(State(s): State<WebState>) -> Html<String> {
    Html(page::render(&s.status.snapshot()))
}

async fn status_json(State(s): State<WebState>) -> Response {
    let body = s.status.snapshot().to_json(MAX_RESPONSE_BYTES);
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `/metrics` over HTTP through the exporter's own server: the scrape sent chunk by chunk
    /// is the whole exposition, with its length and type, and HEAD gets the headers alone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_over_http_is_the_whole_exposition() {
        metrics_over_http(crate::telemetry::SCRAPE_BATCH_BYTES).await;
    }

    /// A batch far smaller than the exposition: from the second scrape on (the first has no
    /// sizes to split by) `/metrics` is rendered and sent in many batches, chunked, and is still
    /// the whole exposition, each family once and in order.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn metrics_over_http_in_batches_is_the_whole_exposition() {
        metrics_over_http(64 << 10).await;
    }

    async fn metrics_over_http(scrape_batch_bytes: usize) {
        let telemetry = Telemetry::new();
        let targets: Vec<_> = (0..250)
            .map(|i| {
                let t = telemetry.add_target(&format!("t{i:03}"), 2, &[]);
                t.connection(1).set_up(true);
                t
            })
            .collect();
        let (reload, _reloads) = mpsc::channel(1);
        let app = router(WebState {
            telemetry: telemetry.clone(),
            reload,
            status: Arc::new(StatusBoard::default()),
            ready: Arc::new(AtomicBool::new(true)),
            lifecycle: false,
            scrape_batch_bytes,
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/metrics", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let server = tokio::spawn(serve(
            listener,
            app,
            Limits::default(),
            None,
            telemetry.clone(),
            stopped,
        ));

        let client = reqwest::Client::new();
        let got = client.get(&url).send().await.unwrap();
        assert_eq!(got.status(), 200);
        assert_eq!(
            got.headers()[header::CONTENT_TYPE],
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let length = got.headers()[header::CONTENT_LENGTH].to_str().unwrap();
        let length: usize = length.parse().unwrap();
        let body = got.text().await.unwrap();
        assert_eq!(body.len(), length);
        assert!(body.len() > 1_000_000, "several writes: {}", body.len());

        check_exposition(&telemetry, &body, targets.len());

        // From the second scrape on, the last one's sizes split it into batches.
        let batched = scrape_batch_bytes < body.len();
        let got = client.get(&url).send().await.unwrap();
        assert_eq!(got.status(), 200);
        assert_eq!(
            got.headers().contains_key(header::CONTENT_LENGTH),
            !batched,
            "a scrape of one batch keeps its Content-Length; a batched one is chunked"
        );
        let again = got.text().await.unwrap();
        check_exposition(&telemetry, &again, targets.len());

        let head = client.head(&url).send().await.unwrap();
        assert_eq!(head.status(), 200);
        assert_eq!(
            head.headers().contains_key(header::CONTENT_LENGTH),
            !batched
        );
        assert!(head.text().await.unwrap().is_empty());

        stop.send(true).unwrap();
        server.await.unwrap();
    }

    /// `body` is the whole exposition: the probe's families byte for byte as a scrape renders
    /// them (the daemon's own values, CPU and memory, move between two scrapes), every family
    /// once and in the same order, and every target's connection 1 up.
    fn check_exposition(telemetry: &Telemetry, body: &str, targets: usize) {
        let mut again: Vec<String> = telemetry.scrape().collect();
        let daemon = again.pop().expect("the daemon's families");
        let probe = again.concat();
        assert!(body.starts_with(&probe), "the probe's families first");
        let families = |text: &str| -> Vec<String> {
            text.lines()
                .filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next())
                .map(str::to_string)
                .collect()
        };
        assert_eq!(families(body), families(&(probe + &daemon)));
        let types = body.lines().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(types, families(body).len(), "one TYPE per family");
        assert!(body.ends_with('\n'));
        let parsed = exposition::samples::parse(body);
        let up = parsed
            .iter()
            .filter(|s| s.name == "mcp_probe_connection_up" && s.value == 1.0)
            .count();
        assert_eq!(up, targets, "every target's connection 1");
    }
}
