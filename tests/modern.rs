//! End to end in the 2026-07-28 modern era: the lab (dual-era by default, or modern/legacy only)
//! and the probe in-process, every verdict read from `/metrics`. What these tests add to
//! `failure_modes.rs` is the era itself: detection and pinning, `server/discover` as liveness, the
//! `subscriptions/listen` channel, and the freshness promise (`ttlMs`, `cacheScope`) of listings.

mod common;

use std::time::Duration;

use common::series::{C0, checks, counter, drift, t, walks};
use common::{Harness, Scrape, lab_and_probe};
use mcp_client::mcp::Reason;
use mcp_client::mcp::version::ProtocolVersion;
use mcp_exporter::config::{ProtocolChoice, TargetConfig};
use mcp_lab::{Behaviour, CacheScope, Era as LabEra, Lab};

const MODERN: &str = "2026-07-28";

async fn start(name: &str, b: Behaviour) -> (Lab, Harness) {
    lab_and_probe(name, b, |_| {}).await
}

fn scenario(name: &str) -> Behaviour {
    mcp_lab::scenarios::find(name)
        .expect("scenario exists")
        .behaviour
}

/// A healthy lab endpoint that serves `era` only.
fn only(era: LabEra) -> Behaviour {
    Behaviour {
        era,
        ..Behaviour::default()
    }
}

fn pinned(v: ProtocolVersion) -> impl FnOnce(&mut TargetConfig) {
    move |c| c.protocol_version = ProtocolChoice::Pinned(v)
}

/// `mcp_probe_session_info` of connection 0 in `era` with `version`, if present.
fn session_info(s: &Scrape, name: &str, era: &str, version: &str) -> Option<f64> {
    s.get(
        "mcp_probe_session_info",
        &[t(name), C0, ("era", era), ("protocol_version", version)],
    )
}

fn fingerprints_agree(s: &Scrape, name: &str) -> bool {
    let fp = |view| {
        s.v(
            "mcp_probe_tools_list_fingerprint",
            &[t(name), C0, ("view", view)],
        )
    };
    fp("cache") == fp("server")
}

/// The freshness promise of the latest listing: (`ttlMs` in seconds, public 1/0, mixed-scope count).
fn promise(s: &Scrape, name: &str) -> (f64, f64, f64) {
    (
        s.v("mcp_probe_tools_list_ttl_seconds", &[t(name), C0]),
        s.v("mcp_probe_tools_list_cache_public", &[t(name), C0]),
        counter(s, "mcp_probe_tools_list_cache_scope_mixed_total", name),
    )
}

fn requests(s: &Scrape, name: &str, method: &str) -> f64 {
    s.get(
        "mcp_probe_requests_total",
        &[t(name), C0, ("method", method)],
    )
    .unwrap_or(0.0)
}

fn session_failures(s: &Scrape, name: &str) -> f64 {
    Reason::ALL
        .iter()
        .filter_map(|r| {
            s.get(
                "mcp_probe_session_failures_total",
                &[t(name), ("reason", r.as_str())],
            )
        })
        .sum()
}

/// The first walk is complete, in the modern era.
async fn modern_and_walked(h: &Harness, name: &str) -> Scrape {
    h.until("modern session and initial walk", |s| {
        session_info(s, name, "modern", MODERN) == Some(1.0)
            && walks(s, name, "initial") == 1.0
            && s.v("mcp_probe_tools", &[t(name), C0, ("view", "cache")]) == 14.0
    })
    .await
}

/// Wait until an audit has found the lab's last redeploy (one tool gone, the cache still has it)
/// and the grace has passed without a notification.
async fn unannounced(h: &Harness, name: &str) -> Scrape {
    h.until("drift and an unannounced change", |s| {
        drift(s, name, "extra") == 1.0
            && counter(s, "mcp_probe_unannounced_changes_total", name) >= 1.0
    })
    .await
}

