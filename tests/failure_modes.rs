//! End to end on loopback: the lab server with one fault knob per test, the probe in-process,
//! `/metrics` text parsed. Each test asserts the signal of its failure mode and that the signals
//! of the others stay quiet.

mod common;

use common::series::{C0, checks, counter, drift, t, walks};
use common::{Harness, Scrape, churn_then_audits, start_lab, target};
use mcp_lab::{Behaviour, Era as LabEra, Lab};

async fn lab(profile: &str, b: Behaviour) -> Lab {
    start_lab([(profile, b)]).await
}

async fn probe(lab: &Lab, name: &str) -> Harness {
    let mut h = Harness::new();
    h.apply(vec![target(name, lab.url(name))]);
    h
}

/// The knobs of a named `mcp_exporter lab` scenario: the tests prove what operators can serve.
/// `b` served in the legacy era only: for the failure modes of legacy mechanisms (sessions and
/// their expiry, the GET stream, `ping`, notifications inside POST answers, session affinity).
/// The modern era's counterparts are in `tests/modern.rs`.
fn legacy(b: Behaviour) -> Behaviour {
    Behaviour {
        era: LabEra::Legacy,
        ..b
    }
}

fn scenario(name: &str) -> Behaviour {
    mcp_lab::scenarios::find(name)
        .expect("scenario exists")
        .behaviour
}

/// A lab with one profile and the probe on it.
async fn start(profile: &str, b: Behaviour) -> (Lab, Harness) {
    let lab = lab(profile, b).await;
    let h = probe(&lab, profile).await;
    (lab, h)
}

/// Each of `metrics` (per connection 0) is zero.
fn assert_zero(s: &Scrape, name: &str, metrics: &[&str]) {
    for m in metrics {
        assert_eq!(counter(s, m, name), 0.0, "{m} fired\n{}", s.text);
    }
}

/// Pagination signals stay quiet on the lab's well-behaved cursors.
fn assert_pagination_quiet(s: &Scrape, name: &str) {
    assert_zero(
        s,
        name,
        &[
            "mcp_probe_tools_list_cursor_errors_total",
            "mcp_probe_tools_list_loop_cap_hits_total",
            "mcp_probe_tools_list_repeated_cursors_total",
            "mcp_probe_tools_list_duplicate_tools_total",
        ],
    );
}

/// F7: 14 tools, page size 8 → two pages, all 14 in server view and cache.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f7_paginated_list_is_walked_to_the_end() {
    let lab = lab("kb", Behaviour::default()).await;
    let h = probe(&lab, "kb").await;
    let s = h
        .until("first walk complete", |s| {
            s.v("mcp_probe_tools", &[t("kb"), C0, ("view", "cache")]) == 14.0
        })
        .await;
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t("kb"), C0]), 2.0);
    assert_eq!(
        s.v("mcp_probe_tools", &[t("kb"), C0, ("view", "server")]),
        14.0
    );
    assert!(counter(&s, "mcp_probe_tools_list_requests_total", "kb") >= 2.0);
    assert_eq!(s.v("mcp_probe_up", &[t("kb")]), 1.0);
    assert_eq!(walks(&s, "kb", "initial"), 1.0);
    assert_pagination_quiet(&s, "kb");
}

