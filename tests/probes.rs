//! Functional probes end to end against the lab: a passing read-only probe makes the target
//! ready; each failure class shows under its reason; the side-effect guard never lets a
//! non-read-only tool be called; the status snapshot carries the same verdicts.

mod common;

use std::time::Duration;

use common::{Harness, Scrape, start_lab, target};
use mcp_exporter::config::{Expect, ProbeConfig};
use mcp_lab::{Behaviour, Lab};

async fn lab(b: Behaviour) -> Lab {
    start_lab([("kb", b)]).await
}

fn probe(tool: &str) -> ProbeConfig {
    ProbeConfig {
        tool: tool.into(),
        arguments: Default::default(),
        interval: Duration::from_millis(300),
        timeout: Duration::from_secs(2),
        expect: Expect::default(),
        allow_side_effects: false,
    }
}

fn probed(lab: &Lab, probes: Vec<ProbeConfig>) -> Harness {
    let mut h = Harness::new();
    let mut t = target("kb", lab.url("kb"));
    t.probes = probes;
    h.apply(vec![t]);
    h
}

fn success(s: &Scrape, tool: &str) -> Option<f64> {
    s.get(
        "mcp_probe_tool_probe_success",
        &[("target", "kb"), ("tool", tool)],
    )
}

fn failures(s: &Scrape, tool: &str, reason: &str) -> f64 {
    s.get(
        "mcp_probe_tool_probe_failures_total",
        &[("target", "kb"), ("tool", tool), ("reason", reason)],
    )
    .unwrap_or(0.0)
}

fn ready(s: &Scrape) -> Option<f64> {
    s.get("mcp_probe_ready", &[("target", "kb")])
}

#[tokio::test]
async fn a_passing_read_only_probe_makes_the_target_ready() {
    let lab = lab(Behaviour::default()).await;
    let mut p = probe("kb_stats");
    p.expect = Expect {
        text_contains: Some("ok".into()),
        structured: [("/status".to_string(), serde_json::json!("ok"))].into(),
    };
    let h = probed(&lab, vec![p]);
    let s = h
        .until("kb_stats passes and kb is ready", |s| {
            success(s, "kb_stats") == Some(1.0) && ready(s) == Some(1.0)
        })
        .await;
    assert!(lab.tools_calls() >= 1);
    assert!(
        s.get(
            "mcp_probe_requests_total",
            &[("target", "kb"), ("method", "tools/call")]
        )
        .is_some_and(|v| v >= 1.0)
    );
    let status = h.supervisor.status().snapshot();
    let p = &status.targets[0].probes[0];
    assert!(p.success && p.last_run_at.is_some(), "{p:?}");
}

#[tokio::test]
async fn the_side_effect_guard_never_calls_a_tool_that_is_not_read_only() {
    let lab = lab(Behaviour::default()).await;
    // kb_write_document is annotated readOnlyHint: false.
    let h = probed(&lab, vec![probe("kb_write_document")]);
    let s = h
        .until("the probe is refused by the guard", |s| {
            failures(s, "kb_write_document", "side_effect_guard") >= 2.0
        })
        .await;
    assert_eq!(lab.tools_calls(), 0, "a guarded tool was called");
    assert_eq!(success(&s, "kb_write_document"), Some(0.0));
    assert_eq!(
        ready(&s),
        Some(0.0),
        "a refused probe keeps the target unready"
    );
    let status = h.supervisor.status().snapshot();
    assert_eq!(
        status.targets[0].probes[0].reason,
        Some("side_effect_guard")
    );
}

#[tokio::test]
async fn allow_side_effects_lets_the_probe_call_it() {
    let lab = lab(Behaviour::default()).await;
    let mut p = probe("kb_write_document");
    p.allow_side_effects = true;
    let h = probed(&lab, vec![p]);
    h.until("the allowed probe passes", |s| {
        success(s, "kb_write_document") == Some(1.0)
    })
    .await;
    assert!(lab.tools_calls() >= 1);
}

#[tokio::test]
async fn a_listed_tool_with_a_broken_backend_is_a_tool_error() {
    let lab = lab(Behaviour {
        broken_tools: vec!["kb_stats"],
        ..Behaviour::default()
    })
    .await;
    let h = probed(&lab, vec![probe("kb_stats")]);
    let s = h
        .until("tool_error counted", |s| {
            failures(s, "kb_stats", "tool_error") >= 1.0
        })
        .await;
    // Listed, up, and still not usable: liveness and readiness disagree.
    assert_eq!(s.get("mcp_probe_up", &[("target", "kb")]), Some(1.0));
    assert_eq!(ready(&s), Some(0.0));
}

#[tokio::test]
async fn an_unmet_expectation_is_reported_as_such() {
    let lab = lab(Behaviour::default()).await;
    let mut p = probe("kb_stats");
    p.expect.structured = [("/status".to_string(), serde_json::json!("degraded"))].into();
    let h = probed(&lab, vec![p]);
    h.until("expectation counted", |s| {
        failures(s, "kb_stats", "expectation") >= 1.0 && success(s, "kb_stats") == Some(0.0)
    })
    .await;
}

#[tokio::test]
async fn a_retired_tool_is_an_unknown_tool() {
    let lab = lab(Behaviour::default()).await;
    let h = probed(&lab, vec![probe("search_legacy"), probe("kb_stats")]);
    h.until("search_legacy passes before the redeploy", |s| {
        success(s, "search_legacy") == Some(1.0)
    })
    .await;
    lab.churn();
    let s = h
        .until("search_legacy is unknown after the redeploy", |s| {
            failures(s, "search_legacy", "unknown_tool") >= 1.0
        })
        .await;
    assert_eq!(success(&s, "kb_stats"), Some(1.0));
    assert_eq!(ready(&s), Some(0.0));
    let status = h.supervisor.status().snapshot();
    let events = &status.targets[0].connections[0].events;
    assert!(
        events
            .iter()
            .any(|e| e.kind == "probe_failed" && e.detail.contains("search_legacy")),
        "{events:?}"
    );
}

#[tokio::test]
async fn a_slow_tool_times_out() {
    let lab = lab(Behaviour {
        answer_delay: Duration::from_millis(400),
        ..Behaviour::default()
    })
    .await;
    let mut p = probe("kb_stats");
    p.timeout = Duration::from_millis(100);
    let h = probed(&lab, vec![p]);
    h.until("timeout counted", |s| {
        failures(s, "kb_stats", "timeout") >= 1.0
    })
    .await;
}
