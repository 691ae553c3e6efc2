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

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{mpsc, oneshot};

use crate::probe::status::{MAX_RESPONSE_BYTES, StatusBoard};
use crate::telemetry::Telemetry;

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
    let Ok(body) = tokio::task::spawn_blocking(move || telemetry.render()).await else {
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
        body,
    )
        .into_response()
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