/// A healthy server that churns and announces every change: the cache follows, no drift,
/// nothing unannounced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn healthy_churn_with_notifications_never_drifts() {
    let lab = lab("kb", Behaviour::default()).await;
    let h = probe(&lab, "kb").await;
    h.until("initial walk", |s| {
        walks(s, "kb", "initial") == 1.0
            && counter(s, "mcp_probe_notification_stream_up", "kb") == 1.0
    })
    .await;
    for round in 1..=3u32 {
        lab.churn();
        h.until("cache follows the change", |s| {
            counter(s, "mcp_probe_list_changed_notifications_total", "kb") >= f64::from(round)
                && s.count(
                    "mcp_probe_cache_refreshes_total",
                    &[t("kb"), C0, ("trigger", "notification")],
                ) >= f64::from(round)
                && s.v(
                    "mcp_probe_tools_list_fingerprint",
                    &[t("kb"), C0, ("view", "cache")],
                ) == s.v(
                    "mcp_probe_tools_list_fingerprint",
                    &[t("kb"), C0, ("view", "server")],
                )
        })
        .await;
    }
    let before = checks(&h.scrape(), "kb");
    let s = h
        .until("two audits after the last change", |s| {
            checks(s, "kb") >= before + 2.0
        })
        .await;
    for kind in ["missing", "extra", "changed"] {
        assert_eq!(drift(&s, "kb", kind), 0.0, "drift {kind}\n{}", s.text);
    }
    assert_zero(
        &s,
        "kb",
        &[
            "mcp_probe_unannounced_changes_total",
            "mcp_probe_list_changed_without_change_total",
            "mcp_probe_cache_consistency_check_failures_total",
        ],
    );
    assert_pagination_quiet(&s, "kb");
}

/// F1: the gateway drops list_changed. The audit finds `search_legacy` still cached (extra) and
/// `search_v2` unknown to the cache (missing), and counts the change as unannounced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f1_lost_notification_shows_drift_and_unannounced_change() {
    let lossy = scenario("notification-lost");
    let (lab, h) = start("lossy", lossy).await;
    h.until("initial walk", |s| walks(s, "lossy", "initial") == 1.0)
        .await;
    let s = churn_then_audits(&lab, &h, "lossy").await;
    let detected = |s: &Scrape| {
        drift(s, "lossy", "extra") == 1.0
            && drift(s, "lossy", "missing") == 1.0
            && counter(s, "mcp_probe_unannounced_changes_total", "lossy") >= 1.0
    };
    assert!(
        detected(&s),
        "drift and unannounced within the audits after the change\n{}",
        s.text
    );
    assert_eq!(
        counter(&s, "mcp_probe_list_changed_notifications_total", "lossy"),
        0.0
    );
    assert_eq!(
        s.v("mcp_probe_list_changed_capable", &[t("lossy"), C0]),
        1.0
    );
    assert_eq!(
        counter(&s, "mcp_probe_notification_stream_up", "lossy"),
        1.0
    );
    assert_eq!(drift(&s, "lossy", "changed"), 0.0);
    assert_pagination_quiet(&s, "lossy");
    // The stale cache stays stale: the probe never repairs it from an audit.
    let later = checks(&s, "lossy") + 2.0;
    let s = h
        .until("more audits", |s| checks(s, "lossy") >= later)
        .await;
    assert_eq!(drift(&s, "lossy", "extra"), 1.0);
    assert_eq!(
        counter(&s, "mcp_probe_unannounced_changes_total", "lossy"),
        1.0,
        "one change, counted once"
    );
}

/// F2: no listChanged capability, list changes anyway.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f2_no_capability_shows_capable_zero_and_drift() {
    let nocap = Behaviour {
        sse_responses: true,
        ..scenario("no-list-changed")
    };
    let (lab, h) = start("nocap", nocap).await;
    h.until("initial walk", |s| walks(s, "nocap", "initial") == 1.0)
        .await;
    let s = churn_then_audits(&lab, &h, "nocap").await;
    let detected = |s: &Scrape| {
        drift(s, "nocap", "extra") == 1.0
            && counter(s, "mcp_probe_unannounced_changes_total", "nocap") >= 1.0
    };
    assert!(
        detected(&s),
        "drift and unannounced within the audits after the change\n{}",
        s.text
    );
    assert_eq!(
        s.v("mcp_probe_list_changed_capable", &[t("nocap"), C0]),
        0.0
    );
    assert_eq!(
        counter(&s, "mcp_probe_list_changed_notifications_total", "nocap"),
        0.0
    );
    // Answers came as SSE streams: pages still complete.
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t("nocap"), C0]), 2.0);
    assert_pagination_quiet(&s, "nocap");
}

