//! `/proxy` and `/proxy.json` on the exporter's port: the reverse proxies' per-session detail
//! (what labels must not carry: which session of which client listed, followed its cursor,
//! called stale tools). The proxy serves its own pages ([`routes`]), merged into the exporter's
//! router by the app, so the web layer below knows nothing of proxies.
//!
//! Rows are bounded by the proxy's own snapshot ([`super::status::MAX_ROWS`] per proxy); every
//! piece of client or server text is escaped.

use std::fmt::Write;

use std::sync::Arc;

use axum::Router;
use axum::extract::State;
use axum::http::header;
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;

use super::Proxies;
use crate::web::escape;

/// The routes of `/proxy` and `/proxy.json`.
pub fn routes(proxies: Arc<Proxies>) -> Router {
    Router::new()
        .route("/proxy", get(html))
        .route("/proxy.json", get(json))
        .with_state(proxies)
}

async fn json(State(proxies): State<Arc<Proxies>>) -> Response {
    let body = serde_json::to_string(&proxies.status()).unwrap_or_else(|_| "[]".into());
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// A session's other lists in one cell: `prompts: 1 stale, first page only; resources: ok`.
fn other_lists(rows: &[super::status::ListRow]) -> String {
    if rows.is_empty() {
        return "none".into();
    }
    let cell: Vec<String> = rows
        .iter()
        .map(|r| {
            let mut what = Vec::new();
            if r.stale_calls > 0 {
                what.push(format!(
                    "<span class=\"bad\">{} stale</span>",
                    r.stale_calls
                ));
            }
            if r.first_page_only {
                what.push("<span class=\"bad\">first page only</span>".to_string());
            }
            if what.is_empty() {
                what.push("ok".into());
            }
            format!("{}: {}", r.list, what.join(", "))
        })
        .collect();
    cell.join("; ")
}

async fn html(State(proxies): State<Arc<Proxies>>) -> Html<String> {
    let mut h = String::from(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>mcp_exporter proxies</title>\
         <style>body{font-family:system-ui,sans-serif;margin:1.5em}table{border-collapse:collapse}\
         td,th{border:1px solid #ccc;padding:.2em .45em}.bad{color:#b00020;font-weight:600}</style>\
         </head><body><h1>Proxies</h1>",
    );
    let proxies = proxies.status();
    if proxies.is_empty() {
        h.push_str("<p>No proxy is configured (<code>proxies:</code>).</p>");
    }
    let yes = |b: bool, bad: bool| match (b, bad) {
        (true, true) => "<span class=\"bad\">yes</span>",
        (true, false) => "yes",
        _ => "no",
    };
    for p in proxies {
        let _ = write!(
            h,
            "<h2>{}</h2><p>listening on <code>{}</code>, upstream <code>{}</code>, {} in its catalog, {} sessions tracked (showing {})</p>",
            escape(&p.name),
            escape(&p.listen),
            escape(&p.upstream),
            p.upstream_tools.map_or("no".to_string(), |n| n.to_string())
                + " tools"
                + &p.upstream_lists
                    .iter()
                    .map(|(l, n)| format!(", {n} {}", l.replace('_', " ")))
                    .collect::<String>(),
            p.sessions_tracked,
            p.sessions.len()
        );
        if let Some(why) = &p.catalog_failure {
            let _ = write!(
                h,
                "<p class=\"bad\">catalog session down: {}</p>",
                escape(why)
            );
        }
        h.push_str("<table><tr><th>client</th><th>age</th><th>idle</th><th>tools/list</th><th>pages</th><th>cursor outstanding</th><th>followed</th><th>first page only</th><th>cursor errors</th><th>calls</th><th>stale tool</th><th>stale schema</th><th>unknown-tool answers</th><th>last list_changed</th><th>re-list due</th><th>called before listing</th><th>other lists</th></tr>");
        for r in &p.sessions {
            let _ = write!(
                h,
                "<tr><td>{}</td><td>{}s</td><td>{}s</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&r.client),
                r.age_seconds,
                r.idle_seconds,
                r.tools_list_requests,
                r.pages_seen,
                yes(r.cursor_outstanding, false),
                r.cursors_followed,
                yes(r.first_page_only, true),
                r.cursor_errors,
                r.tool_calls,
                r.stale_tool_calls,
                r.stale_schema_calls,
                r.unknown_tool_answers,
                r.last_list_changed_seconds
                    .map_or("never".to_string(), |s| format!("{s}s ago")),
                yes(r.relist_due, true),
                yes(r.reconnect_without_list, true),
                other_lists(&r.lists),
            );
        }
        h.push_str("</table>");
    }
    h.push_str("</body></html>");
    Html(h)
}
