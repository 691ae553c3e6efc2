//! The exporter's own HTTP surface: `/metrics`, the landing page, health, readiness and reload.
//!
//! Routes only read snapshots; they never reach into connection state. No route makes the
//! exporter connect anywhere: targets come from the configuration file only.

use std::sync::{Arc, RwLock};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::{mpsc, oneshot};

use crate::telemetry::Telemetry;

/// What the landing page shows of a target (URL already redacted).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetSummary {
    pub name: String,
    pub url: String,
    pub connections: u16,
}

/// A reload request and where to send its outcome.
pub type ReloadRequest = oneshot::Sender<Result<(), String>>;

#[derive(Clone)]
pub struct WebState {
    pub telemetry: Arc<Telemetry>,
    pub reload: mpsc::Sender<ReloadRequest>,
    pub targets: Arc<RwLock<Vec<TargetSummary>>>,
}

pub fn router(state: WebState) -> Router {
    Router::new()
        .route("/", get(landing))
        .route("/metrics", get(metrics))
        .route("/-/healthy", get(|| async { "Healthy\n" }))
        .route("/-/ready", get(|| async { "Ready\n" }))
        .route("/-/reload", post(reload))
        .with_state(state)
}

async fn metrics(State(s): State<WebState>) -> Response {
    let body = s.telemetry.render();
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

async fn reload(State(s): State<WebState>) -> Response {
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

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

async fn landing(State(s): State<WebState>) -> Html<String> {
    let targets = s.targets.read().expect("targets lock").clone();
    let mut rows = String::new();
    for t in &targets {
        rows.push_str(&format!(
            "<tr><td>{}</td><td><code>{}</code></td><td>{}</td></tr>\n",
            escape(&t.name),
            escape(&t.url),
            t.connections
        ));
    }
    Html(format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>MCP Exporter</title></head><body>\n\
         <h1>MCP Exporter</h1>\n<p>Version {}. <a href=\"/metrics\">Metrics</a></p>\n\
         <h2>Targets</h2>\n<table border=\"1\" cellpadding=\"4\"><tr><th>Target</th><th>URL</th><th>Connections</th></tr>\n{rows}</table>\n\
         </body></html>\n",
        env!("CARGO_PKG_VERSION")
    ))
}