/// F3: listChanged declared, but GET answers 405: no notification stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f3_no_get_stream_shows_stream_down_while_capable() {
    let nostream = scenario("no-get-stream");
    let (_lab, h) = start("nostream", nostream).await;
    let s = h
        .until("session up and first audit", |s| {
            s.v("mcp_probe_up", &[t("nostream")]) == 1.0 && checks(s, "nostream") >= 1.0
        })
        .await;
    assert_eq!(
        s.v("mcp_probe_list_changed_capable", &[t("nostream"), C0]),
        1.0
    );
    assert_eq!(
        counter(&s, "mcp_probe_notification_stream_up", "nostream"),
        0.0
    );
    // 405 means "no stream here": not retried as if it were broken.
    assert_eq!(
        counter(
            &s,
            "mcp_probe_notification_stream_reconnects_total",
            "nostream"
        ),
        0.0
    );
    assert_eq!(drift(&s, "nostream", "extra"), 0.0);
    // The lab serves both eras: the probe speaks the modern one and asks what a 2025-era client
    // of the same URL hears — listChanged declared, GET 405: nothing, ever.
    let s = h
        .until("the legacy path checked", |s| {
            s.get("mcp_probe_legacy_path_hears_changes", &[t("nostream"), C0])
                .is_some()
        })
        .await;
    assert_eq!(
        s.v("mcp_probe_legacy_path_hears_changes", &[t("nostream"), C0]),
        0.0
    );
}

/// F6: the server ends the session (404 with our session id): a new session, and a re-walk.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f6_session_expiry_reinitializes_and_rewalks() {
    let lab = lab("kb", legacy(Behaviour::default())).await;
    let h = probe(&lab, "kb").await;
    h.until("initial walk", |s| walks(s, "kb", "initial") == 1.0)
        .await;
    lab.expire_sessions("kb");
    let s = h
        .until("expiry, new session, re-walk", |s| {
            counter(s, "mcp_probe_session_expiries_total", "kb") >= 1.0
                && counter(s, "mcp_probe_sessions_started_total", "kb") >= 2.0
                && s.count(
                    "mcp_probe_cache_refreshes_total",
                    &[t("kb"), C0, ("trigger", "reconnect")],
                ) >= 1.0
        })
        .await;
    assert!(lab.initializes("kb") >= 2);
    assert_eq!(
        walks(&s, "kb", "initial"),
        1.0,
        "the initial walk happens once per connection"
    );
    let s = h
        .until("session up again", |s| {
            s.v("mcp_probe_up", &[t("kb")]) == 1.0
        })
        .await;
    assert_eq!(drift(&s, "kb", "extra"), 0.0);
}

/// A session that expires while the list changed in between: the reconnect walk repairs the cache
/// even though no notification was delivered (the seed's "re-list after reconnect" rule).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconnect_relists_and_repairs_a_stale_cache() {
    let lossy = Behaviour {
        deliver_list_changed: false,
        ..Behaviour::default()
    };
    let (lab, h) = start("lossy", legacy(lossy)).await;
    h.until("initial walk", |s| walks(s, "lossy", "initial") == 1.0)
        .await;
    lab.churn();
    h.until("stale", |s| drift(s, "lossy", "extra") == 1.0)
        .await;
    lab.expire_sessions("lossy");
    let s = h
        .until("repaired by the reconnect walk", |s| {
            s.count(
                "mcp_probe_cache_refreshes_total",
                &[t("lossy"), C0, ("trigger", "reconnect")],
            ) >= 1.0
                && drift(s, "lossy", "extra") == 0.0
                && drift(s, "lossy", "missing") == 0.0
        })
        .await;
    assert_eq!(
        s.v(
            "mcp_probe_tools_list_fingerprint",
            &[t("lossy"), C0, ("view", "cache")]
        ),
        s.v(
            "mcp_probe_tools_list_fingerprint",
            &[t("lossy"), C0, ("view", "server")]
        )
    );
}

