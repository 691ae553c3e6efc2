//! The answer side of an exchange's accounting: each message the upstream sends back (in a JSON
//! body, an SSE answer, or an HTTP+SSE session's GET stream), read with the request it answers:
//! its duration, a `tools/list` page's cursor and walk (and what the catalog learns from it), an
//! upstream's "no such tool", a `list_changed`; the other lists' pages and notifications, per
//! list.
//!
//! It exists apart from [`super::requests`] because it runs as the body passes (called by
//! [`super::relay`]'s observer), long after the request was settled, and on streams whose
//! messages answer requests of other exchanges.

use std::time::Instant;

use serde_json::Value;

use super::Shared;
use super::exchange::Exchange;
use super::observe::Asked;
use mcp_client::listing::list::List;
use mcp_client::mcp::jsonrpc::{self, Incoming};

impl Shared {
    /// A message on an HTTP+SSE session's GET stream: an answer to a request POSTed before (read
    /// with that request), or a notification, each accounted to the session's client.
    pub(super) fn on_stream_message(&self, key: &str, message: Incoming) {
        let (client, pending) = {
            let mut table = self.sessions.lock().expect("sessions lock");
            let Some(s) = table.get_mut(key) else {
                return;
            };
            let pending = match &message {
                Incoming::Response { id, .. } => s.answered_on_stream(id),
                _ => None,
            };
            (s.client.clone(), pending)
        };
        let (requests, started) = match pending {
            Some(p) => (vec![p.pending], p.started),
            None => (Vec::new(), Instant::now()),
        };
        let ex = Exchange {
            client,
            key: Some(key.to_string()),
            modern: false,
            requests,
            notifications: Vec::new(),
            started,
        };
        self.on_answer(&ex, message);
    }

    /// A message from the upstream in the exchange's answer.
    pub(super) fn on_answer(&self, ex: &Exchange, message: Incoming) {
        let now = Instant::now();
        match message {
            Incoming::Response { id, outcome } => {
                let Some(r) = ex.requests.iter().find(|r| r.id == id) else {
                    return;
                };
                self.metrics
                    .duration(r.method, now.duration_since(ex.started));
                match &r.asked {
                    Asked::ToolsList { cursor } => {
                        self.on_listing(ex, cursor.is_some(), outcome, now)
                    }
                    Asked::List { list, .. } => self.on_other_listing(ex, *list, &outcome, now),
                    Asked::ToolsCall { tool, .. }
                        if super::unknown_tool::says_unknown(tool, &outcome) =>
                    {
                        let label = self.catalog.tool_label(tool);
                        ex.client.series.unknown_tool_answer(&label);
                        let mut table = self.sessions.lock().expect("sessions lock");
                        if let Some(s) = ex.key.as_deref().and_then(|k| table.get_mut(k)) {
                            s.unknown_tool_answers = s.unknown_tool_answers.saturating_add(1);
                        }
                    }
                    _ => {}
                }
            }
            Incoming::Notification { method, .. }
                if method != "notifications/tools/list_changed"
                    && !List::announced_by(&method).is_empty() =>
            {
                // Prompts or resources: the catalog walks them too; sessions that listed them
                // owe a re-list.
                self.catalog.refresh_soon();
                let mut table = self.sessions.lock().expect("sessions lock");
                if let Some(s) = ex.key.as_deref().and_then(|k| table.get_mut(k)) {
                    s.other_lists.list_changed(List::announced_by(&method), now);
                }
            }
            Incoming::Notification { method, .. }
                if method == "notifications/tools/list_changed" =>
            {
                self.catalog.refresh_soon();
                ex.client
                    .series
                    .event(crate::proxy::metrics::ClientEvent::ListChangedForwarded);
                let mut table = self.sessions.lock().expect("sessions lock");
                if let Some(s) = ex.key.as_deref().and_then(|k| table.get_mut(k)) {
                    s.last_list_changed = Some(now);
                    s.relist_due.get_or_insert(now);
                }
            }
            _ => {}
        }
    }
}

