//! The series of one reverse proxy (`mcp_proxy_*`), written at scrape time like the probe's.
//!
//! Same cells and exposition writer as a target: an atomic per series, label text escaped once.
//! Series keyed by `proxy` alone (and a closed `reason` set) exist from the proxy's start at 0, so
//! an alert on their increase sees the first event; per-client series appear with their client
//! (the `client` label is bounded by the proxy's `max_clients`, see `crate::proxy::labels`), and
//! per-tool series with their first stale call (the `tool` label is bounded by the proxy's
//! catalog). Dropping a proxy's `ProxyMetrics` is what removes its series.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use crate::telemetry::families as m;
use crate::telemetry::{Group, Series, Telemetry};
use exposition::{self as expo, Exposition, Value};
use exposition::{Cell, Histogram, Lazy};
use m::slot;
use mcp_client::listing::list::List;

/// Why a tracked client session ended: the `reason` of `mcp_proxy_sessions_ended_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ended {
    /// The client sent DELETE.
    Deleted,
    /// The upstream ended it (404 on a request carrying its id).
    Expired,
    /// No request within `session_idle_timeout`.
    Idle,
    /// Dropped from tracking at `max_sessions` (the idlest goes first).
    Evicted,
}

impl Ended {
    pub const ALL: [Ended; 4] = [Ended::Deleted, Ended::Expired, Ended::Idle, Ended::Evicted];

    pub fn as_str(self) -> &'static str {
        match self {
            Ended::Deleted => "deleted",
            Ended::Expired => "expired",
            Ended::Idle => "idle",
            Ended::Evicted => "evicted",
        }
    }
}

/// Why the proxy answered a request itself: `mcp_proxy_rejected_requests_total{reason}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejected {
    /// The body is not JSON-RPC: answered -32700 without asking the upstream.
    InvalidJson,
    /// The body is over `max_request_bytes`: answered 413.
    BodyTooLarge,
    /// A session id the proxy does not track, which the upstream then refused (404).
    UnknownSession,
    /// A new session admitted at `max_sessions`: the idlest tracked session was dropped from
    /// tracking (the request itself is forwarded).
    SessionLimit,
    /// The upstream could not be reached: answered 502.
    UpstreamUnavailable,
    /// A path other than the proxy's MCP path (and the paths it serves with it): answered 404
    /// without asking the upstream.
    UnknownPath,
    /// The upstream did not answer within `upstream_timeout` (504), or a JSON answer's body did
    /// not end within it (the answer is cut).
    UpstreamTimeout,
    /// The upstream answered with something that is not a readable HTTP answer (a header
    /// section too large, not HTTP, the connection closed mid-answer): answered 502.
    UpstreamInvalidResponse,
}

impl Rejected {
    pub const ALL: [Rejected; 8] = [
        Rejected::InvalidJson,
        Rejected::BodyTooLarge,
        Rejected::UnknownSession,
        Rejected::SessionLimit,
        Rejected::UpstreamUnavailable,
        Rejected::UnknownPath,
        Rejected::UpstreamTimeout,
        Rejected::UpstreamInvalidResponse,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Rejected::InvalidJson => "invalid_json",
            Rejected::BodyTooLarge => "body_too_large",
            Rejected::UnknownSession => "unknown_session",
            Rejected::SessionLimit => "session_limit",
            Rejected::UpstreamUnavailable => "upstream_unavailable",
            Rejected::UnknownPath => "unknown_path",
            Rejected::UpstreamTimeout => "upstream_timeout",
            Rejected::UpstreamInvalidResponse => "upstream_invalid_response",
        }
    }
}

/// What a client did that the proxy counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientEvent {
    SessionStarted,
    CursorIssued,
    CursorFollowed,
    FirstPageOnly,
    CursorError,
    ListChangedForwarded,
    /// No re-list after a forwarded list_changed.
    NoRelistAfterListChanged,
    /// A session's first tools/call came before any tools/list.
    NoRelistAfterReconnect,
    /// A 2026-07-28 client's tools/call with a listing past its `ttlMs` (and `ttl_grace`).
    ExpiredListingCall,
}

const EVENTS: usize = 9;

