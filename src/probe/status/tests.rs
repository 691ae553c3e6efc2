use std::time::Duration;

use super::*;
use crate::config::{Endpoint, Expect, ProbeConfig, ProtocolChoice, TargetConfig};
use crate::probe::Trigger;
use mcp_client::listing::items::{Drift, ItemSet};
use mcp_client::mcp::{Era, ServerInfo};
use mcp_client::text::is_hostile;

pub(crate) fn target() -> TargetConfig {
    TargetConfig {
        name: "kb".into(),
        endpoint: Endpoint::http("https://user:pw@kb.example/mcp?key=k".parse().unwrap()),
        protocol_version: ProtocolChoice::Auto,
        headers: vec![],
        settings: crate::config::TargetSettings::default(),
        probes: vec![ProbeConfig {
            tool: "kb_stats".into(),
            arguments: Default::default(),
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(5),
            expect: Expect::default(),
            allow_side_effects: false,
        }],
        http: Default::default(),
        labels: Default::default(),
        pins: None,
    }
}

fn named(name: &str, connections: u16, probes: bool) -> TargetConfig {
    let mut t = target();
    t.name = name.into();
    t.settings.connections = connections;
    if !probes {
        t.probes.clear();
    }
    t
}

fn info(list_changed: bool) -> ServerInfo {
    ServerInfo {
        protocol_version: "2025-11-25".into(),
        name: "kb-lab".into(),
        version: "0.1.0".into(),
        tools: true,
        list_changed,
        ..Default::default()
    }
}

/// Session open, stream open, initial walk complete, cache replaced, no drift: healthy.
fn healthy(c: &ConnStatusHandle) {
    healthy_declaring(c, true);
}

/// A working session whose server declares `listChanged` or not, walked after it opened.
fn healthy_declaring(c: &ConnStatusHandle, list_changed: bool) {
    c.session_opened(Era::Legacy, &info(list_changed), Trigger::Initial);
    c.state(ConnState::Up); // the connection confirms it
    c.stream(true, "GET stream open");
    c.walk_finished(Trigger::Initial, Ok((2, 14)), Duration::from_millis(3));
    c.cache_replaced(Trigger::Initial, &ItemSet::new());
    c.drift(&Drift::default());
}

fn stale_drift() -> Drift {
    Drift {
        extra: vec!["search_legacy".into()],
        missing: vec!["search_v2".into()],
        ..Drift::default()
    }
}

/// The cache falls behind a legacy server that declares `listChanged` or not: a legacy client's
/// contract holds a differing cache stale whatever was declared.
fn fall_behind(c: &ConnStatusHandle, declared: bool) {
    c.drift(&stale_drift());
    let contract = crate::probe::contract::Contract::new(Era::Legacy, declared, Duration::ZERO);
    c.contract(&contract, true);
}

fn snap_target(board: &StatusBoard, name: &str) -> TargetSnapshot {
    board
        .snapshot()
        .targets
        .into_iter()
        .find(|t| t.name == name)
        .expect("target")
}

#[test]
fn events_are_bounded_and_urls_redacted() {
    let board = StatusBoard::default();
    let t = board.add(&target());
    let c = t.connection(0);
    for i in 0..(EVENTS_PER_CONNECTION + 10) {
        c.event("list_changed", format!("n{i}"));
    }
    c.event("walk_failed", "x".repeat(10_000));
    let snap = board.snapshot();
    let conn = &snap.targets[0].connections[0];
    assert_eq!(conn.events.len(), EVENTS_PER_CONNECTION);
    assert_eq!(conn.events[0].detail, "n11");
    assert!(conn.events.back().unwrap().detail.len() <= MAX_DETAIL);
    // The latest of each kind outlives the timeline.
    assert_eq!(conn.last("list_changed").unwrap().detail, "n109");
    let json = serde_json::to_string(&snap).unwrap();
    assert!(!json.contains("pw@") && !json.contains("key=k"), "{json}");
}

#[test]
fn drift_names_are_capped_and_changes_logged_once() {
    let board = StatusBoard::default();
    let c = board.add(&target()).connection(0);
    let drift = Drift {
        extra: (0..150).map(|i| format!("t{i}")).collect(),
        ..Drift::default()
    };
    c.drift(&drift);
    c.drift(&drift);
    let conn = &board.snapshot().targets[0].connections[0];
    assert_eq!(conn.drift.extra.len(), MAX_DRIFT_NAMES);
    assert_eq!(conn.drift.omitted, 50);
    assert_eq!(conn.drift.counts.extra, 150);
    assert_eq!(conn.events.iter().filter(|e| e.kind == "drift").count(), 1);
}