/// Auto against the dual-era lab picks modern: the era label, both pages, the listen stream, the
/// listing's freshness promise, and `server/discover` (never `ping`) as the liveness check.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_against_a_dual_lab_is_modern_with_listen_stream_and_discover_liveness() {
    let (lab, h) = start("kb", Behaviour::default()).await;
    modern_and_walked(&h, "kb").await;
    let s = h
        .until("stream up and liveness checks passed", |s| {
            counter(s, "mcp_probe_notification_stream_up", "kb") == 1.0
                && requests(s, "kb", "server/discover") >= 3.0
                && s.v("mcp_probe_up", &[t("kb")]) == 1.0
        })
        .await;
    assert_eq!(session_info(&s, "kb", "legacy", "2025-11-25"), None);
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t("kb"), C0]), 2.0);
    assert_eq!(
        s.v("mcp_probe_tools", &[t("kb"), C0, ("view", "server")]),
        14.0
    );
    assert_eq!(s.v("mcp_probe_list_changed_capable", &[t("kb"), C0]), 1.0);
    assert_eq!(requests(&s, "kb", "ping"), 0.0, "no ping in the modern era");
    assert_eq!(
        requests(&s, "kb", "initialize"),
        0.0,
        "no handshake in the modern era"
    );
    assert_eq!(counter(&s, "mcp_probe_ping_failures_total", "kb"), 0.0);
    assert_eq!(promise(&s, "kb"), (60.0, 1.0, 0.0), "{}", s.text);
    // One legacy `initialize`, not the probe's own: the legacy session connection 0 keeps to
    // measure what a 2025-era client of the same URL hears (it gets a GET stream here).
    let s = h
        .until("the legacy session opened", |_| lab.initializes("kb") == 1)
        .await;
    assert!(
        s.get("mcp_probe_legacy_path_hears_changes", &[t("kb"), C0])
            .is_none(),
        "declared and streaming: unknown until a change tests it\n{}",
        s.text
    );
    lab.churn();
    let s = h
        .until("the change measured on the legacy stream", |s| {
            s.get("mcp_probe_legacy_path_hears_changes", &[t("kb"), C0])
                .is_some()
        })
        .await;
    assert_eq!(
        s.v("mcp_probe_legacy_path_hears_changes", &[t("kb"), C0]),
        1.0,
        "the lab announces on the legacy GET stream too"
    );
    assert_eq!(lab.initializes("kb"), 1, "the legacy session is kept");
    assert!(lab.modern_requests("kb") >= 3);
}

