//! Interop with a server nobody here wrote: the official Rust SDK `rmcp`, serving streamable HTTP
//! in both eras with a paginated `tools/list` (opaque keyset cursors):
//!
//! - legacy (pinned to 2025-11-25): sessions, page size 4, `notifications/tools/list_changed`
//!   sent through rmcp's own `Peer` API on the GET stream;
//! - modern (2026-07-28, rmcp's default): stateless requests, page size 8, listings with `ttlMs`
//!   and `cacheScope`, and the notification sent through the `SubscriptionSink` of a
//!   `subscriptions/listen` request.
//!
//! The registry changes at runtime; the exporter must follow cursors to see every tool and must
//! refresh its cache on the notification (not on some other trigger), with the audit finding no
//! drift and no unannounced change afterwards; a change rmcp never announces must show as drift.

mod common;

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use common::{Harness, Scrape, target};
use rmcp::model::{
    CacheScope, Implementation, JsonObject, ListToolsResult, PaginatedRequestParams,
    ProtocolVersion, ServerCapabilities, ServerConfig, SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::transport::streamable_http_server::{
    StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};

/// The `ttlMs` the modern registry promises for its listings.
const TTL_MS: u64 = 60_000;
const CURSOR_PREFIX: &str = "rmcp-interop.v1.";
const T: (&str, &str) = ("target", "rmcp");
const C: (&str, &str) = ("connection", "0");

/// State shared by every session (legacy) or request (modern) the rmcp service creates (the
/// factory clones the handler).
#[derive(Clone, Default)]
struct Registry {
    /// Serve 2026-07-28 (and every earlier version, rmcp's default) instead of 2025-11-25 at most.
    modern: bool,
    page_size: usize,
    tools: Arc<Mutex<BTreeMap<String, Tool>>>,
    /// Legacy: the peers of initialized sessions.
    peers: Arc<Mutex<Vec<Peer<RoleServer>>>>,
    /// Modern: the sinks of open `subscriptions/listen` requests.
    sinks: Arc<Mutex<Vec<SubscriptionSink>>>,
    /// `tools/list` requests that carried a cursor this server issued.
    cursor_requests: Arc<AtomicU64>,
    /// `tools/list` requests whose cursor this server never issued.
    bad_cursors: Arc<AtomicU64>,
}

fn tool(name: &str, description: &str) -> Tool {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), serde_json::json!("object"));
    schema.insert(
        "properties".into(),
        serde_json::json!({ "q": { "type": "string" } }),
    );
    Tool::new(name.to_string(), description.to_string(), Arc::new(schema))
}

/// Opaque keyset cursor: the hex of the last name served.
fn encode_cursor(after: &str) -> String {
    let hex: String = after.bytes().map(|b| format!("{b:02x}")).collect();
    format!("{CURSOR_PREFIX}{hex}")
}

fn decode_cursor(cursor: &str) -> Option<String> {
    let hex = cursor.strip_prefix(CURSOR_PREFIX)?;
    if hex.is_empty() || hex.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    String::from_utf8(bytes).ok()
}

impl Registry {
    fn with_tools(n: usize, page_size: usize, modern: bool) -> Self {
        let r = Registry {
            modern,
            page_size,
            ..Registry::default()
        };
        {
            let mut tools = r.tools.lock().unwrap();
            for i in 0..n {
                let name = format!("tool_{i:02}");
                tools.insert(name.clone(), tool(&name, &format!("initial tool {i}")));
            }
        }
        r
    }

    fn add(&self, name: &str) {
        let t = tool(name, &format!("added at runtime: {name}"));
        self.tools.lock().unwrap().insert(name.to_string(), t);
    }

    fn remove(&self, name: &str) {
        assert!(self.tools.lock().unwrap().remove(name).is_some(), "{name}");
    }

    fn len(&self) -> usize {
        self.tools.lock().unwrap().len()
    }

    /// Pages of a complete walk of the current list.
    fn pages(&self) -> usize {
        self.len().div_ceil(self.page_size).max(1)
    }

    /// Send `notifications/tools/list_changed` through rmcp to every client that can hear it.
    async fn announce(&self) {
        if self.modern {
            self.announce_on_listen_streams().await
        } else {
            self.announce_to_sessions().await
        }
    }

    /// Modern: on every open `subscriptions/listen` stream. Sinks of subscriptions that have
    /// since ended fail and are dropped; at least one must succeed.
    async fn announce_on_listen_streams(&self) {
        let sinks: Vec<SubscriptionSink> = self.sinks.lock().unwrap().clone();
        let mut live = Vec::new();
        for sink in sinks {
            if sink.notify_tool_list_changed().await.is_ok() {
                live.push(sink);
            }
        }
        assert!(
            !live.is_empty(),
            "no open rmcp subscription accepted list_changed"
        );
        *self.sinks.lock().unwrap() = live;
    }