/// What a client did with one of the other lists (prompts, resources, resource templates): the
/// `mcp_proxy_*` families with a `list` label, counted per client and list from the first event
/// (a client that never uses these lists costs no line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListEvent {
    /// `prompts/get` or `resources/read` of an item the upstream no longer produces.
    StaleCall,
    /// A `nextCursor` of the list not followed.
    FirstPageOnly,
    /// A `list_changed` of a list the session had listed, and no re-list of it.
    WithoutRelist,
}

impl ListEvent {
    fn family(self) -> &'static str {
        match self {
            ListEvent::StaleCall => m::PROXY_STALE_LIST_CALLS,
            ListEvent::FirstPageOnly => m::PROXY_LIST_FIRST_PAGE_ONLY,
            ListEvent::WithoutRelist => m::PROXY_LIST_WITHOUT_RELIST,
        }
    }
}

/// Per-tool counters of one client (stale calls), bounded by the caller's tool labels.
type ToolCounts = Mutex<BTreeMap<Box<str>, u64>>;

/// The series of one `client` label value.
pub struct ClientSeries {
    /// `proxy="…",client="…"`.
    labels: String,
    sessions: AtomicI64,
    events: [Cell; EVENTS],
    /// tools/list by cursor: [false, true].
    lists: [Cell; 2],
    requests: Lazy<&'static str, Cell>,
    stale_tool: ToolCounts,
    stale_schema: ToolCounts,
    unknown_tool: ToolCounts,
    /// success, failure: only for clients named in `flatten_pages`.
    flattened: Option<[Cell; 2]>,
    /// Healing: notifications sent, calls refused (rendered only for a proxy with `heal`).
    heal: [Cell; 2],
    /// Per list (not tools), from the first event: at most 3 events × 3 lists.
    other_lists: Lazy<(ListEvent, List), Cell>,
}

impl ClientSeries {
    pub fn event(&self, e: ClientEvent) {
        self.events[e as usize].add(1);
    }

    /// One more (or one fewer, `-1`) session tracked for this client.
    pub fn sessions(&self, delta: i64) {
        self.sessions.fetch_add(delta, Ordering::Relaxed);
    }

    /// Sessions tracked for this client now.
    pub fn tracked_sessions(&self) -> i64 {
        self.sessions.load(Ordering::Relaxed)
    }

    pub fn request(&self, method: &'static str) {
        self.requests.with(method, |c| c.add(1));
    }

    pub fn tools_list(&self, with_cursor: bool) {
        self.lists[usize::from(with_cursor)].add(1);
    }

    pub fn stale_tool(&self, tool: &str) {
        bump(&self.stale_tool, tool);
    }

    pub fn stale_schema(&self, tool: &str) {
        bump(&self.stale_schema, tool);
    }

    /// The upstream answered a call of `tool` (a bounded label) that it has no such tool.
    pub fn unknown_tool_answer(&self, tool: &str) {
        bump(&self.unknown_tool, tool);
    }

    /// Healing sent this client's session a `list_changed` of the proxy's own.
    pub fn heal_notification(&self) {
        self.heal[0].add(1);
    }

    /// Healing answered this client's call of a removed tool itself.
    pub fn heal_refused(&self) {
        self.heal[1].add(1);
    }

    /// One more `event` for `list` (never [`List::Tools`], whose series are their own).
    pub fn list_event(&self, event: ListEvent, list: List) {
        self.other_lists.with((event, list), |c| c.add(1));
    }

    pub fn flattened(&self, ok: bool) {
        if let Some(f) = &self.flattened {
            f[usize::from(!ok)].add(1);
        }
    }
}

/// Most `tool` values one client's per-tool counters (stale calls, unknown-tool answers) keep: the catalog bounds the names it hands
/// out at any time, but names churn over days, and a counter's series must not grow with them.
/// Past it, a new name counts under `other`.
const MAX_TOOLS_PER_CLIENT: usize = 500;

fn bump(counts: &ToolCounts, tool: &str) {
    let mut c = counts.lock().expect("metrics lock poisoned");
    let tool = if c.contains_key(tool) || c.len() < MAX_TOOLS_PER_CLIENT {
        tool
    } else {
        "other"
    };
    let n = c.entry(tool.into()).or_insert(0);
    *n = n.saturating_add(1);
}

