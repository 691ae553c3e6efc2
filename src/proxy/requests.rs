//! The request side of an exchange's accounting: who sent it and what it asked, and what the
//! upstream's status settles (sessions begun, ended or unknown; each request counted; a
//! `tools/call`, `prompts/get` or `resources/read` handed to the stale-call judge; the other
//! lists' listings tracked per list, see [`super::list_track`]).
//!
//! It exists apart from [`super::forward`] because flattening settles the exchanges it answers
//! itself (see [`super::flatten`]) through the same `settle`, and because what a request means
//! for its session is a job of its own, separate from carrying the bytes; what the answer means
//! is [`super::answers`]'s.

use std::sync::Arc;
use std::time::Instant;

use axum::http::{Method, header};
use serde_json::Value;

use super::Shared;
use super::exchange::{Exchange, MAX_SESSION_ID_BYTES, stream_key_of};
use super::labels::Client;
use super::observe::{Asked, Pending, client_name, method_label};
use super::sessions::StreamPending;
use crate::proxy::metrics::Rejected;
use mcp_client::mcp::jsonrpc::Incoming;

/// Calls judged at once (each holds its arguments while the catalog may walk); past this a
/// call is not judged rather than queued.
pub(super) const MAX_JUDGING: usize = 256;

impl Shared {
    /// Who sent the exchange, and its JSON-RPC (accounted once the upstream's status is known).
    pub(super) fn exchange(
        &self,
        parts: &axum::http::request::Parts,
        session_id: Option<&str>,
        messages: &[Incoming],
        started: Instant,
    ) -> Exchange {
        let headers = &parts.headers;
        let mut requests = Vec::new();
        let mut notifications = Vec::new();
        let mut reported: Option<String> = None;
        let mut modern = false;
        let version = headers
            .get("mcp-protocol-version")
            .and_then(|v| v.to_str().ok());
        for m in messages {
            match m {
                Incoming::Request { id, method, params } => {
                    if reported.is_none() {
                        reported = client_name(method, params.as_ref()).map(str::to_string);
                    }
                    modern |= super::observe::modern(version, params.as_ref());
                    requests.push(Pending {
                        id: id.clone(),
                        method: method_label(method),
                        asked: Asked::of(method, params.as_ref()),
                    });
                }
                Incoming::Notification { method, .. } => notifications.push(method_label(method)),
                Incoming::Response { .. } => {}
            }
        }
        if let crate::config::ClientLabel::Header(h) = &self.config.client_label {
            reported = headers
                .get(h.as_str())
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
        }
        // An HTTP+SSE POST names its session in the message URL's query, not in a header.
        let stream = match session_id {
            None if !self.paths.is_mcp(parts.uri.path()) => stream_key_of(parts.uri.query()),
            _ => None,
        };
        let tracked = session_id.or(stream.as_deref()).and_then(|id| {
            let mut t = self.sessions.lock().expect("sessions lock");
            let s = t.get_mut(id)?;
            if stream.is_some() {
                // Its answers come on the session's GET stream, and may come before the POST's
                // own `202`: they are awaited from before the request leaves.
                for r in &requests {
                    s.await_on_stream(StreamPending::of(r, started));
                }
            }
            Some(s.client.clone())
        });
        let client = match (tracked, reported) {
            (Some(c), _) => {
                c.touch(started);
                c
            }
            (None, name) => self.labels.get_at(name.as_deref(), started),
        };
        let key = match session_id {
            None if stream.is_some() => stream,
            Some(id) if id.len() <= MAX_SESSION_ID_BYTES => Some(id.to_string()),
            // A longer id (the spec's are a UUID or a hash) is forwarded, not tracked: what a
            // session costs here stays bounded whatever a client sends.
            Some(_) => None,
            // No session (modern era, or a request before `initialize` answered): one identity
            // per reported name and credentials.
            None if requests.iter().any(|r| r.asked != Asked::Initialize) => {
                let auth = headers
                    .get(header::AUTHORIZATION)
                    .map(|v| super::observe::cursor_digest(&String::from_utf8_lossy(v.as_bytes())))
                    .unwrap_or(0);
                Some(format!("client:{}:{auth:016x}", client.label))
            }
            None => None,
        };
        Exchange {
            client,
            key,
            modern,
            requests,
            notifications,
            started,
        }
    }

