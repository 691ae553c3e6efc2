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
//! `/metrics` renders the scrape off the async workers, then sends it family by family
//! ([`Telemetry::scrape`]): each family's buffer goes to the socket as it is and is freed once
//! written, so a scrape never holds the whole text twice, nor in one buffer. The response keeps
//! its exact `Content-Length`. The connection counts as serving (not evicted at the cap, its idle
//! clock run by bytes written) until the last chunk is sent or the body dropped (`serve`'s
//! `Turn`), as it did for a body in one piece.

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

use std::convert::Infallible;
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
use crate::telemetry::{Chunks, Telemetry};

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
    // health checks and the probe's own tasks are not held up by a scrape.
    let telemetry = s.telemetry.clone();
    let Ok(scrape) = tokio::task::spawn_blocking(move || telemetry.scrape()).await else {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "rendering metrics failed\n",
        )
            .into_response();
    };
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        Body::new(ScrapeBody(scrape)),
    )
        .into_response()
}

/// A scrape's chunks as a response body: each family's buffer becomes a frame as it is (a
/// `Bytes` over the same memory, no copy) and is freed once hyper has written it to the socket,
/// so a scrape in flight holds only the families not yet sent. Its exact size is known up
/// front, so the response keeps its `Content-Length` (HEAD included) rather than going chunked.
struct ScrapeBody(Chunks);

impl hyper::body::Body for ScrapeBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(
            self.0
                .next()
                .map(|chunk| Ok(Frame::data(Bytes::from(chunk)))),
        )
    }

    fn is_end_stream(&self) -> bool {
        self.0.bytes() == 0
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.0.bytes() as u64)
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
        let telemetry = Telemetry::new();
        let targets: Vec<_> = (0..150)
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

        // The probe's families byte for byte as a scrape renders them (the daemon's own values,
        // CPU and memory, move between two scrapes), and every family in the same order.
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
        assert_eq!(families(&body), families(&(probe + &daemon)));
        let types = body.lines().filter(|l| l.starts_with("# TYPE ")).count();
        assert_eq!(types, families(&body).len(), "one TYPE per family");
        assert!(body.ends_with('\n'));
        let parsed = exposition::samples::parse(&body);
        let up = parsed
            .iter()
            .filter(|s| s.name == "mcp_probe_connection_up" && s.value == 1.0)
            .count();
        assert_eq!(up, targets.len(), "every target's connection 1");

        let head = client.head(&url).send().await.unwrap();
        assert_eq!(head.status(), 200);
        assert!(head.headers().contains_key(header::CONTENT_LENGTH));
        assert!(head.text().await.unwrap().is_empty());

        stop.send(true).unwrap();
        server.await.unwrap();
    }
}