/// Each round trip is timed once, in the histogram of what a client waits for: a liveness
/// check as a ping, a tool list's pages as its walk, and by method what has no histogram of its
/// own (a session's opening). Every request is still counted by method.
async fn each_round_trip_is_timed_once(era: LabEra, liveness: &str, opening: &str) {
    let (_lab, h) = start("kb", only(era)).await;
    let histogram = |s: &Scrape, family: &str| s.get(family, &[t("kb")]).unwrap_or(0.0);
    let s = h
        .until("walked and three liveness checks timed", |s| {
            histogram(s, "mcp_probe_ping_duration_seconds_count") >= 3.0
                && histogram(s, "mcp_probe_tools_list_walk_duration_seconds_count") >= 1.0
        })
        .await;
    let timed = |method: &str| {
        s.get(
            "mcp_probe_request_duration_seconds_count",
            &[t("kb"), ("method", method)],
        )
    };
    assert_eq!(
        timed(opening),
        Some(counter(&s, "mcp_probe_sessions_started_total", "kb")),
        "each session's opening, by method\n{}",
        s.text
    );
    assert!(requests(&s, "kb", liveness) >= 3.0, "{}", s.text);
    assert!(requests(&s, "kb", "tools/list") >= 2.0, "{}", s.text);
    assert_eq!(timed("tools/list"), None, "{}", s.text);
    assert_eq!(timed("ping"), None, "{}", s.text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_each_round_trip_is_timed_once() {
    each_round_trip_is_timed_once(LabEra::Legacy, "ping", "initialize").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_each_round_trip_is_timed_once() {
    each_round_trip_is_timed_once(LabEra::Modern, "server/discover", "server/discover").await;
}

/// An announced change (`list_changed` on the listen stream): the cache follows, no drift, and
/// neither an unannounced change nor a broken TTL promise is counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announced_change_is_followed_without_drift_or_ttl_violation() {
    let (lab, h) = start("kb", Behaviour::default()).await;
    modern_and_walked(&h, "kb").await;
    h.until("listen stream up", |s| {
        counter(s, "mcp_probe_notification_stream_up", "kb") == 1.0
    })
    .await;
    let before = checks(&h.scrape(), "kb");
    lab.churn();
    let refreshed = |s: &Scrape| {
        s.count(
            "mcp_probe_cache_refreshes_total",
            &[t("kb"), C0, ("trigger", "notification")],
        )
    };
    let s = h
        .until("cache follows the announced change, three audits", |s| {
            counter(s, "mcp_probe_list_changed_notifications_total", "kb") >= 1.0
                && refreshed(s) >= 1.0
                && fingerprints_agree(s, "kb")
                && checks(s, "kb") >= before + 3.0
        })
        .await;
    let quiet = [
        "mcp_probe_unannounced_changes_total",
        "mcp_probe_ttl_violations_total",
    ];
    for m in quiet {
        assert_eq!(counter(&s, m, "kb"), 0.0, "{m}\n{}", s.text);
    }
    let kinds = ["missing", "extra", "changed"].map(|k| drift(&s, "kb", k));
    assert_eq!(kinds, [0.0; 3], "{}", s.text);
    assert_eq!(session_info(&s, "kb", "modern", MODERN), Some(1.0));
}

/// A redeploy lands while a walk is between its pages: the walk reads page 1 before and page 2
/// after, and the announcement arrives before it ends. That listing is a version no client was
/// served whole; held against the walk the notification wakes, the announced change read as a
/// second, silent one inside a fresh `ttlMs` — a TTL violation and a stale verdict on a healthy
/// server, for good when a walk overlapped every periodic redeploy (the demo's `kb_healthy` under
/// load).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_announced_while_a_walk_reads_its_pages_is_no_ttl_violation() {
    let b = Behaviour {
        page_delay: Duration::from_millis(600),
        ..Behaviour::default()
    };
    let (lab, h) = start("kb", b).await;
    modern_and_walked(&h, "kb").await;
    h.until("listen stream up", |s| {
        counter(s, "mcp_probe_notification_stream_up", "kb") == 1.0
    })
    .await;
    // Page 1 answered, page 2 waiting out its delay: redeploy now.
    let deadline = tokio::time::Instant::now() + common::DEADLINE;
    while !(lab.tools_list_in_flight() == 1 && lab.tools_list_calls() % 2 == 1) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no walk between its pages"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    lab.churn();
    let before = checks(&h.scrape(), "kb");
    let refreshed = |s: &Scrape| {
        s.count(
            "mcp_probe_cache_refreshes_total",
            &[t("kb"), C0, ("trigger", "notification")],
        )
    };
    // Audits take two page delays each, far longer than the grace.
    let s = h
        .until("cache follows the change, two audits after it", |s| {
            refreshed(s) >= 1.0 && fingerprints_agree(s, "kb") && checks(s, "kb") >= before + 2.0
        })
        .await;
    for m in [
        "mcp_probe_ttl_violations_total",
        "mcp_probe_unannounced_changes_total",
        "mcp_probe_tool_cache_stale",
    ] {
        assert_eq!(counter(&s, m, "kb"), 0.0, "{m}\n{}", s.text);
    }
}

/// F1 in the modern era: the change is never announced on the listen stream. The audit shows the
/// drift and counts the change as unannounced; the previous listing promised 60 s of freshness,
/// which the change broke, so it is a TTL violation too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unannounced_change_within_the_ttl_is_drift_unannounced_and_a_ttl_violation() {
    let (lab, h) = start("lossy", scenario("notification-lost")).await;
    modern_and_walked(&h, "lossy").await;
    h.until("listen stream up", |s| {
        counter(s, "mcp_probe_notification_stream_up", "lossy") == 1.0
    })
    .await;
    lab.churn();
    let s = unannounced(&h, "lossy").await;
    assert_eq!(drift(&s, "lossy", "missing"), 1.0, "{}", s.text);
    assert!(
        counter(&s, "mcp_probe_ttl_violations_total", "lossy") >= 1.0,
        "{}",
        s.text
    );
    assert_eq!(
        counter(&s, "mcp_probe_list_changed_notifications_total", "lossy"),
        0.0
    );
    // It declares listChanged: the unannounced change is a promise broken, a stale verdict.
    let s = h
        .until("the stale verdict", |s| {
            counter(s, "mcp_probe_tool_cache_stale", "lossy") == 1.0
        })
        .await;
    assert_eq!(counter(&s, "mcp_probe_tool_cache_promised", "lossy"), 1.0);
    // The gateway drops the legacy GET stream's notification too: measured, 2025 clients are
    // deaf to this change.
    let s = h
        .until("the legacy path measured", |s| {
            s.get("mcp_probe_legacy_path_hears_changes", &[t("lossy"), C0])
                .is_some()
        })
        .await;
    assert_eq!(
        s.v("mcp_probe_legacy_path_hears_changes", &[t("lossy"), C0]),
        0.0,
        "{}",
        s.text
    );
    let snap = h.supervisor.status().snapshot();
    let c0 = &snap.targets[0].connections[0];
    assert_eq!(
        c0.legacy_clients.as_ref().map(|l| l.cause),
        Some("stream_silent")
    );
    assert!(snap.targets[0].stale);
}