/// A target that refuses connections is down and counted, and does not delay a healthy one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_target_is_down_without_delaying_others() {
    let lab = lab("kb", Behaviour::default()).await;
    // A port that was just free: nothing listens there.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut h = Harness::new();
    h.apply(vec![
        target("kb", lab.url("kb")),
        target(
            "dead",
            url::Url::parse(&format!("http://{dead}/mcp")).unwrap(),
        ),
    ]);
    let s = h
        .until("healthy audits run while the other target fails", |s| {
            checks(s, "kb") >= 3.0
                && s.count(
                    "mcp_probe_session_failures_total",
                    &[t("dead"), ("reason", "connect")],
                ) >= 1.0
        })
        .await;
    assert_eq!(s.v("mcp_probe_up", &[t("dead")]), 0.0);
    assert_eq!(s.v("mcp_probe_up", &[t("kb")]), 1.0);
}

/// Single flight with a generation guard: three notifications, two of them while a slow refresh
/// walk is running, cause exactly one more walk; no two walks (refresh or audit) ever overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_mid_walk_cause_one_more_walk_never_two_racing() {
    let slow = Behaviour {
        page_delay: std::time::Duration::from_secs(1),
        ..Behaviour::default()
    };
    let (lab, h) = start("slow", slow).await;
    h.until("initial walk", |s| {
        s.v("mcp_probe_tools", &[t("slow"), C0, ("view", "cache")]) == 14.0
    })
    .await;
    lab.churn();
    // The notification walk has started; each of its two pages takes a second.
    h.until("notification walk started", |s| {
        walks(s, "slow", "notification") == 1.0
    })
    .await;
    // Two more redeploys while it runs, each announced on its own (the lab's stream coalesces
    // changes it has not sent yet, so wait for each notification before the next redeploy).
    for n in [2.0, 3.0] {
        lab.churn();
        h.until("notification received", |s| {
            counter(s, "mcp_probe_list_changed_notifications_total", "slow") == n
        })
        .await;
    }
    let s = h
        .until("cache caught up", |s| {
            s.count(
                "mcp_probe_cache_refreshes_total",
                &[t("slow"), C0, ("trigger", "notification")],
            ) == 2.0
        })
        .await;
    assert_eq!(
        walks(&s, "slow", "notification"),
        2.0,
        "two notifications mid-walk → one more walk"
    );
    let after = checks(&s, "slow") + 1.0;
    let s = h
        .until("an audit after the refreshes", |s| {
            checks(s, "slow") >= after
        })
        .await;
    assert_eq!(
        drift(&s, "slow", "missing") + drift(&s, "slow", "extra") + drift(&s, "slow", "changed"),
        0.0
    );
    assert_eq!(lab.tools_list_max_in_flight(), 1, "walks overlapped");
}

/// A server that announces changes inside the SSE answer to a POST, before the response (as
/// fastmcp does), and offers no GET stream: the interleaved notification still drives a refresh.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn notifications_interleaved_in_post_answers_are_honoured() {
    let inline = Behaviour {
        get_stream: false,
        sse_responses: true,
        list_changed_in_answers: true,
        ..Behaviour::default()
    };
    let (lab, h) = start("inline", legacy(inline)).await;
    h.until("initial walk", |s| walks(s, "inline", "initial") == 1.0)
        .await;
    lab.churn();
    let s = h
        .until("refreshed by the interleaved notification", |s| {
            counter(s, "mcp_probe_list_changed_notifications_total", "inline") >= 1.0
                && s.count(
                    "mcp_probe_cache_refreshes_total",
                    &[t("inline"), C0, ("trigger", "notification")],
                ) >= 1.0
                && s.v(
                    "mcp_probe_tools_list_fingerprint",
                    &[t("inline"), C0, ("view", "cache")],
                ) == s.v(
                    "mcp_probe_tools_list_fingerprint",
                    &[t("inline"), C0, ("view", "server")],
                )
        })
        .await;
    assert_eq!(
        counter(&s, "mcp_probe_notification_stream_up", "inline"),
        0.0
    );
    assert_eq!(s.v("mcp_probe_tools_list_pages", &[t("inline"), C0]), 2.0);
    assert_pagination_quiet(&s, "inline");
}

fn walk_failures(s: &Scrape, name: &str, trigger: &str, reason: &str) -> f64 {
    s.get(
        "mcp_probe_tools_list_walk_failures_total",
        &[t(name), C0, ("trigger", trigger), ("reason", reason)],
    )
    .unwrap_or(0.0)
}