    /// Account the exchange now that the upstream answered with `status`: sessions begin,
    /// end, or turn out unknown, and each request is counted.
    pub(super) fn settle(
        &self,
        method: &Method,
        session_id: Option<&str>,
        new_session: Option<String>,
        status: reqwest::StatusCode,
        mut ex: Exchange,
    ) -> Exchange {
        let now = Instant::now();
        let mut table = self.sessions.lock().expect("sessions lock");
        if let (Some(id), true) = (&new_session, session_id.is_none())
            && status.is_success()
        {
            table.touch(id, &ex.client, now).upstream = true;
            ex.key = Some(id.clone());
        }
        if let Some(id) = session_id {
            if status == reqwest::StatusCode::NOT_FOUND {
                if !table.end(id, crate::proxy::metrics::Ended::Expired) {
                    self.metrics.rejected(Rejected::UnknownSession);
                }
                ex.key = None;
            } else if *method == Method::DELETE && status.is_success() {
                table.end(id, crate::proxy::metrics::Ended::Deleted);
                ex.key = None;
            }
        }
        for n in &ex.notifications {
            ex.client.series.request(n);
        }
        // A 2026-07-28 server answers a JSON-RPC error (an unknown prompt, tool or resource:
        // -32602) with HTTP 400: the request was made and answered, so it is accounted (and
        // judged) like one answered 200.
        let answered =
            status.is_success() || (ex.modern && status == reqwest::StatusCode::BAD_REQUEST);
        let key = match (&ex.key, answered) {
            (Some(k), true) => k.clone(),
            _ => {
                for r in &ex.requests {
                    ex.client.series.request(r.method);
                }
                self.wake_if_dropped(&table);
                return ex;
            }
        };
        let session = table.touch(&key, &ex.client, now);
        for r in &ex.requests {
            ex.client.series.request(r.method);
            match &r.asked {
                Asked::ToolsList { cursor } => {
                    session.lists = session.lists.saturating_add(1);
                    ex.client.series.tools_list(cursor.is_some());
                    match cursor {
                        Some(c) => {
                            let digest = super::observe::cursor_digest(c);
                            if let Some((d, issued)) = session.cursor
                                && d == digest
                            {
                                // Its walk goes on (a cursor it was not sent ends it below).
                                session.cursor = None;
                                session.cursors_followed =
                                    session.cursors_followed.saturating_add(1);
                                ex.client
                                    .series
                                    .event(crate::proxy::metrics::ClientEvent::CursorFollowed);
                                self.metrics.cursor_age(now.duration_since(issued));
                            } else {
                                session.walk = None;
                            }
                        }
                        None => {
                            session.walk = Some(0);
                            session.cursor_abandoned();
                            if let Some(t) = session.relist_due.take() {
                                self.metrics.relist_lag(now.duration_since(t));
                            }
                        }
                    }
                }
                Asked::ToolsCall { tool, arguments } => {
                    session.tool_calls = session.tool_calls.saturating_add(1);
                    session.cursor_abandoned();
                    session.relist_missed();
                    if session.listing_expired(now, self.config.ttl_grace) {
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::ExpiredListingCall);
                    }
                    if session.lists == 0 && !session.reconnect_without_list {
                        session.reconnect_without_list = true;
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::NoRelistAfterReconnect);
                    }
                    self.judge_later(
                        key.clone(),
                        ex.client.clone(),
                        tool.clone(),
                        arguments.clone(),
                        ex.started,
                    );
                }
                Asked::List { list, cursor } => {
                    let digest = cursor.as_deref().map(super::observe::cursor_digest);
                    if let Some(lag) = session.other_lists.listing(*list, digest, now, &ex.client) {
                        self.metrics.list_relist_lag(*list, lag);
                    }
                }
                Asked::Use { list, key: item } => {
                    session.other_lists.used(*list, &ex.client);
                    if let Some(item) = item {
                        self.judge_use_later(
                            key.clone(),
                            ex.client.clone(),
                            *list,
                            item.clone(),
                            ex.started,
                        );
                    }
                }
                Asked::Initialize | Asked::Other => {}
            }
        }
        self.wake_if_dropped(&table);
        ex
    }

    /// Decide off the request path whether a `prompts/get` or `resources/read` of `item` is
    /// stale (the catalog may walk first), within the same permits as tool calls.
    fn judge_use_later(
        self: &Shared,
        session: String,
        client: Arc<Client>,
        list: mcp_client::listing::list::List,
        item: String,
        at: Instant,
    ) {
        self.off_path(move |me| async move {
            let stale = me
                .catalog
                .judge_list(list, &item, at, std::time::Duration::from_secs(5))
                .await;
            if stale != Some(true) {
                return;
            }
            client
                .series
                .list_event(crate::proxy::metrics::ListEvent::StaleCall, list);
            if let Some(s) = me.sessions.lock().expect("sessions lock").get_mut(&session) {
                s.other_lists.stale(list);
            }
        });
    }

    /// Run a judgement off the request path, within the judging permits: none free (a flood of
    /// calls), and the call goes unjudged rather than queued.
    fn off_path<F, Fut>(self: &Shared, judge: F)
    where
        F: FnOnce(Arc<Shared>) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let Some(me) = self.me.upgrade() else {
            return;
        };
        let Ok(permit) = self.judging.clone().try_acquire_owned() else {
            return;
        };
        tokio::spawn(async move {
            let _permit = permit;
            judge(me).await;
        });
    }

    /// Have the sweeper end at the upstream the sessions this exchange made the table drop.
    fn wake_if_dropped(&self, table: &super::sessions::Table) {
        if table.has_to_close() {
            self.dropped.notify_one();
        }
    }

    /// Decide off the request path whether a call is stale (the catalog may walk first).
    fn judge_later(
        self: &Shared,
        key: String,
        client: Arc<Client>,
        tool: String,
        arguments: Value,
        at: Instant,
    ) {
        self.off_path(move |me| async move {
            use super::upstream_tools::Verdict;
            let verdict = me
                .catalog
                .judge(&tool, &arguments, at, std::time::Duration::from_secs(5))
                .await;
            if matches!(verdict, Verdict::Fine | Verdict::Unknown) {
                return;
            }
            let label = me.catalog.tool_label(&tool);
            let mut table = me.sessions.lock().expect("sessions lock");
            let session = table.get_mut(&key);
            match verdict {
                Verdict::StaleTool => {
                    client.series.stale_tool(&label);
                    if let Some(s) = session {
                        s.stale_tool_calls = s.stale_tool_calls.saturating_add(1);
                    }
                }
                _ => {
                    client.series.stale_schema(&label);
                    if let Some(s) = session {
                        s.stale_schema_calls = s.stale_schema_calls.saturating_add(1);
                    }
                }
            }
        });
    }
}