/// A server that promises nothing (`ttlMs: 0`) cannot break a promise: the unannounced change
/// is still counted, the TTL violation is not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_zero_promises_nothing_so_no_violation_but_still_unannounced() {
    let b = Behaviour {
        ttl_ms: 0,
        ..scenario("notification-lost")
    };
    let (lab, h) = start("nottl", b).await;
    let s = modern_and_walked(&h, "nottl").await;
    assert_eq!(
        s.v("mcp_probe_tools_list_ttl_seconds", &[t("nottl"), C0]),
        0.0
    );
    lab.churn();
    // The promise is judged by the walk that first sees the change, before the grace that makes
    // it unannounced ends: once it is unannounced, a violation would have been counted.
    let s = unannounced(&h, "nottl").await;
    assert_eq!(counter(&s, "mcp_probe_ttl_violations_total", "nottl"), 0.0);
    // A declared listChanged is a promise of its own: broken even when ttlMs 0 spares clients.
    h.until("the stale verdict", |s| {
        counter(s, "mcp_probe_tool_cache_stale", "nottl") == 1.0
    })
    .await;
}

/// F2 in the modern era: no listChanged, `ttlMs` 0 (the defaults of fastmcp, rmcp and the Python
/// SDK's low-level server). It promises nothing: its clients must re-list before every use, so
/// no correct client is stale. The facts stay (drift of a notification-driven cache, the
/// unannounced change); the verdict is `no_promise`, never stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_modern_a_server_that_promises_nothing_is_no_promise_never_stale() {
    let b = Behaviour {
        ttl_ms: 0,
        ..scenario("no-list-changed")
    };
    let (lab, h) = start("silent", b).await;
    let s = modern_and_walked(&h, "silent").await;
    assert_eq!(
        s.v("mcp_probe_list_changed_capable", &[t("silent"), C0]),
        0.0
    );
    let s = h
        .until("the contract judged", |s| {
            s.get("mcp_probe_tool_cache_promised", &[t("silent"), C0]) == Some(0.0)
        })
        .await;
    assert_eq!(counter(&s, "mcp_probe_tool_cache_stale", "silent"), 0.0);
    lab.churn();
    let s = unannounced(&h, "silent").await;
    assert_eq!(drift(&s, "silent", "missing"), 1.0, "the fact stays");
    let later = checks(&s, "silent") + 2.0;
    let s = h
        .until("two more audits", |s| checks(s, "silent") >= later)
        .await;
    assert_eq!(
        counter(&s, "mcp_probe_tool_cache_stale", "silent"),
        0.0,
        "no promise was broken\n{}",
        s.text
    );
    assert_eq!(counter(&s, "mcp_probe_ttl_violations_total", "silent"), 0.0);
    let snap = h.supervisor.status().snapshot();
    let target = &snap.targets[0];
    assert_eq!(
        target.severity.as_str(),
        "no_promise",
        "{:?}",
        target.causes
    );
    assert!(!target.stale);
    assert!(
        target.causes[0].contains("re-list before every use"),
        "{:?}",
        target.causes
    );
    assert_eq!(target.connections[0].contract.promise, Some("none"));
    // Its legacy path declares no listChanged either: 2025-era clients cache and stay stale.
    let s = h
        .until("the legacy path judged", |s| {
            s.get("mcp_probe_legacy_path_hears_changes", &[t("silent"), C0])
                .is_some()
        })
        .await;
    assert_eq!(
        s.v("mcp_probe_legacy_path_hears_changes", &[t("silent"), C0]),
        0.0
    );
}