/// F9: the second page hands back the first page's cursor: the walk stops at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f9_repeated_cursor_aborts_the_walk() {
    let b = scenario("repeated-cursor");
    let (_lab, h) = start("rep", b).await;
    let s = h
        .until("repeated cursor seen", |s| {
            counter(s, "mcp_probe_tools_list_repeated_cursors_total", "rep") >= 1.0
                && walk_failures(s, "rep", "initial", "repeated_cursor") >= 1.0
        })
        .await;
    assert_zero(
        &s,
        "rep",
        &[
            "mcp_probe_tools_list_loop_cap_hits_total",
            "mcp_probe_tools_list_cursor_errors_total",
        ],
    );
    assert_eq!(
        s.v("mcp_probe_tools", &[t("rep"), C0, ("view", "cache")]),
        0.0,
        "a broken walk never fills the cache"
    );
    assert_eq!(
        s.v("mcp_probe_up", &[t("rep")]),
        1.0,
        "the server is alive; its pagination is broken"
    );
}

/// F10: cursors that never end: the walk stops at max_pages.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f10_endless_cursors_hit_the_loop_cap() {
    let b = scenario("endless-cursors");
    let lab = lab("endless", b).await;
    let mut h = Harness::new();
    let mut cfg = target("endless", lab.url("endless"));
    cfg.settings.max_pages = 5;
    h.apply(vec![cfg]);
    let s = h
        .until("loop cap hit", |s| {
            counter(s, "mcp_probe_tools_list_loop_cap_hits_total", "endless") >= 1.0
                && walk_failures(s, "endless", "initial", "loop_cap") >= 1.0
        })
        .await;
    assert!(counter(&s, "mcp_probe_tools_list_requests_total", "endless") >= 5.0);
    assert_zero(
        &s,
        "endless",
        &[
            "mcp_probe_tools_list_repeated_cursors_total",
            "mcp_probe_tools_list_duplicate_tools_total",
        ],
    );
}

/// F13: same names, one new inputSchema, no notification: drift kind=changed only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f13_schema_change_without_notification_is_drift_changed() {
    let b = scenario("schema-change-unannounced");
    let (lab, h) = start("schema", b).await;
    h.until("initial walk", |s| walks(s, "schema", "initial") == 1.0)
        .await;
    let s = churn_then_audits(&lab, &h, "schema").await;
    let detected = |s: &Scrape| {
        drift(s, "schema", "changed") == 1.0
            && counter(s, "mcp_probe_unannounced_changes_total", "schema") >= 1.0
    };
    assert!(
        detected(&s),
        "changed drift and unannounced within the audits after the change\n{}",
        s.text
    );
    assert_eq!(drift(&s, "schema", "missing"), 0.0);
    assert_eq!(drift(&s, "schema", "extra"), 0.0);
    assert_eq!(
        s.v("mcp_probe_tools", &[t("schema"), C0, ("view", "server")]),
        14.0
    );
}

/// F14: list_changed without any change: counted as noise, never as drift.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f14_spurious_notifications_are_counted_as_without_change() {
    let b = Behaviour {
        spurious_list_changed: Some(std::time::Duration::from_millis(200)),
        ..scenario("spurious-notifications")
    };
    let (_lab, h) = start("noisy", b).await;
    let s = h
        .until("spurious notifications re-walked", |s| {
            counter(s, "mcp_probe_list_changed_without_change_total", "noisy") >= 2.0
                && checks(s, "noisy") >= 2.0
        })
        .await;
    for kind in ["missing", "extra", "changed"] {
        assert_eq!(drift(&s, "noisy", kind), 0.0);
    }
    assert_eq!(
        counter(&s, "mcp_probe_unannounced_changes_total", "noisy"),
        0.0
    );
}