/// The series of one proxy.
pub struct ProxyMetrics {
    name: String,
    /// `proxy="…"`.
    labels: String,
    upstream_up: Cell,
    upstream_tools: Cell,
    ended: [Cell; Ended::ALL.len()],
    rejected: [Cell; Rejected::ALL.len()],
    durations: Lazy<&'static str, Histogram>,
    cursor_age: Histogram,
    relist_lag: Histogram,
    /// Re-list lag of the other lists, by list, from the first re-list timed: one histogram per
    /// list and proxy, not per client (a histogram is 13 lines).
    list_relist_lag: Lazy<List, Histogram>,
    /// Items of the other lists in the catalog's last complete walk (lists the upstream declares).
    upstream_lists: RwLock<Vec<(List, usize)>>,
    clients: RwLock<Vec<Arc<ClientSeries>>>,
    /// The proxy heals (`heal: true`): its clients' heal series are rendered.
    heal: AtomicBool,
}

impl ProxyMetrics {
    pub(super) fn new(name: &str) -> Self {
        ProxyMetrics {
            name: name.to_string(),
            labels: expo::labels([("proxy", name)]),
            upstream_up: Cell::default(),
            upstream_tools: Cell::absent(),
            ended: Default::default(),
            rejected: Default::default(),
            durations: Lazy::default(),
            cursor_age: Histogram::default(),
            relist_lag: Histogram::default(),
            list_relist_lag: Lazy::default(),
            upstream_lists: RwLock::new(Vec::new()),
            clients: RwLock::new(Vec::new()),
            heal: AtomicBool::new(false),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the proxy heals: the heal series of its clients exist (at 0 until counted).
    pub fn set_heal(&self, on: bool) {
        self.heal.store(on, Ordering::Relaxed);
    }

    /// The series of a client label value (already bounded by the caller); `flatten`: whether
    /// its listings are flattened (its `flattened` series exist from the start).
    pub fn client(&self, label: &str, flatten: bool) -> Arc<ClientSeries> {
        if let Some(c) = self.find(label) {
            return c;
        }
        let mut clients = self.clients.write().expect("metrics lock poisoned");
        let labels = expo::labels([("proxy", self.name.as_str()), ("client", label)]);
        if let Some(c) = clients.iter().find(|c| c.labels == labels) {
            return c.clone();
        }
        let c = Arc::new(ClientSeries {
            labels,
            sessions: AtomicI64::new(0),
            events: Default::default(),
            lists: Default::default(),
            requests: Lazy::default(),
            stale_tool: Mutex::default(),
            stale_schema: Mutex::default(),
            unknown_tool: Mutex::default(),
            flattened: flatten.then(Default::default),
            heal: Default::default(),
            other_lists: Lazy::default(),
        });
        clients.push(c.clone());
        c
    }

    /// Stop rendering a client's series (its label was freed, see `crate::proxy::labels`).
    pub fn remove_client(&self, series: &Arc<ClientSeries>) {
        self.clients
            .write()
            .expect("metrics lock poisoned")
            .retain(|c| !Arc::ptr_eq(c, series));
    }

    fn find(&self, label: &str) -> Option<Arc<ClientSeries>> {
        let labels = expo::labels([("proxy", self.name.as_str()), ("client", label)]);
        self.clients
            .read()
            .expect("metrics lock poisoned")
            .iter()
            .find(|c| c.labels == labels)
            .cloned()
    }

    pub fn upstream(&self, up: bool, tools: Option<usize>) {
        self.upstream_up.set_flag(up);
        if let Some(n) = tools {
            self.upstream_tools.set(n as f64);
        }
    }

    /// The catalog's other lists after a complete walk (a list no longer declared disappears).
    pub fn upstream_lists(&self, counts: Vec<(List, usize)>) {
        *self.upstream_lists.write().expect("metrics lock poisoned") = counts;
    }

    /// A session re-listed `list` (not tools) this long after its `list_changed`.
    pub fn list_relist_lag(&self, list: List, d: Duration) {
        self.list_relist_lag
            .with(list, |h| h.record(d.as_secs_f64()));
    }

    pub fn ended(&self, why: Ended) {
        self.ended[why as usize].add(1);
    }

    pub fn rejected(&self, why: Rejected) {
        self.rejected[why as usize].add(1);
    }

    pub fn duration(&self, method: &'static str, d: Duration) {
        self.durations.with(method, |h| h.record(d.as_secs_f64()));
    }

    pub fn cursor_age(&self, d: Duration) {
        self.cursor_age.record(d.as_secs_f64());
    }

    pub fn relist_lag(&self, d: Duration) {
        self.relist_lag.record(d.as_secs_f64());
    }

    fn write(&self, out: &mut Exposition<'_>) {
        let l = self.labels.as_str();
        out.sample(
            slot(m::PROXY_UPSTREAM_UP),
            l,
            &[],
            Value::of_gauge(&self.upstream_up),
        );
        if let Some(v) = Value::of(exposition::Kind::Gauge, self.upstream_tools.raw()) {
            out.sample(slot(m::PROXY_UPSTREAM_TOOLS), l, &[], v);
        }
        for (why, c) in Ended::ALL.iter().zip(&self.ended) {
            let extra = [("reason", why.as_str())];
            out.sample(
                slot(m::PROXY_SESSIONS_ENDED),
                l,
                &extra,
                Value::Count(c.raw()),
            );
        }
        for (why, c) in Rejected::ALL.iter().zip(&self.rejected) {
            let extra = [("reason", why.as_str())];
            out.sample(slot(m::PROXY_REJECTED), l, &extra, Value::Count(c.raw()));
        }
        self.durations.each(|method, h| {
            out.histogram(
                slot(m::PROXY_REQUEST_DURATION),
                l,
                &[("method", method)],
                &h.snapshot(),
            );
        });
        out.histogram(
            slot(m::PROXY_CURSOR_AGE),
            l,
            &[],
            &self.cursor_age.snapshot(),
        );
        out.histogram(
            slot(m::PROXY_RELIST_LAG),
            l,
            &[],
            &self.relist_lag.snapshot(),
        );
        self.list_relist_lag.each(|list, h| {
            out.histogram(
                slot(m::PROXY_LIST_RELIST_LAG),
                l,
                &[("list", list.as_str())],
                &h.snapshot(),
            );
        });
        for (list, n) in self
            .upstream_lists
            .read()
            .expect("metrics lock poisoned")
            .iter()
        {
            out.sample(
                slot(m::PROXY_UPSTREAM_LIST_ITEMS),
                l,
                &[("list", list.as_str())],
                Value::Float(*n as f64),
            );
        }
        let clients = self.clients.read().expect("metrics lock poisoned").clone();
        let heal = self.heal.load(Ordering::Relaxed);
        for c in clients {
            render_client(&c, heal, out);
        }
    }
}

fn render_client(c: &ClientSeries, heal: bool, out: &mut Exposition<'_>) {
    let l = c.labels.as_str();
    let sessions = c.sessions.load(Ordering::Relaxed).max(0) as f64;
    out.sample(slot(m::PROXY_SESSIONS), l, &[], Value::Float(sessions));
    let count = |i: ClientEvent| Value::Count(c.events[i as usize].raw());
    for (family, event) in [
        (m::PROXY_SESSIONS_STARTED, ClientEvent::SessionStarted),
        (m::PROXY_CURSORS_ISSUED, ClientEvent::CursorIssued),
        (m::PROXY_CURSORS_FOLLOWED, ClientEvent::CursorFollowed),
        (m::PROXY_FIRST_PAGE_ONLY, ClientEvent::FirstPageOnly),
        (m::PROXY_CURSOR_ERRORS, ClientEvent::CursorError),
        (
            m::PROXY_LIST_CHANGED_FORWARDED,
            ClientEvent::ListChangedForwarded,
        ),
        (
            m::PROXY_EXPIRED_LISTING_CALLS,
            ClientEvent::ExpiredListingCall,
        ),
    ] {
        out.sample(slot(family), l, &[], count(event));
    }
    for (after, event) in [
        ("list_changed", ClientEvent::NoRelistAfterListChanged),
        ("reconnect", ClientEvent::NoRelistAfterReconnect),
    ] {
        out.sample(
            slot(m::PROXY_WITHOUT_RELIST),
            l,
            &[("after", after)],
            count(event),
        );
    }
    for (cursor, cell) in ["false", "true"].iter().zip(&c.lists) {
        let extra = [("cursor", *cursor)];
        out.sample(
            slot(m::PROXY_TOOLS_LIST_REQUESTS),
            l,
            &extra,
            Value::Count(cell.raw()),
        );
    }
    c.requests.each(|method, cell| {
        out.sample(
            slot(m::PROXY_REQUESTS),
            l,
            &[("method", method)],
            Value::Count(cell.raw()),
        );
    });
    for (family, counts) in [
        (m::PROXY_STALE_TOOL_CALLS, &c.stale_tool),
        (m::PROXY_STALE_SCHEMA_CALLS, &c.stale_schema),
        (m::PROXY_UNKNOWN_TOOL_ANSWERS, &c.unknown_tool),
    ] {
        for (tool, n) in counts.lock().expect("metrics lock poisoned").iter() {
            out.sample(slot(family), l, &[("tool", tool)], Value::Count(*n));
        }
    }
    c.other_lists.each(|(event, list), cell| {
        out.sample(
            slot(event.family()),
            l,
            &[("list", list.as_str())],
            Value::Count(cell.raw()),
        );
    });
    if heal {
        for (family, cell) in [m::PROXY_HEAL_NOTIFICATIONS, m::PROXY_HEAL_REFUSED]
            .iter()
            .zip(&c.heal)
        {
            out.sample(slot(family), l, &[], Value::Count(cell.raw()));
        }
    }
    if let Some(f) = &c.flattened {
        for (result, cell) in ["success", "failure"].iter().zip(f) {
            let extra = [("result", *result)];
            out.sample(
                slot(m::PROXY_FLATTENED),
                l,
                &extra,
                Value::Count(cell.raw()),
            );
        }
    }
}

impl Series for ProxyMetrics {
    fn render(&self, out: &mut Exposition<'_>) {
        self.write(out);
    }
}

impl Telemetry {
    /// Series for a proxy; replaces any earlier series of the same name.
    pub fn add_proxy(&self, name: &str) -> Arc<ProxyMetrics> {
        let p = Arc::new(ProxyMetrics::new(name));
        self.insert(Group::Proxies, name, p.clone() as Arc<dyn Series>);
        p
    }

    /// Drop a proxy's series (when `current` is still the registered one: a restarted proxy's
    /// new series are not removed by its old instance).
    pub fn remove_proxy(&self, current: &Arc<ProxyMetrics>) {
        let name = current.name().to_string();
        let current: Arc<dyn Series> = current.clone();
        self.remove(Group::Proxies, &name, Some(&current));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxy_series_start_at_zero_and_clients_appear_with_their_events() {
        let p = ProxyMetrics::new("kb");
        let mut e = Exposition::new(&m::CATALOG);
        p.write(&mut e);
        let text = e.finish();
        assert!(
            text.contains(
                "mcp_proxy_rejected_requests_total{proxy=\"kb\",reason=\"invalid_json\"} 0"
            )
        );
        assert!(text.contains("mcp_proxy_sessions_ended_total{proxy=\"kb\",reason=\"evicted\"} 0"));
        assert!(!text.contains("client="), "{text}");
        let c = p.client("claude \"x\"", true);
        c.stale_tool("search_legacy");
        c.unknown_tool_answer("search_legacy");
        c.sessions(1);
        c.event(ClientEvent::FirstPageOnly);
        let mut e = Exposition::new(&m::CATALOG);
        p.write(&mut e);
        let text = e.finish();
        assert!(text.contains(
            "mcp_proxy_stale_tool_calls_total{proxy=\"kb\",client=\"claude \\\"x\\\"\",tool=\"search_legacy\"} 1"
        ), "{text}");
        assert!(text.contains(
            "mcp_proxy_first_page_only_sessions_total{proxy=\"kb\",client=\"claude \\\"x\\\"\"} 1"
        ));
        assert!(text.contains(
            "mcp_proxy_unknown_tool_answers_total{proxy=\"kb\",client=\"claude \\\"x\\\"\",tool=\"search_legacy\"} 1"
        ), "{text}");
        assert!(text.contains("mcp_proxy_flattened_listings_total{proxy=\"kb\",client=\"claude \\\"x\\\"\",result=\"failure\"} 0"));
        assert!(Arc::ptr_eq(&c, &p.client("claude \"x\"", true)));
        assert!(
            !text.contains("mcp_proxy_heal_"),
            "heal off: no heal series"
        );
        p.set_heal(true);
        c.heal_refused();
        let mut e = Exposition::new(&m::CATALOG);
        p.write(&mut e);
        let text = e.finish();
        assert!(
            text.contains(
                "mcp_proxy_heal_refused_calls_total{proxy=\"kb\",client=\"claude \\\"x\\\"\"} 1"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "mcp_proxy_heal_notifications_total{proxy=\"kb\",client=\"claude \\\"x\\\"\"} 0"
            ),
            "{text}"
        );
    }
}