    /// Legacy: to every connected peer. Peers of sessions that have since ended fail and are
    /// dropped; at least one must succeed.
    async fn announce_to_sessions(&self) {
        let peers: Vec<Peer<RoleServer>> = self.peers.lock().unwrap().clone();
        let mut live = Vec::new();
        for peer in peers {
            if peer.notify_tool_list_changed().await.is_ok() {
                live.push(peer);
            }
        }
        assert!(
            !live.is_empty(),
            "no connected rmcp peer accepted list_changed"
        );
        *self.peers.lock().unwrap() = live;
    }
}

impl ServerHandler for Registry {
    fn get_info(&self) -> ServerConfig {
        let config = ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("rmcp-interop", "1.0.0"));
        if self.modern {
            config
        } else {
            config.with_protocol_version(ProtocolVersion::V_2025_11_25)
        }
    }

    /// Legacy: 2025-11-25 at most, so the exporter's `auto` falls back to a session. Modern:
    /// rmcp's own list, 2026-07-28 included.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        if self.modern {
            Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
        } else {
            Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        }
    }

    /// Modern: tool list changes are offered on `subscriptions/listen` (rmcp intersects this
    /// with the request and the declared capabilities before it acknowledges).
    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.modern
            .then(|| requested.supported_by(&self.get_info().capabilities))
    }

    /// Keep the subscription's sink for [`Registry::announce`] until the client cancels it.
    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.sinks.lock().unwrap().push(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        self.peers.lock().unwrap().push(context.peer.clone());
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let after = match request.and_then(|r| r.cursor) {
            None => None,
            Some(c) => match decode_cursor(&c) {
                Some(name) => {
                    self.cursor_requests.fetch_add(1, Ordering::SeqCst);
                    Some(name)
                }
                None => {
                    self.bad_cursors.fetch_add(1, Ordering::SeqCst);
                    return Err(ErrorData::invalid_params("unknown cursor", None));
                }
            },
        };
        let tools = self.tools.lock().unwrap();
        let mut rest: Vec<&Tool> = match &after {
            None => tools.values().collect(),
            Some(a) => tools
                .range::<String, _>((
                    std::ops::Bound::Excluded(a.clone()),
                    std::ops::Bound::Unbounded,
                ))
                .map(|(_, t)| t)
                .collect(),
        };
        let more = rest.len() > self.page_size;
        rest.truncate(self.page_size);
        let next_cursor = more.then(|| encode_cursor(&rest.last().expect("a full page").name));
        let page: Vec<Tool> = rest.into_iter().cloned().collect();
        let result = ListToolsResult {
            next_cursor,
            ..ListToolsResult::with_all_items(page)
        };
        Ok(if self.modern {
            result
                .with_ttl_ms(TTL_MS)
                .with_cache_scope(CacheScope::Public)
        } else {
            result
        })
    }
}

/// Serve `registry` over rmcp's streamable HTTP (stateful sessions) on an ephemeral port.
async fn serve(registry: Registry) -> url::Url {
    let service = StreamableHttpService::new(
        move || Ok(registry.clone()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default().with_legacy_session_mode(true),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(listener, router).await.unwrap();
    });
    url::Url::parse(&format!("http://{addr}/mcp")).unwrap()
}

/// A series of connection 0 of the rmcp target; a counter reads 0 while absent (many are
/// written from their first event), a gauge must exist.
fn v(s: &Scrape, name: &str, extra: &[(&str, &str)]) -> f64 {
    let mut labels = vec![T, C];
    labels.extend_from_slice(extra);
    s.value(name, &labels)
}

/// Assert one series of connection 0 of the rmcp target, with the scrape in the message.
fn expect(s: &Scrape, name: &str, extra: &[(&str, &str)], want: f64) {
    assert_eq!(v(s, name, extra), want, "{name} {extra:?}\n{}", s.text);
}

fn drift(s: &Scrape, kind: &str) -> f64 {
    v(s, "mcp_probe_cache_drift_tools", &[("kind", kind)])
}

fn tools(s: &Scrape, view: &str) -> f64 {
    v(s, "mcp_probe_tools", &[("view", view)])
}

fn fingerprint(s: &Scrape, view: &str) -> f64 {
    v(s, "mcp_probe_tools_list_fingerprint", &[("view", view)])
}

fn walks(s: &Scrape, trigger: &str) -> f64 {
    v(
        s,
        "mcp_probe_tools_list_walks_total",
        &[("trigger", trigger)],
    )
}