/// A change made in two steps announces itself twice, back to back (the TypeScript SDK's
/// `remove()` then `enable()`): one re-walk answers both, and neither is counted as noise (F14).
/// In both eras: on the legacy GET stream and on the modern listen stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_in_two_steps_is_one_walk_and_no_noise() {
    let two_step = Behaviour {
        two_step_changes: true,
        ..Behaviour::default()
    };
    for (name, b) in [
        ("twostep", two_step.clone()),
        ("twostep_legacy", legacy(two_step)),
    ] {
        let (lab, h) = start(name, b).await;
        h.until("initial walk, stream up", |s| {
            walks(s, name, "initial") == 1.0
                && counter(s, "mcp_probe_notification_stream_up", name) == 1.0
        })
        .await;
        lab.churn();
        let s = h
            .until("both notifications heard, the cache follows", |s| {
                counter(s, "mcp_probe_list_changed_notifications_total", name) == 2.0
                    && s.count(
                        "mcp_probe_cache_refreshes_total",
                        &[t(name), C0, ("trigger", "notification")],
                    ) >= 1.0
            })
            .await;
        let later = checks(&s, name) + 2.0;
        let s = h
            .until("two audits later", |s| checks(s, name) >= later)
            .await;
        assert_eq!(
            walks(&s, name, "notification"),
            1.0,
            "{name}: one walk\n{}",
            s.text
        );
        assert_eq!(
            counter(&s, "mcp_probe_list_changed_without_change_total", name),
            0.0,
            "{name}: no noise"
        );
        assert_eq!(drift(&s, name, "extra"), 0.0, "{name}");
    }
}

/// F15: alive but too slow: pings time out, the target is down, the session is replaced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f15_slow_server_is_down_with_ping_timeouts() {
    let b = legacy(scenario("slow-server"));
    let lab = lab("slow", b).await;
    let mut h = Harness::new();
    let mut cfg = target("slow", lab.url("slow"));
    cfg.settings.request_timeout = std::time::Duration::from_millis(300);
    h.apply(vec![cfg]);
    let s = h
        .until("ping timeouts and a new session", |s| {
            s.get(
                "mcp_probe_request_failures_total",
                &[t("slow"), C0, ("method", "ping"), ("reason", "timeout")],
            )
            .unwrap_or(0.0)
                >= 3.0
                && counter(s, "mcp_probe_sessions_started_total", "slow") >= 2.0
        })
        .await;
    assert!(counter(&s, "mcp_probe_ping_failures_total", "slow") >= 3.0);
    let s = h
        .until("down", |s| s.v("mcp_probe_up", &[t("slow")]) == 0.0)
        .await;
    assert_eq!(
        counter(
            &s,
            "mcp_probe_cache_consistency_check_failures_total",
            "slow"
        ),
        counter(&s, "mcp_probe_cache_consistency_checks_total", "slow")
    );
}

/// F4: a proxy closes the notification stream, and the backend changes while it is down: the
/// stream is re-opened and the re-walk after the gap repairs the cache without any notification.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f4_stream_closed_by_proxy_rewalks_after_the_gap() {
    // Modern only: the legacy-path watch of a dual lab keeps a GET stream of its own, whose cut
    // would redeploy the lab again while the probe's listen stream is open to announce it.
    let b = Behaviour {
        stream_close_after: Some(std::time::Duration::from_millis(700)),
        era: LabEra::Modern,
        ..scenario("stream-cut-by-proxy")
    };
    let (lab, h) = start("proxied", b).await;
    let s = h
        .until("stream re-opened and gap re-walked", |s| {
            counter(
                s,
                "mcp_probe_notification_stream_reconnects_total",
                "proxied",
            ) >= 1.0
                && s.count(
                    "mcp_probe_cache_refreshes_total",
                    &[t("proxied"), C0, ("trigger", "stream_gap")],
                ) >= 1.0
        })
        .await;
    assert!(lab.generation() >= 1, "the backend changed during the gap");
    assert_eq!(
        counter(&s, "mcp_probe_list_changed_notifications_total", "proxied"),
        0.0
    );
    assert_eq!(
        walks(&s, "proxied", "reconnect"),
        0.0,
        "the session itself survived"
    );
}