#[test]
fn probe_flips_are_logged_steady_results_are_not() {
    let board = StatusBoard::default();
    let c = board.add(&target()).connection(0);
    let ms = Duration::from_millis(3);
    c.probe(0, ms, Ok(()));
    c.probe(0, ms, Ok(()));
    c.probe(0, ms, Err(("unknown_tool", "gone".into())));
    c.probe(0, ms, Err(("unknown_tool", "gone".into())));
    let snap = board.snapshot();
    let kinds: Vec<_> = snap.targets[0].connections[0]
        .events
        .iter()
        .map(|e| e.kind)
        .collect();
    assert_eq!(kinds, ["probe_passed", "probe_failed"]);
    assert_eq!(snap.targets[0].probes[0].reason, Some("unknown_tool"));
}

/// Every string in a JSON value, keys included.
fn strings(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) => out.push(s.clone()),
        serde_json::Value::Array(a) => a.iter().for_each(|v| strings(v, out)),
        serde_json::Value::Object(o) => o.iter().for_each(|(k, v)| {
            out.push(k.clone());
            strings(v, out)
        }),
        _ => {}
    }
}

/// 1 MiB with NUL, ESC, BEL and U+202E in it.
fn evil(tag: &str) -> String {
    format!("{tag}\0\x1b[2J\x07\u{202e}{}", "x".repeat(1 << 20))
}

/// Feed every server-supplied string the board keeps a hostile value.
pub(crate) fn hostile_board() -> StatusBoard {
    let board = StatusBoard::default();
    let c = board.add(&target()).connection(0);
    let server = ServerInfo {
        protocol_version: evil("pv"),
        name: evil("name"),
        version: evil("version"),
        tools: true,
        list_changed: true,
        ..Default::default()
    };
    c.session_opened(Era::Legacy, &server, Trigger::Initial);
    c.state(ConnState::Up); // the connection confirms it
    c.stream(true, &evil("stream"));
    c.walk_finished(
        Trigger::Initial,
        Err((3, evil("walk"))),
        Duration::from_millis(1),
    );
    c.event("ping_failed", evil("ping"));
    c.drift(&Drift {
        missing: (0..7).map(|i| evil(&format!("m{i}"))).collect(),
        extra: (0..7).map(|i| evil(&format!("e{i}"))).collect(),
        changed: vec!["ok\0\x1b\x07\u{202e}short".into()],
    });
    c.probe(
        0,
        Duration::from_millis(1),
        Err(("tool_error", evil("probe"))),
    );
    c.session_ended("session_closed", evil("closed"));
    board
}

#[test]
fn server_strings_are_bounded_and_neutralised_where_they_are_stored() {
    let board = hostile_board();
    let snap = board.snapshot();
    let json = serde_json::to_string(&snap).unwrap();
    assert!(json.len() < 64 * 1024, "{} bytes", json.len());
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let mut all = Vec::new();
    strings(&v, &mut all);
    for s in &all {
        assert!(!s.chars().any(is_hostile), "{s:?}");
        assert!(
            s.len() <= MAX_DETAIL * 2,
            "{} bytes: {}…",
            s.len(),
            &s[..80]
        );
    }
    let conn = &snap.targets[0].connections[0];
    assert!(conn.drift.missing.iter().all(|n| n.len() <= MAX_NAME));
    assert!(
        conn.drift.missing[0].ends_with(&format!("…({} bytes)", evil("m0").len())),
        "{}",
        conn.drift.missing[0]
    );
    assert_eq!(conn.drift.changed, ["ok\\u{0}\\u{1b}\\u{7}\\u{202e}short"]);
    let probe = snap.targets[0].probes[0].detail.as_deref().unwrap();
    assert!(
        probe.starts_with("probe\\u{0}\\u{1b}[2J\\u{7}\\u{202e}xx"),
        "{probe}"
    );
}

fn by_name<'a>(snap: &'a Snapshot, name: &str) -> &'a TargetSnapshot {
    snap.targets.iter().find(|t| t.name == name).unwrap()
}