/// The same server seen by a client pinned to 2025-11-25 (F2, legacy form): a legacy client
/// caches whatever was declared, so the silent change leaves it stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_legacy_a_server_that_declares_no_list_changed_leaves_caching_clients_stale() {
    let b = Behaviour {
        ttl_ms: 0,
        ..scenario("no-list-changed")
    };
    let (lab, h) = lab_and_probe("f2", b, pinned(ProtocolVersion::V2025_11_25)).await;
    h.until("legacy session and initial walk", |s| {
        session_info(s, "f2", "legacy", "2025-11-25") == Some(1.0)
            && walks(s, "f2", "initial") == 1.0
    })
    .await;
    lab.churn();
    let s = h
        .until("drift and the stale verdict", |s| {
            drift(s, "f2", "extra") == 1.0 && counter(s, "mcp_probe_tool_cache_stale", "f2") == 1.0
        })
        .await;
    assert_eq!(counter(&s, "mcp_probe_tool_cache_promised", "f2"), 0.0);
    let snap = h.supervisor.status().snapshot();
    assert_eq!(snap.targets[0].severity.as_str(), "stale");
}

/// `cacheScope: private` on every page: the listing is not shareable, and not mixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn private_cache_scope_is_not_public() {
    let b = Behaviour {
        cache_scope: CacheScope::Private,
        ..Behaviour::default()
    };
    let (_lab, h) = start("private", b).await;
    let s = modern_and_walked(&h, "private").await;
    assert_eq!(promise(&s, "private"), (60.0, 0.0, 0.0), "{}", s.text);
}

/// F4 in the modern era: a proxy cuts the listen stream and the backend changes in the gap. The
/// stream is re-opened (counted) and a `stream_gap` walk repairs the cache without notification.
/// The change may have been announced on the cut stream, so it is not held against the 60 s
/// promise: no TTL violation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_stream_cut_by_the_lab_reconnects_rewalks_the_gap_without_a_ttl_violation() {
    // Modern only: a legacy path would keep a GET stream of its own, whose cut redeploys the lab
    // once more while the listen stream may be open to announce it.
    let b = Behaviour {
        stream_close_after: Some(std::time::Duration::from_millis(700)),
        era: LabEra::Modern,
        ..scenario("stream-cut-by-proxy")
    };
    let (lab, h) = start("gap", b).await;
    modern_and_walked(&h, "gap").await;
    let reopened = |s: &Scrape| counter(s, "mcp_probe_notification_stream_reconnects_total", "gap");
    let s = h
        .until(
            "listen stream re-opened, gap re-walked after a change",
            |s| {
                reopened(s) >= 1.0
                    && walks(s, "gap", "stream_gap") >= 1.0
                    && lab.generation() >= 1
                    && fingerprints_agree(s, "gap")
            },
        )
        .await;
    assert_eq!(
        counter(&s, "mcp_probe_ttl_violations_total", "gap"),
        0.0,
        "a change next to a gap is not held against the promise\n{}",
        s.text
    );
    assert_eq!(
        counter(&s, "mcp_probe_list_changed_notifications_total", "gap"),
        0.0
    );
    assert_eq!(session_info(&s, "gap", "modern", MODERN), Some(1.0));
    assert_eq!(
        lab.initializes("gap"),
        0,
        "a modern-only lab opens no session"
    );
}

