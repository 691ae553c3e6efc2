//! Every metric the exporter emits: name, type, labels and help text, declared once.
//!
//! Code records through the handles in `probe::metrics::ConnMetrics`; the text renderer takes HELP and
//! TYPE from here; `docs/metrics.md` and the dashboard/alert tests check against this list.

use exposition::{Catalog, MetricDef, Slot};

exposition::metric_families! {
    UP = "mcp_probe_up", Gauge, ["target"],
        "1 when at least one connection of the target has a working session whose last liveness check passed.";
    READY = "mcp_probe_ready", Gauge, ["target"],
        "1 when a connection is up, its last tools/list walk completed, and every functional probe of the target passed its last run.";
    CONNECTION_UP = "mcp_probe_connection_up", Gauge, ["target", "connection"],
        "1 when this connection has a working session whose last liveness check passed.";
    SESSION_INFO = "mcp_probe_session_info", Gauge, ["target", "connection", "era", "protocol_version", "server_name", "server_version"],
        "Always 1 while a session is open; labels describe the negotiated session.";
    SESSIONS_STARTED = "mcp_probe_sessions_started_total", Counter, ["target", "connection"],
        "Sessions opened successfully (initialize + initialized).";
    SESSION_FAILURES = "mcp_probe_session_failures_total", Counter, ["target", "reason"],
        "Attempts to open a session that failed, by reason, over all connections of the target.";
    AUTH_FAILURES = "mcp_probe_auth_failures_total", Counter, ["target", "reason"],
        "Requests whose authentication failed, by the step that failed (unauthorized, forbidden, insufficient_scope, discovery, token_endpoint, credentials, untrusted_authorization_server, untrusted_metadata_origin). Only for targets with credentials (an auth block or a client certificate).";
    SESSION_EXPIRIES = "mcp_probe_session_expiries_total", Counter, ["target", "connection"],
        "Sessions the server ended (HTTP 404 on a request carrying the session id).";
    REQUESTS = "mcp_probe_requests_total", Counter, ["target", "connection", "method"],
        "JSON-RPC requests and notifications sent, by method.";
    REQUEST_FAILURES = "mcp_probe_request_failures_total", Counter, ["target", "connection", "method", "reason"],
        "JSON-RPC requests that failed, by method and reason.";
    REQUEST_DURATION = "mcp_probe_request_duration_seconds", Histogram, ["target", "method"],
        "Time from sending a request to its complete response, by method, over all connections of the target.";
    PING_DURATION = "mcp_probe_ping_duration_seconds", Histogram, ["target"],
        "Round trip of successful liveness checks (ping in the legacy era, server/discover in the modern era), over all connections of the target.";
    PING_FAILURES = "mcp_probe_ping_failures_total", Counter, ["target", "connection"],
        "Liveness checks that failed or timed out.";
    LIST_CHANGED_CAPABLE = "mcp_probe_list_changed_capable", Gauge, ["target", "connection"],
        "1 when the server declares capabilities.tools.listChanged in this session.";
    STREAM_UP = "mcp_probe_notification_stream_up", Gauge, ["target", "connection"],
        "1 while the notification stream is open and carries tool list changes (the legacy GET stream, or a modern subscriptions/listen stream whose acknowledgement honours toolsListChanged).";
    STREAM_RECONNECTS = "mcp_probe_notification_stream_reconnects_total", Counter, ["target", "connection"],
        "Times the notification stream ended or broke and was opened again.";
    LIST_CHANGED = "mcp_probe_list_changed_notifications_total", Counter, ["target", "connection"],
        "notifications/tools/list_changed received, on any stream.";
    TOOLS_LIST_REQUESTS = "mcp_probe_tools_list_requests_total", Counter, ["target", "connection"],
        "tools/list requests sent (one per page), by walks of every trigger.";
    WALKS = "mcp_probe_tools_list_walks_total", Counter, ["target", "connection", "trigger"],
        "Full tools/list walks started, by trigger (initial, notification, reconnect, stream_gap, audit).";
    WALK_FAILURES = "mcp_probe_tools_list_walk_failures_total", Counter, ["target", "connection", "trigger", "reason"],
        "Walks that did not complete, by trigger and reason.";
    WALK_DURATION = "mcp_probe_tools_list_walk_duration_seconds", Histogram, ["target"],
        "Duration of complete walks, all pages, over all connections of the target.";
    PAGES = "mcp_probe_tools_list_pages", Gauge, ["target", "connection"],
        "Pages in the last complete walk.";
    TOOLS = "mcp_probe_tools", Gauge, ["target", "connection", "view"],
        "Tools by view: server (last complete walk) and cache (what a correct client holds).";
    CURSOR_ERRORS = "mcp_probe_tools_list_cursor_errors_total", Counter, ["target", "connection"],
        "Errors on tools/list requests that carried a cursor.";
    LOOP_CAP_HITS = "mcp_probe_tools_list_loop_cap_hits_total", Counter, ["target", "connection"],
        "Walks stopped at max_pages with the server still sending nextCursor.";
    REPEATED_CURSORS = "mcp_probe_tools_list_repeated_cursors_total", Counter, ["target", "connection"],
        "Walks aborted because the server returned a cursor it had already returned.";
    DUPLICATE_TOOLS = "mcp_probe_tools_list_duplicate_tools_total", Counter, ["target", "connection"],
        "Tool names seen more than once within one walk.";
    LONG_NAMES = "mcp_probe_tools_list_long_names_total", Counter, ["target", "connection"],
        "Tool names longer than the spec's 128 characters seen in walks (kept shortened).";
    FINGERPRINT = "mcp_probe_tools_list_fingerprint", Gauge, ["target", "connection", "view"],
        "53-bit fingerprint of the tool list by view (server, cache); equal values mean equal lists.";
    DRIFT = "mcp_probe_cache_drift_tools", Gauge, ["target", "connection", "kind"],
        "Tools by which the cache differs from the server at the last check: missing, extra, changed.";
    TOOL_CHANGES = "mcp_probe_tool_changes_total", Counter, ["target", "connection", "change"],
        "Tool changes between two consecutive complete listings of a connection, by change: added, removed, and for a changed definition breaking, compatible or unknown (see docs/changes.md).";
    TOOL_DEFINITIONS_BYTES = "mcp_probe_tool_definitions_bytes", Gauge, ["target"],
        "Bytes of tool definitions the target keeps to classify changes: the current and previous definition of each tool its connections list (shared by its connections; a text shared with other targets counts for each).";
    TOOLS_PINNED = "mcp_probe_tools_pinned", Gauge, ["target"],
        "Tools the target's pins file pins (its last good read). Absent for a target without pins.";
    TOOL_PIN_MISMATCH = "mcp_probe_tool_pin_mismatch", Gauge, ["target", "tool"],
        "1 while the pinned tool is served with another definition than its pin, or not listed; 0 when it matches. One series per pinned tool.";
    TOOL_PIN_DESCRIPTION_CHANGED = "mcp_probe_tool_pin_description_changed", Gauge, ["target", "tool"],
        "1 while the pinned tool is served with another description than its pin (the rug-pull pattern); 0 otherwise. One series per pinned tool.";
    TOOLS_UNPINNED = "mcp_probe_tools_unpinned", Gauge, ["target"],
        "Listed tools the target's pins file does not pin. Absent for a target without pins.";
    PINS_FILE_VALID = "mcp_probe_tool_pins_file_valid", Gauge, ["target"],
        "1 when the last read of the target's pins file succeeded; 0 while a broken file is ignored and the last good pins stay in force. Absent for a target without pins.";
    CONSISTENCY_CHECKS = "mcp_probe_cache_consistency_checks_total", Counter, ["target", "connection"],
        "Audit walks compared against the cache.";
    CONSISTENCY_CHECK_FAILURES = "mcp_probe_cache_consistency_check_failures_total", Counter, ["target", "connection"],
        "Audit walks that could not complete, so no comparison was made.";
    UNANNOUNCED = "mcp_probe_unannounced_changes_total", Counter, ["target", "connection"],
        "Server-side list changes not announced by list_changed within notification_grace.";
    TTL_VIOLATIONS = "mcp_probe_ttl_violations_total", Counter, ["target", "connection"],
        "Server-side list changes made while the previous listing's ttlMs still promised it fresh, without list_changed (2026-07-28 servers).";
    LISTING_TTL = "mcp_probe_tools_list_ttl_seconds", Gauge, ["target", "connection"],
        "Freshness the latest complete listing promised (ttlMs of its shortest-lived page), in seconds; 0 when none is promised (legacy servers).";
    LISTING_PUBLIC = "mcp_probe_tools_list_cache_public", Gauge, ["target", "connection"],
        "1 when every page of the latest complete listing said cacheScope public, 0 when private or absent.";
    SCOPE_MIXED = "mcp_probe_tools_list_cache_scope_mixed_total", Counter, ["target", "connection"],
        "Complete listings whose pages disagreed on cacheScope (the spec requires one scope per list).";
    REJECTED_TOOLS = "mcp_probe_tools_list_rejected_tools_total", Counter, ["target", "connection"],
        "Tools left out of complete and failed walks alike because their x-mcp-header annotations break the 2026-07-28 rules (a Streamable HTTP client must drop them; its users cannot call them).";
    CACHE_STALE = "mcp_probe_tool_cache_stale", Gauge, ["target", "connection"],
        "1 while a correct client of the session's era, holding the server to what it promised, holds a stale tool list: legacy, its cache differs from the server; 2026-07-28, a promise broken (a change inside a fresh ttlMs without list_changed, or a declared listChanged not delivered within notification_grace). The verdict McpProbeToolCacheStale reads.";
    CACHE_PROMISED = "mcp_probe_tool_cache_promised", Gauge, ["target", "connection"],
        "1 when the server promises a caching client something it can be held to: tools.listChanged declared, or (2026-07-28) ttlMs > 0 on its latest listing; 0 when it promises nothing (2026-07-28 clients must re-list before every use). Absent before the first session.";
    LEGACY_PATH = "mcp_probe_legacy_path_hears_changes", Gauge, ["target", "connection"],
        "Modern-era targets only (connection 0), measured on a legacy (2025-11-25) session the probe keeps open on the same URL: 1 when a tool list change the modern path saw reached its GET stream as list_changed within notification_grace; 0 when it did not, when that session declares no listChanged, or when it gets no GET stream (the status page says which). Absent until known, for legacy targets, and for servers that serve no legacy clients.";
    WITHOUT_CHANGE = "mcp_probe_list_changed_without_change_total", Counter, ["target", "connection"],
        "list_changed notifications whose re-walk found the list unchanged.";
    REFRESHES = "mcp_probe_cache_refreshes_total", Counter, ["target", "connection", "trigger"],
        "Cache refreshes that completed, by trigger.";
    REFRESH_FAILURES = "mcp_probe_cache_refresh_failures_total", Counter, ["target", "connection", "trigger"],
        "Cache refreshes that failed, by trigger.";
    LAST_REFRESH = "mcp_probe_cache_last_refresh_timestamp_seconds", Gauge, ["target", "connection"],
        "Unix time of the last completed cache refresh.";
    LIST_ITEMS = "mcp_probe_list_items", Gauge, ["target", "connection", "list", "view"],
        "Items of a list other than the tools (prompts, resources, resource_templates) by view: server (last complete walk) and cache (what a correct client holds). Only for lists the server declares and the target watches (`lists`); the tool list's series are mcp_probe_tools and its siblings.";
    LIST_DRIFT = "mcp_probe_list_cache_drift_items", Gauge, ["target", "connection", "list", "kind"],
        "Items by which the cache of a list other than the tools differs from the server at the last check: missing, extra, changed.";
    LIST_UNANNOUNCED = "mcp_probe_list_unannounced_changes_total", Counter, ["target", "connection", "list"],
        "Changes to a list other than the tools not announced by its list_changed notification within notification_grace.";
    LIST_TTL_VIOLATIONS = "mcp_probe_list_ttl_violations_total", Counter, ["target", "connection", "list"],
        "Changes to a list other than the tools made while its previous listing's ttlMs still promised it fresh, without list_changed (2026-07-28 servers).";
    LIST_CACHE_STALE = "mcp_probe_list_cache_stale", Gauge, ["target", "connection", "list"],
        "1 while a correct client of the session's era, holding the server to what it promised, holds a stale copy of a list other than the tools (the verdict mcp_probe_tool_cache_stale gives the tool list). The verdict McpProbeListCacheStale reads.";
    LIST_NOTIFICATIONS = "mcp_probe_list_notifications_total", Counter, ["target", "connection", "list"],
        "list_changed notifications received for a list other than the tools (the resources notification counts for resources and resource_templates).";
    LIST_CHANGES = "mcp_probe_list_changes_total", Counter, ["target", "connection", "list", "change"],
        "Changes to a list other than the tools between two consecutive complete listings of a connection, by change: added, removed, and for a changed definition breaking, compatible or unknown (prompts: arguments; resources and templates: mimeType; see docs/changes.md).";
    LIST_PIN_MISMATCHES = "mcp_probe_list_pin_mismatches", Gauge, ["target", "list"],
        "Pinned items of a list other than the tools served with another definition than their pin, or not listed (connection 0). Only for lists the target's pins file pins.";
    LIST_PIN_DESCRIPTION_CHANGES = "mcp_probe_list_pin_description_changes", Gauge, ["target", "list"],
        "Pinned items of a list other than the tools served with another description than their pin (the rug-pull pattern, for prompts above all). Only for lists the pins file pins.";
    LIST_UNPINNED = "mcp_probe_list_unpinned_items", Gauge, ["target", "list"],
        "Listed items of a list other than the tools that the pins file's section for that list does not pin. Only for lists the pins file pins.";
    LIST_WALK_FAILURES = "mcp_probe_list_walk_failures_total", Counter, ["target", "connection", "list", "reason"],
        "Walks of a list other than the tools that did not complete, by reason.";
    TOOL_PROBE_SUCCESS = "mcp_probe_tool_probe_success", Gauge, ["target", "tool"],
        "1 when the last run of the functional probe (tools/call) of this tool passed; 0 after a failure, a skip, or while the session is down.";
    TOOL_PROBE_DURATION = "mcp_probe_tool_probe_duration_seconds", Gauge, ["target", "tool"],
        "Duration of the last run of the functional probe of this tool, in seconds.";
    TOOL_PROBE_FAILURES = "mcp_probe_tool_probe_failures_total", Counter, ["target", "tool", "reason"],
        "Functional probe runs that failed or were skipped, by reason (timeout, transport, protocol_error, unknown_tool, tool_error, expectation, auth, side_effect_guard).";
    AUTH_TOKEN_EXPIRY = "mcp_probe_auth_token_expiry_timestamp_seconds", Gauge, ["target"],
        "Unix time at which the target's current OAuth access token expires; 0 when the token states no lifetime. Absent for targets without oauth2.";
    AUTH_TOKEN_REQUESTS = "mcp_probe_auth_token_requests_total", Counter, ["target", "result"],
        "OAuth token acquisitions (discovery and token request) for the target, by result (success, failure). Absent for targets without oauth2.";
    TARGET_INFO = "mcp_probe_target_info", Gauge, ["target"],
        "Always 1; the other labels are the target's own (static `labels:` or discovered), for joins: `* on(target) group_left(team) mcp_probe_target_info`. Absent for a target without labels.";
    BUILD_INFO = "mcp_exporter_build_info", Gauge, ["version", "revision"],
        "Always 1; labels name the running build.";
    RELOAD_OK = "mcp_exporter_config_last_reload_successful", Gauge, [],
        "1 when the last configuration load succeeded.";
    RELOAD_TIMESTAMP = "mcp_exporter_config_last_reload_success_timestamp_seconds", Gauge, [],
        "Unix time of the last successful configuration load.";
    TARGETS = "mcp_exporter_targets", Gauge, [],
        "Targets this replica probes: those of the running configuration and of discovery that its shard owns.";
    TARGETS_CONFIGURED = "mcp_exporter_targets_configured", Gauge, [],
        "Targets of the running configuration and of discovery together, before sharding (the same on every replica).";
    SHARD_INFO = "mcp_exporter_shard_info", Gauge, ["index", "count"],
        "Always 1; this replica's shard (index from 0) and the number of shards (1: not sharded).";
    SD_TARGETS = "mcp_exporter_sd_targets", Gauge, ["mechanism", "config"],
        "Targets the discovery source provides now (its last good refresh), by mechanism (file, http) and source name.";
    SD_REFRESH_FAILURES = "mcp_exporter_sd_refresh_failures_total", Counter, ["mechanism", "config"],
        "Discovery refreshes that failed (unreadable, unparseable or invalid file; HTTP error, timeout, oversized or invalid answer); the source keeps its last good targets.";
    SD_LAST_REFRESH_OK = "mcp_exporter_sd_last_refresh_successful", Gauge, ["mechanism", "config"],
        "1 when the last refresh of the discovery source succeeded, 0 while it fails (its last good targets stay).";
    SD_DROPPED = "mcp_exporter_sd_dropped_targets", Gauge, ["mechanism", "config", "reason"],
        "Discovered targets left out of the merge now, by reason (duplicate: a name another source or group already has; static: a static target has the name; connections: over the connection cap).";
    RELOADS = "mcp_exporter_config_reloads_total", Counter, ["result"],
        "Configuration reload attempts by result (success, failure).";
    OTLP_EXPORTS = "mcp_exporter_otlp_exports_total", Counter, ["result"],
        "OTLP metric exports attempted, by result (success, failure); absent unless --otlp.endpoint is set.";
    WEB_CONNECTIONS = "mcp_exporter_web_connections", Gauge, [],
        "Connections open to the exporter's own port (/metrics, the status page); at most --web.max-connections.";
    WEB_CONNECTIONS_CLOSED = "mcp_exporter_web_connections_closed_total", Counter, ["reason"],
        "Connections to the exporter's own port that it closed, by reason (header_read_timeout, idle_timeout, evicted, refused, tls_handshake_failed).";
    PROXY_UPSTREAM_UP = "mcp_proxy_upstream_up", Gauge, ["proxy"],
        "1 when the proxy's last walk of the upstream's tools/list (its own catalog session) completed.";
    PROXY_UPSTREAM_TOOLS = "mcp_proxy_upstream_tools", Gauge, ["proxy"],
        "Tools in the proxy's catalog of the upstream (its last complete walk).";
    PROXY_SESSIONS = "mcp_proxy_sessions", Gauge, ["proxy", "client"],
        "Client sessions the proxy tracks now, by client.";
    PROXY_SESSIONS_STARTED = "mcp_proxy_sessions_started_total", Counter, ["proxy", "client"],
        "Client sessions the proxy started tracking, by client.";
    PROXY_SESSIONS_ENDED = "mcp_proxy_sessions_ended_total", Counter, ["proxy", "reason"],
        "Tracked client sessions that ended, by reason (deleted, expired, idle, evicted).";
    PROXY_REQUESTS = "mcp_proxy_requests_total", Counter, ["proxy", "client", "method"],
        "JSON-RPC requests forwarded to the upstream, by client and method (MCP methods; anything else is other).";
    PROXY_REQUEST_DURATION = "mcp_proxy_request_duration_seconds", Histogram, ["proxy", "method"],
        "Time from forwarding a request to the upstream's complete answer, by method.";
    PROXY_REJECTED = "mcp_proxy_rejected_requests_total", Counter, ["proxy", "reason"],
        "Requests the proxy answered itself or the upstream refused for an unknown session, by reason (invalid_json, body_too_large, unknown_session, session_limit, upstream_unavailable, unknown_path, upstream_timeout, upstream_invalid_response).";
    PROXY_TOOLS_LIST_REQUESTS = "mcp_proxy_tools_list_requests_total", Counter, ["proxy", "client", "cursor"],
        "Clients' tools/list requests, by whether they carried a cursor.";
    PROXY_CURSORS_ISSUED = "mcp_proxy_cursors_issued_total", Counter, ["proxy", "client"],
        "tools/list answers with nextCursor sent to clients.";
    PROXY_CURSORS_FOLLOWED = "mcp_proxy_cursors_followed_total", Counter, ["proxy", "client"],
        "Cursors issued to clients that the same session then followed with tools/list.";
    PROXY_FIRST_PAGE_ONLY = "mcp_proxy_first_page_only_sessions_total", Counter, ["proxy", "client"],
        "Sessions that got nextCursor and did not follow it within cursor_grace or before their next other request (counted once per session): their tool set is certainly incomplete.";
    PROXY_CURSOR_ERRORS = "mcp_proxy_cursor_errors_total", Counter, ["proxy", "client"],
        "Clients' tools/list requests with a cursor that the upstream answered with an error.";
    PROXY_CURSOR_AGE = "mcp_proxy_cursor_age_seconds", Histogram, ["proxy"],
        "Time from sending a nextCursor to a client to that client's tools/list with it.";
    PROXY_LIST_CHANGED_FORWARDED = "mcp_proxy_list_changed_forwarded_total", Counter, ["proxy", "client"],
        "notifications/tools/list_changed forwarded to clients.";
    PROXY_RELIST_LAG = "mcp_proxy_relist_lag_seconds", Histogram, ["proxy"],
        "Time from forwarding list_changed to a session to that session's next tools/list.";
    PROXY_WITHOUT_RELIST = "mcp_proxy_sessions_without_relist_total", Counter, ["proxy", "client", "after"],
        "Sessions that called tools on a list they did not refresh: after=list_changed (no tools/list within relist_grace or before the next tools/call), after=reconnect (the session's first tools/call came before any tools/list).";
    PROXY_EXPIRED_LISTING_CALLS = "mcp_proxy_expired_listing_calls_total", Counter, ["proxy", "client"],
        "tools/call of 2026-07-28 clients made with a listing whose ttlMs (0 when missing) had run out by more than ttl_grace, with no tools/list since: the client cached past the server's promise of freshness.";
    PROXY_STALE_TOOL_CALLS = "mcp_proxy_stale_tool_calls_total", Counter, ["proxy", "client", "tool"],
        "tools/call of a tool absent from the upstream's current list (tool: a name the upstream listed in the last 24 h, else other).";
    PROXY_STALE_SCHEMA_CALLS = "mcp_proxy_stale_schema_calls_total", Counter, ["proxy", "client", "tool"],
        "tools/call whose arguments fit the tool's previous inputSchema but not its current one.";
    PROXY_UNKNOWN_TOOL_ANSWERS = "mcp_proxy_unknown_tool_answers_total", Counter, ["proxy", "client", "tool"],
        "Answers of the upstream to clients' tools/call that say the tool does not exist, in one of the known SDKs' shapes (see docs/proxy.md), independent of the proxy's catalog (tool: a name the upstream listed in the last 24 h, else other).";
    PROXY_FLATTENED = "mcp_proxy_flattened_listings_total", Counter, ["proxy", "client", "result"],
        "tools/list answers merged into one page for clients named in flatten_pages, by result (success; failure: the first page was forwarded instead).";
    PROXY_HEAL_NOTIFICATIONS = "mcp_proxy_heal_notifications_total", Counter, ["proxy", "client"],
        "notifications/tools/list_changed the proxy itself sent on a session's open stream because the session's tool list was older than the upstream's (heal: true only).";
    PROXY_HEAL_REFUSED = "mcp_proxy_heal_refused_calls_total", Counter, ["proxy", "client"],
        "tools/call of a tool the upstream no longer lists, answered -32602 by the proxy itself without reaching the upstream (heal: true only).";
    PROXY_UPSTREAM_LIST_ITEMS = "mcp_proxy_upstream_list_items", Gauge, ["proxy", "list"],
        "Items of the upstream's prompts, resources and resource templates in the proxy's catalog (its last complete walk of each list the upstream declares).";
    PROXY_STALE_LIST_CALLS = "mcp_proxy_stale_list_calls_total", Counter, ["proxy", "client", "list"],
        "prompts/get (list=prompts) and resources/read (list=resources) of an item the upstream's lists produced in the last 24 h and no longer produce (a resource: neither listed nor readable through a listed template's literal prefix).";
    PROXY_LIST_FIRST_PAGE_ONLY = "mcp_proxy_list_first_page_only_sessions_total", Counter, ["proxy", "client", "list"],
        "Sessions that got nextCursor on prompts/list, resources/list or resources/templates/list and did not follow it within cursor_grace or before their next use of the list (counted once per session and list).";
    PROXY_LIST_WITHOUT_RELIST = "mcp_proxy_list_sessions_without_relist_total", Counter, ["proxy", "client", "list"],
        "Sessions that had listed prompts, resources or resource templates, were forwarded that list's list_changed and did not list it again within relist_grace or before their next use of it.";
    PROXY_LIST_RELIST_LAG = "mcp_proxy_list_relist_lag_seconds", Histogram, ["proxy", "list"],
        "Time from forwarding a list_changed to a session that had listed prompts, resources or resource templates to that session's next listing of the list.";
}