#[test]
fn severity_orders_targets_worst_first_and_says_why() {
    let board = StatusBoard::default();
    // healthy
    healthy(&board.add(&named("a_healthy", 1, false)).connection(0));
    // down: the session fails to open
    board
        .add(&named("b_down", 1, false))
        .connection(0)
        .session_ended("session_failed", "connect: connection refused");
    // not ready: the probe fails
    let nr = board.add(&named("c_not_ready", 1, true)).connection(0);
    healthy(&nr);
    nr.probe(0, Duration::ZERO, Err(("unknown_tool", "gone".into())));
    // stale and ready: no listChanged capability
    // (The session is opened before the walk: a second session opened after it would make the
    // walk an earlier session's whenever the clock ticks in between.)
    let st = board.add(&named("d_stale", 1, false)).connection(0);
    healthy_declaring(&st, false);
    fall_behind(&st, false);
    // no promise: a 2026-07-28 server with no listChanged and ttlMs 0; a cached copy differs
    let np = board.add(&named("f_no_promise", 1, false)).connection(0);
    np.session_opened(Era::Modern, &info(false), Trigger::Initial);
    np.state(ConnState::Up);
    np.walk_finished(Trigger::Initial, Ok((2, 14)), Duration::from_millis(3));
    np.cache_replaced(Trigger::Initial, &ItemSet::new());
    np.drift(&stale_drift());
    np.contract(
        &crate::probe::contract::Contract::new(Era::Modern, false, Duration::ZERO),
        false,
    );
    // at risk: GET stream 405, cache current
    let ar = board.add(&named("e_at_risk", 1, false)).connection(0);
    healthy(&ar);
    ar.stream(false, "server offers no GET stream (405)");

    let snap = board.snapshot();
    let order: Vec<(&str, Severity)> = snap
        .targets
        .iter()
        .map(|t| (t.name.as_str(), t.severity))
        .collect();
    assert_eq!(
        order,
        [
            ("b_down", Severity::Down),
            ("c_not_ready", Severity::NotReady),
            ("d_stale", Severity::Stale),
            ("e_at_risk", Severity::AtRisk),
            ("f_no_promise", Severity::NoPromise),
            ("a_healthy", Severity::Healthy),
        ]
    );
    let np = by_name(&snap, "f_no_promise");
    assert!(np.up && np.ready && !np.stale, "{np:?}");
    assert_eq!(
        np.causes,
        [format!(
            "{}; a copy cached since the last announced change differs now by 1 extra, 1 missing",
            crate::probe::contract::NO_PROMISE
        )]
    );
    let by = |n: &str| snap.targets.iter().find(|t| t.name == n).unwrap();
    assert_eq!(
        by("b_down").causes,
        ["session failing: connect: connection refused"]
    );
    assert!(!by("b_down").up && !by("b_down").ready);
    assert_eq!(
        by("c_not_ready").causes,
        ["probe kb_stats failing: unknown_tool"]
    );
    let d = by("d_stale");
    assert!(d.up && d.ready && d.stale, "{d:?}");
    assert_eq!(
        d.causes,
        ["no listChanged capability; cache differs: 1 extra, 1 missing"]
    );
    assert_eq!(
        d.since,
        d.connections[0].contract.broken_since.unwrap(),
        "stale since the promise broke"
    );
    assert_eq!(
        by("e_at_risk").causes,
        ["no notification stream: server offers no GET stream (405)"]
    );
    assert!(by("a_healthy").causes.is_empty());
}

#[test]
fn causes_name_failed_relists_and_unannounced_changes() {
    let board = StatusBoard::default();
    let c = board.add(&named("kb", 1, false)).connection(0);
    healthy(&c);
    c.list_changed(1);
    for _ in 0..2 {
        c.walk_finished(
            Trigger::Notification,
            Err((1, "http_status: HTTP 503".into())),
            Duration::ZERO,
        );
    }
    let t = snap_target(&board, "kb");
    assert_eq!(t.severity, Severity::NotReady);
    let cause = &t.causes[0];
    assert!(
        cause.starts_with("2 re-lists failed since list_changed ")
            && cause.ends_with(" s ago: http_status: HTTP 503"),
        "{cause}"
    );
    // The re-list succeeds: healthy again.
    c.walk_finished(Trigger::Notification, Ok((2, 14)), Duration::ZERO);
    c.cache_replaced(Trigger::Notification, &ItemSet::new());
    assert_eq!(snap_target(&board, "kb").severity, Severity::Healthy);

    // The list changes without a notification; the grace period runs out.
    fall_behind(&c, true);
    let t = snap_target(&board, "kb");
    assert_eq!(
        t.causes,
        ["cache behind the server, refresh pending; cache differs: 1 extra, 1 missing"]
    );
    c.event("unannounced_change", "no list_changed within 3s");
    let t = snap_target(&board, "kb");
    assert!(
        t.causes[0].starts_with("unannounced change 0 s ago; cache differs"),
        "{:?}",
        t.causes
    );
}

