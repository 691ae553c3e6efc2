//! Targets from discovery, through the binary: a file_sd file and an http_sd URL add, keep and
//! remove targets with the reload guarantees (kept targets keep sessions and counters, removed
//! targets' series vanish, a label change alone restarts nothing), and a source that fails keeps
//! its last good targets and says so in its metrics.

mod common;

use std::sync::{Arc, Mutex};

use common::{Exporter, Scrape, start_lab};
use mcp_lab::{Behaviour, Era, Lab};

async fn legacy_lab(names: &[&str]) -> Lab {
    // Legacy sessions: a kept target must keep its session (the lab counts `initialize`).
    let legacy = Behaviour {
        era: Era::Legacy,
        ..Behaviour::default()
    };
    start_lab(names.iter().map(|n| (n.to_string(), legacy.clone()))).await
}

const TEMPLATE: &str = "    target:\n      audit_interval: 500ms\n      ping_interval: 500ms\n      request_timeout: 400ms\n      notification_grace: 200ms\n";

fn up(s: &Scrape, name: &str) -> bool {
    s.v("mcp_probe_up", &[("target", name)]) == 1.0
}

fn audits(s: &Scrape, name: &str) -> f64 {
    s.v(
        "mcp_probe_cache_consistency_checks_total",
        &[("target", name), ("connection", "0")],
    )
}