impl Shared {
    /// A page of another list (prompts, resources, resource templates) on its way to the client:
    /// the session's cursor for that list, and a page holding an item the catalog does not
    /// list asks the catalog for a walk (as a tool listing does).
    fn on_other_listing(
        &self,
        ex: &Exchange,
        list: List,
        outcome: &Result<Value, jsonrpc::RpcError>,
        now: Instant,
    ) {
        let Ok(result) = outcome else {
            return;
        };
        let next = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(super::observe::cursor_digest);
        {
            let mut table = self.sessions.lock().expect("sessions lock");
            if let Some(s) = ex.key.as_deref().and_then(|k| table.get_mut(k)) {
                s.other_lists.page(list, next, now);
            }
        }
        if let Some(items) = result.get(list.result_key()).and_then(Value::as_array) {
            self.catalog.saw_list_page(list, items, ex.started);
        }
    }

    /// A `tools/list` page (or its error) on its way to the client: the session's cursor and
    /// walk are accounted, and the catalog learns from a page or a complete walk that differs
    /// from it (see [`super::upstream_tools`]).
    fn on_listing(
        &self,
        ex: &Exchange,
        with_cursor: bool,
        outcome: Result<Value, jsonrpc::RpcError>,
        now: Instant,
    ) {
        let walked = {
            let mut table = self.sessions.lock().expect("sessions lock");
            let s = ex.key.as_deref().and_then(|k| table.get_mut(k));
            match (&outcome, s) {
                (Ok(result), Some(s)) => {
                    s.pages = s.pages.saturating_add(1);
                    // Missing or negative is 0 (SEP-2549); legacy listings have no ttl.
                    let ttl_ms = ex.modern.then(|| {
                        result
                            .get("ttlMs")
                            .and_then(Value::as_f64)
                            .map_or(0, |ms| ms.max(0.0) as i64)
                    });
                    s.listed(!with_cursor, ttl_ms, now);
                    let next = result.get("nextCursor").and_then(Value::as_str);
                    if let Some(next) = next {
                        s.cursor = Some((super::observe::cursor_digest(next), now));
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::CursorIssued);
                    }
                    let listed = result
                        .get("tools")
                        .and_then(Value::as_array)
                        .map_or(0, Vec::len);
                    s.walk = s
                        .walk
                        .map(|n| n.saturating_add(u16::try_from(listed).unwrap_or(u16::MAX)));
                    if self.config.heal {
                        s.heal.answer(!with_cursor, result);
                    }
                    if next.is_none() { s.walk.take() } else { None }
                }
                (Err(_), Some(s)) => {
                    s.walk = None;
                    if with_cursor {
                        s.cursor_errors = s.cursor_errors.saturating_add(1);
                        ex.client
                            .series
                            .event(crate::proxy::metrics::ClientEvent::CursorError);
                    }
                    None
                }
                (_, None) => None,
            }
        };
        let Ok(result) = outcome else {
            return;
        };
        // Comparing the page with the catalog fingerprints each of its tools: off the answer's
        // way (the client's page is held until it is observed), within the judging permits (past
        // them a page teaches nothing rather than queue). Calls judged meanwhile wait for it.
        let asked = ex.started;
        if !self.catalog.older_than(asked) {
            return;
        }
        let (Some(me), Ok(permit)) = (self.me.upgrade(), self.judging.clone().try_acquire_owned())
        else {
            return;
        };
        let comparing = self.catalog.comparing();
        tokio::spawn(async move {
            let _held = (permit, comparing);
            if let Some(tools) = result.get("tools").and_then(Value::as_array)
                && !me.catalog.saw_page(tools, asked)
                && let Some(n) = walked
            {
                me.catalog.saw_walk(usize::from(n), asked);
            }
        });
    }
}