#[test]
fn the_since_fact_is_sticky_across_the_timeline_and_repeated_failures() {
    let board = StatusBoard::default();
    let c = board.add(&named("kb", 1, false)).connection(0);
    healthy(&c);
    c.session_ended("session_closed", "transport: reset");
    let down_since = snap_target(&board, "kb").since;
    std::thread::sleep(Duration::from_millis(5));
    for i in 0..(EVENTS_PER_CONNECTION + 5) {
        c.session_ended("session_failed", format!("connect: refused {i}"));
    }
    let t = snap_target(&board, "kb");
    assert_eq!(t.severity, Severity::Down);
    assert_eq!(t.since, down_since, "down since the first failure");
    assert!(
        !t.connections[0]
            .events
            .iter()
            .any(|e| e.kind == "session_closed"),
        "the first failure scrolled out of the timeline"
    );
    assert_eq!(
        t.causes,
        [format!(
            "session failing: connect: refused {}",
            EVENTS_PER_CONNECTION + 4
        )]
    );
}

#[test]
fn a_probe_counts_as_passing_only_on_the_current_session() {
    let board = StatusBoard::default();
    let c = board.add(&named("kb", 1, true)).connection(0);
    healthy(&c);
    c.probe(0, Duration::ZERO, Ok(()));
    assert!(snap_target(&board, "kb").ready);
    std::thread::sleep(Duration::from_millis(5));
    c.session_ended("session_expired", "HTTP 404 on the session id");
    c.session_opened(Era::Legacy, &info(true), Trigger::Reconnect);
    c.state(ConnState::Up); // the connection confirms it
    let t = snap_target(&board, "kb");
    assert!(t.up && !t.ready, "{t:?}");
    assert_eq!(
        t.causes[0],
        "first tools/list walk on this session not complete yet"
    );
    c.stream(true, "GET stream open");
    c.walk_finished(Trigger::Reconnect, Ok((2, 14)), Duration::ZERO);
    let t = snap_target(&board, "kb");
    assert!(t.up && !t.ready, "{t:?}");
    assert_eq!(t.causes, ["probe kb_stats not run on this session yet"]);
    c.probe(0, Duration::ZERO, Ok(()));
    assert!(snap_target(&board, "kb").ready);
}

#[test]
fn the_same_cause_on_several_connections_is_one_entry() {
    let board = StatusBoard::default();
    let t = board.add(&named("kb", 3, false));
    for i in 0..3 {
        let c = t.connection(i);
        healthy(&c);
        c.session_opened(Era::Legacy, &info(false), Trigger::Initial);
        c.state(ConnState::Up); // the connection confirms it
    }
    t.connection(2)
        .session_ended("session_failed", "connect: refused");
    let s = snap_target(&board, "kb");
    assert_eq!(s.severity, Severity::AtRisk);
    assert_eq!(
        s.causes,
        [
            "connections 0, 1: no listChanged capability",
            "connection 2: session failing: connect: refused"
        ]
    );
}

#[test]
fn an_unconfirmed_session_is_not_up_until_a_request_passes() {
    let board = StatusBoard::default();
    let c = board.add(&named("kb", 1, false)).connection(0);
    c.session_opened(Era::Legacy, &info(true), Trigger::Reconnect);
    let t = snap_target(&board, "kb");
    assert!(!t.up);
    assert_eq!(t.causes, ["session opened, waiting for its first answer"]);
    c.state(ConnState::Up);
    assert!(snap_target(&board, "kb").up);
}

/// 40 healthy targets of 2 connections with 100 events of 300 quotes each (several MiB as JSON
/// or HTML), and one stale target.
pub(crate) fn big_board() -> StatusBoard {
    let board = StatusBoard::default();
    for i in 0..40 {
        let name = format!("t{i:02}");
        let t = board.add(&named(&name, 2, false));
        for k in 0..2 {
            let c = t.connection(k);
            healthy(&c);
            for e in 0..EVENTS_PER_CONNECTION {
                c.event("ping_failed", format!("{e} {}", "\"".repeat(MAX_DETAIL)));
            }
        }
    }
    let st = board.add(&named("stale", 1, false)).connection(0);
    healthy(&st);
    fall_behind(&st, true);
    board
}