/// A modern-only lab (it refuses `initialize`): auto is modern.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_against_a_modern_only_lab_is_modern() {
    let b = only(LabEra::Modern);
    let (lab, h) = start("modern", b).await;
    let s = modern_and_walked(&h, "modern").await;
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t("modern"), C0]), 2.0);
    let s = h
        .until("up", |s| s.v("mcp_probe_up", &[t("modern")]) == 1.0)
        .await;
    assert_eq!(session_failures(&s, "modern"), 0.0);
    assert_eq!(lab.initializes("modern"), 0);
}

/// A legacy-only lab: detection falls back to the `initialize` handshake, era legacy.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auto_against_a_legacy_only_lab_falls_back_to_legacy() {
    let b = only(LabEra::Legacy);
    let (lab, h) = start("old", b).await;
    let s = h
        .until("legacy session and initial walk", |s| {
            session_info(s, "old", "legacy", "2025-11-25") == Some(1.0)
                && walks(s, "old", "initial") == 1.0
                && s.v("mcp_probe_up", &[t("old")]) == 1.0
        })
        .await;
    assert!(
        s.get("mcp_probe_session_info", &[t("old"), C0, ("era", "modern")])
            .is_none()
    );
    assert_eq!(
        s.v("mcp_probe_tools", &[t("old"), C0, ("view", "cache")]),
        14.0
    );
    assert_eq!(
        s.v("mcp_probe_tools_list_ttl_seconds", &[t("old"), C0]),
        0.0,
        "legacy listings promise nothing"
    );
    assert!(lab.initializes("old") >= 1);
    assert_eq!(
        session_failures(&s, "old"),
        0.0,
        "falling back is not a failure"
    );
}

/// Pinned to 2025-11-25, the dual lab is spoken to in the legacy era: `initialize`, `ping`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_legacy_version_against_a_dual_lab_is_legacy() {
    let (lab, h) = lab_and_probe(
        "kb",
        Behaviour::default(),
        pinned(ProtocolVersion::V2025_11_25),
    )
    .await;
    let s = h
        .until("legacy session, walked, pinged", |s| {
            session_info(s, "kb", "legacy", "2025-11-25") == Some(1.0)
                && walks(s, "kb", "initial") == 1.0
                && requests(s, "kb", "ping") >= 1.0
                && counter(s, "mcp_probe_notification_stream_up", "kb") == 1.0
        })
        .await;
    assert_eq!(requests(&s, "kb", "server/discover"), 0.0);
    assert_eq!(lab.modern_requests("kb"), 0);
    assert!(lab.initializes("kb") >= 1);
}

/// Pinned to 2026-07-28, a legacy-only lab is never up: every attempt is a session failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pinned_modern_version_against_a_legacy_only_lab_fails_and_is_never_up() {
    let b = only(LabEra::Legacy);
    let (lab, h) = lab_and_probe("old", b, pinned(ProtocolVersion::V2026_07_28)).await;
    let s = h
        .until("two failed session attempts", |s| {
            session_failures(s, "old") >= 2.0
        })
        .await;
    assert_eq!(s.v("mcp_probe_up", &[t("old")]), 0.0);
    assert_eq!(counter(&s, "mcp_probe_sessions_started_total", "old"), 0.0);
    assert!(s.get("mcp_probe_session_info", &[t("old"), C0]).is_none());
    assert_eq!(
        lab.initializes("old"),
        0,
        "a pinned version never falls back"
    );
}

/// The empty-string cursor of 2026-07-28 pagination is a cursor, not the end: two pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_string_cursor_is_followed_to_the_second_page() {
    let (_lab, h) = start("empty", scenario("empty-cursor")).await;
    let s = modern_and_walked(&h, "empty").await;
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t("empty"), C0]), 2.0);
    assert_eq!(
        s.v("mcp_probe_tools", &[t("empty"), C0, ("view", "server")]),
        14.0
    );
    for m in [
        "mcp_probe_tools_list_cursor_errors_total",
        "mcp_probe_tools_list_repeated_cursors_total",
        "mcp_probe_tools_list_duplicate_tools_total",
    ] {
        assert_eq!(counter(&s, m, "empty"), 0.0, "{m}\n{}", s.text);
    }
}