fn group(url: &url::Url, labels: &str) -> String {
    format!(r#"{{"targets": ["{url}"], "labels": {{{labels}}}}}"#)
}

const FILE: [(&str, &str); 2] = [("mechanism", "file"), ("config", "fleet")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn file_sd_adds_keeps_and_removes_targets_and_survives_a_bad_file() {
    let lab = legacy_lab(&["a", "b", "c"]).await;
    let dir = tempfile::tempdir().unwrap();
    let targets = dir.path().join("targets.json");
    let write = |text: String| {
        // Written aside and renamed, as config management does: never seen half written.
        let tmp = dir.path().join(".targets.tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, &targets).unwrap();
    };
    write(format!(
        "[{}, {}]",
        group(&lab.url("a"), r#""__target__": "a", "team": "search""#),
        group(&lab.url("b"), r#""__target__": "b""#),
    ));
    let config = dir.path().join("mcp_exporter.yml");
    std::fs::write(
        &config,
        format!("file_sd_configs:\n  - name: fleet\n    files: ['*.json']\n{TEMPLATE}"),
    )
    .unwrap();
    let e = Exporter::spawn(&[format!("--config.file={}", config.display())], &[]);

    let s = e
        .until_metrics("a and b discovered and audited", |s| {
            up(s, "a") && up(s, "b") && audits(s, "a") >= 1.0
        })
        .await;
    assert_eq!(
        s.v(
            "mcp_probe_target_info",
            &[("target", "a"), ("team", "search")]
        ),
        1.0
    );
    assert_eq!(s.get("mcp_probe_target_info", &[("target", "b")]), None);
    assert_eq!(s.v("mcp_exporter_sd_targets", &FILE), 2.0);
    assert_eq!(s.v("mcp_exporter_sd_last_refresh_successful", &FILE), 1.0);
    assert_eq!(s.v("mcp_exporter_sd_refresh_failures_total", &FILE), 0.0);
    assert_eq!(s.v("mcp_exporter_targets", &[]), 2.0);
    let audits_before = audits(&s, "a");

    // a kept (its label changed), b removed, c added under a name derived from its URL.
    write(format!(
        "[{}, {}]",
        group(&lab.url("a"), r#""__target__": "a", "team": "billing""#),
        group(&lab.url("c"), r#""tier": "gold""#),
    ));
    let c = mcp_exporter::discovery::groups::derive_name(&lab.url("c"));
    let s = e
        .until_metrics("c added, b removed", |s| {
            up(s, &c) && !s.has_target("b") && audits(s, "a") >= audits_before + 2.0
        })
        .await;
    assert_eq!(
        s.v(
            "mcp_probe_target_info",
            &[("target", "a"), ("team", "billing")]
        ),
        1.0,
        "the info series follows the label\n{}",
        s.text
    );
    assert_eq!(
        s.get(
            "mcp_probe_target_info",
            &[("target", "a"), ("team", "search")]
        ),
        None
    );
    assert_eq!(
        s.v(
            "mcp_probe_sessions_started_total",
            &[("target", "a"), ("connection", "0")]
        ),
        1.0,
        "a kept target keeps its session and counters"
    );
    assert_eq!(lab.initializes("a"), 1, "a label change restarts nothing");
    assert_eq!(
        s.v("mcp_probe_target_info", &[("target", &c), ("tier", "gold")]),
        1.0
    );

    // A reload of the unchanged configuration keeps the source, its targets and their sessions.
    e.signal("HUP");
    let s = e
        .until_metrics("reloaded", |s| {
            s.v(
                "mcp_exporter_config_reloads_total",
                &[("result", "success")],
            ) == 2.0
        })
        .await;
    assert!(up(&s, "a") && up(&s, &c), "{}", s.text);
    assert_eq!(lab.initializes("a"), 1, "a reload keeps discovered targets");

    // An invalid file: the last good targets stay, the failure is counted.
    write("[{\"targets\": [\"http://x/\"], ".into());
    let s = e
        .until_metrics("the bad file is noticed", |s| {
            s.v("mcp_exporter_sd_refresh_failures_total", &FILE) >= 1.0
                && s.v("mcp_exporter_sd_last_refresh_successful", &FILE) == 0.0
        })
        .await;
    assert!(up(&s, "a") && up(&s, &c), "{}", s.text);
    assert_eq!(s.v("mcp_exporter_sd_targets", &FILE), 2.0);
    assert_eq!(lab.initializes("a"), 1);
    let logs = e.logs();
    assert!(
        logs.contains("discovery refresh failed") && logs.contains("targets.json"),
        "{logs}"
    );
}

/// What the fake registry answers: status, Content-Type, body.
type Answer = Arc<Mutex<(u16, &'static str, String)>>;

async fn registry(answer: Answer) -> String {
    use axum::http::header::CONTENT_TYPE;
    let app = axum::Router::new().route(
        "/targets",
        axum::routing::get(move || {
            let answer = answer.clone();
            async move {
                let (status, media, body) = answer.lock().unwrap().clone();
                (
                    axum::http::StatusCode::from_u16(status).unwrap(),
                    [(CONTENT_TYPE, media)],
                    body,
                )
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/targets")
}

const HTTP: [(&str, &str); 2] = [("mechanism", "http"), ("config", "registry")];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_sd_polls_and_keeps_the_last_good_targets_on_errors() {
    let lab = legacy_lab(&["a", "b"]).await;
    let answer: Answer = Arc::new(Mutex::new((
        200,
        "application/json",
        format!("[{}]", group(&lab.url("a"), r#""__target__": "a""#)),
    )));
    let url = registry(answer.clone()).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp_exporter.yml");
    std::fs::write(
        &config,
        format!(
            "http_sd_configs:\n  - name: registry\n    url: {url}\n    refresh_interval: 300ms\n    timeout: 300ms\n    max_response_bytes: 2KiB\n{TEMPLATE}"
        ),
    )
    .unwrap();
    let e = Exporter::spawn(&[format!("--config.file={}", config.display())], &[]);
    e.until_metrics("a discovered", |s| {
        up(s, "a") && s.v("mcp_exporter_sd_targets", &HTTP) == 1.0
    })
    .await;

    // Each bad answer is a failure, logged with its reason; a stays.
    let mut failures = 0.0;
    for (status, media, body, why) in [
        (
            500,
            "application/json",
            "[]".to_string(),
            "answered HTTP 500",
        ),
        (
            200,
            "application/json",
            "x".repeat(3000),
            "larger than max_response_bytes",
        ),
        (
            200,
            "text/plain",
            "[]".to_string(),
            "target groups must be application/json",
        ),
        (
            200,
            "application/json",
            "{\"no\": 1}".to_string(),
            "not a list of target groups",
        ),
    ] {
        *answer.lock().unwrap() = (status, media, body);
        let s = e
            .until_metrics(&format!("{why} counted and logged"), |s| {
                s.v("mcp_exporter_sd_refresh_failures_total", &HTTP) > failures
                    && s.v("mcp_exporter_sd_last_refresh_successful", &HTTP) == 0.0
                    && e.logs().contains(why)
            })
            .await;
        failures = s.v("mcp_exporter_sd_refresh_failures_total", &HTTP);
        assert!(up(&s, "a"), "{why}: a must stay\n{}", s.text);
        assert_eq!(s.v("mcp_exporter_sd_targets", &HTTP), 1.0, "{why}");
    }

    // A good answer again: b replaces a.
    *answer.lock().unwrap() = (
        200,
        "application/json",
        format!("[{}]", group(&lab.url("b"), r#""__target__": "b""#)),
    );
    let s = e
        .until_metrics("b replaces a", |s| up(s, "b") && !s.has_target("a"))
        .await;
    assert_eq!(s.v("mcp_exporter_sd_last_refresh_successful", &HTTP), 1.0);
    assert_eq!(s.v("mcp_exporter_targets", &[]), 1.0);
}