/// F5: the re-walk after a notification fails (HTTP 503): counted, then retried until it works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f5_failed_rewalk_after_notification_is_counted_and_retried() {
    let b = scenario("relist-fails");
    let (lab, h) = start("flaky", b).await;
    h.until("initial walk", |s| walks(s, "flaky", "initial") == 1.0)
        .await;
    lab.churn();
    let s = h
        .until("refresh failed, then succeeded", |s| {
            s.count(
                "mcp_probe_cache_refresh_failures_total",
                &[t("flaky"), C0, ("trigger", "notification")],
            ) >= 1.0
                && walk_failures(s, "flaky", "notification", "http_5xx") >= 1.0
                && s.count(
                    "mcp_probe_cache_refreshes_total",
                    &[t("flaky"), C0, ("trigger", "notification")],
                ) >= 1.0
                && drift(s, "flaky", "extra") == 0.0
                && drift(s, "flaky", "missing") == 0.0
        })
        .await;
    assert_eq!(
        s.v(
            "mcp_probe_tools_list_fingerprint",
            &[t("flaky"), C0, ("view", "cache")]
        ),
        s.v(
            "mcp_probe_tools_list_fingerprint",
            &[t("flaky"), C0, ("view", "server")]
        )
    );
    assert_eq!(s.v("mcp_probe_up", &[t("flaky")]), 1.0);
}

/// F8: two instances behind a round robin, each knowing only its own cursors: page 2 is rejected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f8_cursor_rejected_by_another_instance_is_a_cursor_error() {
    let b = scenario("cursor-rejected");
    let (_lab, h) = start("lb", b).await;
    let s = h
        .until("cursor errors", |s| {
            counter(s, "mcp_probe_tools_list_cursor_errors_total", "lb") >= 2.0
                && walk_failures(s, "lb", "initial", "jsonrpc_error") >= 1.0
        })
        .await;
    assert_zero(
        &s,
        "lb",
        &[
            "mcp_probe_tools_list_repeated_cursors_total",
            "mcp_probe_tools_list_loop_cap_hits_total",
        ],
    );
    assert_eq!(s.v("mcp_probe_up", &[t("lb")]), 1.0);
}

/// F11: a tool inserted at the front between pages: offset cursors repeat a name on page 2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f11_offset_cursors_under_churn_show_duplicate_tools() {
    let b = scenario("offset-cursor-churn");
    let (_lab, h) = start("churny", b).await;
    let s = h
        .until("duplicates counted", |s| {
            counter(s, "mcp_probe_tools_list_duplicate_tools_total", "churny") >= 2.0
                && walks(s, "churny", "initial") == 1.0
        })
        .await;
    assert_eq!(
        s.v("mcp_probe_tools", &[t("churny"), C0, ("view", "cache")]),
        14.0
    );
    assert_zero(
        &s,
        "churny",
        &[
            "mcp_probe_tools_list_cursor_errors_total",
            "mcp_probe_tools_list_repeated_cursors_total",
        ],
    );
}

/// F12: two instances behind one URL serve different lists: with two connections, their
/// fingerprints differ while each connection on its own is consistent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn f12_instances_disagree_across_connections() {
    let b = legacy(scenario("split-instances"));
    let lab = lab("split", b).await;
    let mut h = Harness::new();
    let mut cfg = target("split", lab.url("split"));
    cfg.settings.connections = 2;
    h.apply(vec![cfg]);
    let fp = |s: &Scrape, c: &str| {
        s.v(
            "mcp_probe_tools_list_fingerprint",
            &[t("split"), ("connection", c), ("view", "server")],
        )
    };
    let s = h
        .until("both connections walked", |s| {
            s.v(
                "mcp_probe_cache_consistency_checks_total",
                &[t("split"), ("connection", "1")],
            ) >= 1.0
                && checks(s, "split") >= 1.0
        })
        .await;
    assert_ne!(fp(&s, "0"), fp(&s, "1"), "instances serve different lists");
    for c in ["0", "1"] {
        for kind in ["missing", "extra", "changed"] {
            assert_eq!(
                s.v(
                    "mcp_probe_cache_drift_tools",
                    &[t("split"), ("connection", c), ("kind", kind)]
                ),
                0.0
            );
        }
    }
}