/// The exporter's families, indexed for the writer.
pub static CATALOG: Catalog = Catalog::new(FAMILIES);

/// The slot of `name` (a constant of this file).
pub fn slot(name: &str) -> Slot {
    CATALOG.slot(name)
}

/// Look a family up by name.
pub fn find(name: &str) -> Option<&'static MetricDef> {
    CATALOG.find(name)
}

/// The family a series name (as used in PromQL) belongs to: the family itself, or a histogram's
/// `_bucket` / `_sum` / `_count` series.
pub fn family_of(series: &str) -> Option<&'static MetricDef> {
    CATALOG.family_of(series)
}

#[cfg(test)]
mod tests {
    use super::*;
    use exposition::Kind;

    #[test]
    fn series_map_to_their_family() {
        assert_eq!(family_of("mcp_probe_up").map(|d| d.name), Some(UP));
        assert_eq!(
            family_of("mcp_probe_ping_duration_seconds_bucket").map(|d| d.name),
            Some(PING_DURATION)
        );
        assert!(
            family_of("mcp_probe_up_count").is_none(),
            "only histograms have _count series"
        );
        assert!(family_of("mcp_probe_nope").is_none());
    }

    #[test]
    fn names_follow_prometheus_conventions() {
        let mut seen = std::collections::HashSet::new();
        for d in FAMILIES {
            assert!(seen.insert(d.name), "duplicate {}", d.name);
            assert!(
                d.name.starts_with("mcp_probe_")
                    || d.name.starts_with("mcp_exporter_")
                    || d.name.starts_with("mcp_proxy_")
            );
            assert_eq!(
                d.kind == Kind::Counter,
                d.name.ends_with("_total"),
                "{}",
                d.name
            );
            if d.kind == Kind::Histogram {
                assert!(d.name.ends_with("_seconds"), "{}", d.name);
            }
            if d.name.starts_with("mcp_probe_") {
                assert_eq!(d.labels.first(), Some(&"target"), "{}", d.name);
            }
            if d.name.starts_with("mcp_proxy_") {
                assert_eq!(d.labels.first(), Some(&"proxy"), "{}", d.name);
            }
            assert!(d.help.ends_with('.'), "{}", d.name);
        }
    }
}