#[test]
fn json_over_the_cap_trims_details_then_drops_the_healthiest() {
    let board = big_board();
    let whole = serde_json::to_string(&board.snapshot()).unwrap();
    assert!(whole.len() > 3 * MAX_RESPONSE_BYTES, "{}", whole.len());
    let json = board.snapshot().to_json(MAX_RESPONSE_BYTES);
    assert!(json.len() <= MAX_RESPONSE_BYTES, "{}", json.len());
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    assert_eq!(v["truncated"], true);
    let targets = v["targets"].as_array().unwrap();
    // The stale target sorts first and keeps its full form.
    assert_eq!(targets[0]["name"], "stale");
    assert_eq!(targets[0]["trimmed"], false);
    assert!(
        v["targets_trimmed"].as_u64().unwrap() > 0,
        "{}",
        v["targets_trimmed"]
    );
    assert_eq!(
        targets.len() as u64 + v["targets_omitted"].as_u64().unwrap(),
        41
    );
    let light = targets.iter().find(|t| t["trimmed"] == true).unwrap();
    assert!(light["connections"][0]["events"].as_array().unwrap().len() <= 5);
    assert!(light["causes"].is_array() && light["severity"].is_string());

    // Small enough: sent whole, unmarked.
    let small = StatusBoard::default();
    healthy(&small.add(&named("kb", 1, false)).connection(0));
    let v: serde_json::Value =
        serde_json::from_str(&small.snapshot().to_json(MAX_RESPONSE_BYTES)).unwrap();
    assert_eq!(v["truncated"], false);
    assert_eq!(v["targets"][0]["trimmed"], false);
}

#[test]
fn json_drops_the_healthiest_targets_when_even_light_forms_do_not_fit() {
    let json = big_board().snapshot().to_json(64 * 1024);
    assert!(json.len() <= 64 * 1024, "{}", json.len());
    let v: serde_json::Value = serde_json::from_str(&json).expect("valid JSON");
    let kept = v["targets"].as_array().unwrap().len() as u64;
    assert!(
        kept >= 1 && v["targets_omitted"].as_u64().unwrap() == 41 - kept,
        "{v}"
    );
    assert_eq!(v["targets"][0]["name"], "stale");
}

/// A change with every finding it may show, each value as long as may be kept.
fn heavy_change(i: usize) -> mcp_client::listing::changes::ToolChange {
    use mcp_client::listing::changes::{Class, Finding, ToolChange};
    let value = Some("v".repeat(160));
    ToolChange {
        tool: format!("tool_{i}"),
        change: "breaking",
        findings: (0..20)
            .map(|f| Finding {
                path: format!("$.inputSchema.properties.p{f}.type"),
                rule: "type_narrowed",
                class: Class::Breaking,
                before: value.clone(),
                after: value.clone(),
            })
            .collect(),
        more: 0,
        description_changed: false,
    }
}

#[test]
fn a_large_fleet_keeps_short_histories_a_small_one_long_ones() {
    use super::history::{HISTORY_BYTES, MIN_SHARE};
    let board = StatusBoard::default();
    let small = board.add(&named("small", 1, false)).connection(0);
    let churn = |c: &ConnStatusHandle| {
        for i in 0..EVENTS_PER_CONNECTION {
            c.event(
                "list_changed",
                format!("notification {i} {}", "x".repeat(200)),
            );
            c.tool_changes(vec![heavy_change(i)]);
        }
    };
    let kept = |name: &str| {
        let conn = snap_target(&board, name).connections.remove(0);
        (
            conn.events.len(),
            conn.events.bytes(),
            conn.changes.len(),
            conn.changes.bytes(),
        )
    };
    churn(&small);
    let (events, _, changes, _) = kept("small");
    assert_eq!(
        events, EVENTS_PER_CONNECTION,
        "one connection: its whole timeline"
    );
    assert!(changes > 1, "and several changes");

    // A fleet past HISTORY_BYTES / MIN_SHARE connections: every one gets the least share.
    let big = u16::try_from(HISTORY_BYTES / MIN_SHARE + 1).unwrap();
    board.add(&named("fleet", big, false));
    churn(&small);
    let (events, event_bytes, changes, change_bytes) = kept("small");
    assert!(
        event_bytes <= MIN_SHARE / 2,
        "{event_bytes} bytes of events"
    );
    assert!(events >= 4, "a few events still: {events}");
    assert_eq!(changes, 1, "the newest change is kept whatever it weighs");
    assert!(change_bytes > MIN_SHARE / 2, "{change_bytes}: it is heavy");
    let newest = &snap_target(&board, "small").connections[0].changes[0];
    assert_eq!(
        newest.change.tool,
        format!("tool_{}", EVENTS_PER_CONNECTION - 1)
    );

    // The fleet leaves: the share grows back.
    board.remove("fleet");
    churn(&small);
    assert_eq!(kept("small").0, EVENTS_PER_CONNECTION);
}