fn refreshes(s: &Scrape, trigger: &str) -> f64 {
    v(
        s,
        "mcp_probe_cache_refreshes_total",
        &[("trigger", trigger)],
    )
}

/// Change the registry, announce it through rmcp, and wait for the exporter to re-walk on the
/// notification until its cache holds exactly the new list.
async fn change_and_wait(h: &Harness, registry: &Registry, what: &str, change: impl FnOnce()) {
    let before = h.scrape();
    let notified_walks = walks(&before, "notification");
    let notification_refreshes = refreshes(&before, "notification");
    let notifications = v(&before, "mcp_probe_list_changed_notifications_total", &[]);
    let old_fp = fingerprint(&before, "cache");

    change();
    let want = registry.len() as f64;
    registry.announce().await;

    let s = h
        .until(what, |s| {
            tools(s, "cache") == want
                && tools(s, "server") == want
                && walks(s, "notification") > notified_walks
                && refreshes(s, "notification") > notification_refreshes
                && fingerprint(s, "cache") == fingerprint(s, "server")
                && fingerprint(s, "cache") != old_fp
        })
        .await;
    assert!(
        v(&s, "mcp_probe_list_changed_notifications_total", &[]) > notifications,
        "{what}: the list_changed notification was not counted\n{}",
        s.text
    );
    assert_eq!(
        v(&s, "mcp_probe_tools_list_pages", &[]),
        registry.pages() as f64,
        "{what}\n{}",
        s.text
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_streamable_http_server_pagination_and_list_changed() {
    let registry = Registry::with_tools(11, 4, false);
    let url = serve(registry.clone()).await;

    let mut h = Harness::new();
    h.apply(vec![target("rmcp", url)]);

    // Initial walk: 11 tools over 3 pages (4 + 4 + 3), only reachable by following nextCursor.
    let s = h
        .until("initial walk against rmcp", |s| {
            v(s, "mcp_probe_tools_list_pages", &[]) == 3.0
                && tools(s, "server") == 11.0
                && tools(s, "cache") == 11.0
                && v(s, "mcp_probe_notification_stream_up", &[]) == 1.0
                && v(s, "mcp_probe_list_changed_capable", &[]) == 1.0
                && s.v("mcp_probe_up", &[T]) == 1.0
        })
        .await;
    assert_eq!(walks(&s, "initial"), 1.0, "{}", s.text);
    assert_eq!(
        fingerprint(&s, "cache"),
        fingerprint(&s, "server"),
        "{}",
        s.text
    );
    assert!(
        registry.cursor_requests.load(Ordering::SeqCst) >= 2,
        "the exporter never sent back the cursors rmcp issued"
    );
    assert!(
        !registry.peers.lock().unwrap().is_empty(),
        "rmcp never saw notifications/initialized"
    );

    // Change 1: two tools added, one removed (11 + 2 - 1 = 12, still 3 pages).
    change_and_wait(
        &h,
        &registry,
        "cache refreshed by list_changed after add 2 / remove 1",
        || {
            registry.add("tool_new_a");
            registry.add("tool_new_b");
            registry.remove("tool_03");
        },
    )
    .await;

    // Change 2: one more removal (12 - 1 = 11).
    change_and_wait(
        &h,
        &registry,
        "cache refreshed by list_changed after remove 1",
        || registry.remove("tool_new_a"),
    )
    .await;

    // Audits after the last change find the cache in step with the server.
    let checks = v(&h.scrape(), "mcp_probe_cache_consistency_checks_total", &[]);
    let s = h
        .until("two consistency checks after the last change", |s| {
            v(s, "mcp_probe_cache_consistency_checks_total", &[]) >= checks + 2.0
        })
        .await;
    for kind in ["missing", "extra", "changed"] {
        assert_eq!(drift(&s, kind), 0.0, "drift {kind}\n{}", s.text);
    }
    assert_eq!(tools(&s, "server"), 11.0, "{}", s.text);
    assert_eq!(tools(&s, "cache"), 11.0, "{}", s.text);
    assert_eq!(
        fingerprint(&s, "cache"),
        fingerprint(&s, "server"),
        "{}",
        s.text
    );
    expect(&s, "mcp_probe_unannounced_changes_total", &[], 0.0);
    expect(&s, "mcp_probe_tools_list_cursor_errors_total", &[], 0.0);
    expect(&s, "mcp_probe_tools_list_repeated_cursors_total", &[], 0.0);
    assert!(
        v(&s, "mcp_probe_tools_list_pages", &[]) >= 3.0,
        "{}",
        s.text
    );
    assert!(
        v(&s, "mcp_probe_list_changed_notifications_total", &[]) >= 2.0,
        "{}",
        s.text
    );
    assert!(walks(&s, "notification") >= 2.0, "{}", s.text);
    assert!(refreshes(&s, "notification") >= 2.0, "{}", s.text);
    // One session, one unbroken stream: every refresh after the first came from list_changed.
    expect(&s, "mcp_probe_sessions_started_total", &[], 1.0);
    assert_eq!(walks(&s, "reconnect"), 0.0, "{}", s.text);
    assert_eq!(walks(&s, "stream_gap"), 0.0, "{}", s.text);
    expect(
        &s,
        "mcp_probe_session_info",
        &[("era", "legacy"), ("protocol_version", "2025-11-25")],
        1.0,
    );
    assert_eq!(registry.bad_cursors.load(Ordering::SeqCst), 0);
}

/// rmcp in its default, modern era: `auto` detects 2026-07-28, walks two pages of 8, holds a
/// `subscriptions/listen` stream rmcp acknowledged, and reads the listing's freshness promise. A
/// change announced on that stream is followed; a change rmcp never announces is drift, an
/// unannounced change, and (the listing promised 60 s) a broken TTL promise.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcp_modern_server_listen_stream_pagination_and_ttl() {
    let registry = Registry::with_tools(14, 8, true);
    let url = serve(registry.clone()).await;

    let mut h = Harness::new();
    h.apply(vec![target("rmcp", url)]);

    let s = h
        .until(
            "modern session, initial walk and listen stream against rmcp",
            |s| {
                v(
                    s,
                    "mcp_probe_session_info",
                    &[("era", "modern"), ("protocol_version", "2026-07-28")],
                ) == 1.0
                    && v(s, "mcp_probe_tools_list_pages", &[]) == 2.0
                    && tools(s, "server") == 14.0
                    && tools(s, "cache") == 14.0
                    && v(s, "mcp_probe_notification_stream_up", &[]) == 1.0
                    && v(s, "mcp_probe_list_changed_capable", &[]) == 1.0
                    && s.v("mcp_probe_up", &[T]) == 1.0
            },
        )
        .await;
    assert_eq!(walks(&s, "initial"), 1.0, "{}", s.text);
    expect(&s, "mcp_probe_tools_list_ttl_seconds", &[], 60.0);
    expect(&s, "mcp_probe_tools_list_cache_public", &[], 1.0);
    assert!(
        registry.cursor_requests.load(Ordering::SeqCst) >= 1,
        "the exporter never sent back the cursor rmcp issued"
    );
    // The probe itself opens no legacy session; at most one comes from the legacy-path check
    // (what a 2025-era client of the same URL would hear).
    assert!(
        registry.peers.lock().unwrap().len() <= 1,
        "the probe opened legacy sessions"
    );
    assert!(
        !registry.sinks.lock().unwrap().is_empty(),
        "rmcp never established a subscription"
    );

    // An announced swap: one tool in, one out (still 14, two pages).
    change_and_wait(
        &h,
        &registry,
        "cache refreshed by list_changed on the listen stream after a swap",
        || {
            registry.add("tool_new_a");
            registry.remove("tool_03");
        },
    )
    .await;
    let checks = v(&h.scrape(), "mcp_probe_cache_consistency_checks_total", &[]);
    let s = h
        .until("two consistency checks after the announced swap", |s| {
            v(s, "mcp_probe_cache_consistency_checks_total", &[]) >= checks + 2.0
        })
        .await;
    for kind in ["missing", "extra", "changed"] {
        assert_eq!(drift(&s, kind), 0.0, "drift {kind}\n{}", s.text);
    }
    expect(&s, "mcp_probe_unannounced_changes_total", &[], 0.0);
    expect(&s, "mcp_probe_ttl_violations_total", &[], 0.0);
    let notifications = v(&s, "mcp_probe_list_changed_notifications_total", &[]);

    // An unannounced swap: rmcp's list changes, nobody tells the subscription.
    registry.add("tool_new_b");
    registry.remove("tool_04");
    let s = h
        .until("the audit finds the unannounced swap", |s| {
            drift(s, "extra") == 1.0
                && drift(s, "missing") == 1.0
                && v(s, "mcp_probe_unannounced_changes_total", &[]) >= 1.0
        })
        .await;
    assert!(
        v(&s, "mcp_probe_ttl_violations_total", &[]) >= 1.0,
        "the swap broke the 60 s promise of the previous listing\n{}",
        s.text
    );
    assert_eq!(drift(&s, "changed"), 0.0, "{}", s.text);
    assert_eq!(
        v(&s, "mcp_probe_list_changed_notifications_total", &[]),
        notifications,
        "{}",
        s.text
    );
    assert_eq!(registry.bad_cursors.load(Ordering::SeqCst), 0);
}
