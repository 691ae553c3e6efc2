//! Reload semantics, in-process and through the binary: unchanged targets keep sessions and
//! counters, removed targets' series disappear, a bad config never replaces a good one, and
//! secrets never show up in logs or pages.

mod common;

use std::process::Command;

use common::{Exporter, Harness, Scrape, get, start_lab, target, wait_exit};
use mcp_lab::{Behaviour, Lab};

async fn two_profile_lab() -> Lab {
    // Legacy sessions: a kept target must keep its session (the lab counts `initialize`).
    let legacy = Behaviour {
        era: mcp_lab::Era::Legacy,
        ..Behaviour::default()
    };
    start_lab([("a", legacy.clone()), ("b", legacy)]).await
}

fn started(s: &Scrape, name: &str) -> f64 {
    s.v(
        "mcp_probe_sessions_started_total",
        &[("target", name), ("connection", "0")],
    )
}

fn audits(s: &Scrape, name: &str) -> f64 {
    s.v(
        "mcp_probe_cache_consistency_checks_total",
        &[("target", name), ("connection", "0")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_keeps_unchanged_targets_and_drops_removed_series() {
    let lab = two_profile_lab().await;
    let mut h = Harness::new();
    let a = target("a", lab.url("a"));
    let b = target("b", lab.url("b"));
    h.apply(vec![a.clone(), b.clone()]);
    let s = h
        .until("both walked", |s| {
            audits(s, "a") >= 2.0 && audits(s, "b") >= 1.0
        })
        .await;
    let audits_before = audits(&s, "a");

    // Same `a`, no `b`.
    h.apply(vec![a.clone()]);
    let s = h.scrape();
    assert!(
        !s.has_target("b"),
        "series of a removed target must disappear\n{}",
        s.text
    );
    assert!(
        audits(&s, "a") >= audits_before,
        "counters of a kept target must not reset"
    );
    assert_eq!(started(&s, "a"), 1.0);
    h.until("a keeps auditing on the same session", |s| {
        audits(s, "a") >= audits_before + 2.0
    })
    .await;
    assert_eq!(lab.initializes("a"), 1, "a kept target keeps its session");

    // A changed `a` restarts with fresh series and a new session.
    let mut a2 = a.clone();
    a2.settings.max_pages = 10;
    h.apply(vec![a2]);
    let s = h
        .until("a restarted", |s| {
            started(s, "a") == 1.0 && lab.initializes("a") == 2
        })
        .await;
    assert!(
        audits(&s, "a") < audits_before + 2.0,
        "a restarted target starts from zero"
    );
}

// ---- through the binary ----

fn config_text(targets: &[(&str, String)]) -> String {
    let mut y = String::from(
        "global:\n  audit_interval: 500ms\n  ping_interval: 500ms\n  request_timeout: 400ms\n  notification_grace: 200ms\ntargets:\n",
    );
    for (name, url) in targets {
        y.push_str(&format!(
            "  - name: {name}\n    url: {url}\n    headers:\n      Authorization: \"Bearer ${{TEST_TOKEN}}\"\n"
        ));
    }
    y
}

const SENTINEL: &str = "s3cr3t-sentinel-token";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binary_reload_rejects_bad_config_and_applies_good_one() {
    let lab = two_profile_lab().await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(&path, config_text(&[("a", lab.url("a").to_string())])).unwrap();
    let mut e = Exporter::spawn(
        &[
            format!("--config.file={}", path.display()),
            "--web.enable-lifecycle".into(),
        ],
        &[("TEST_TOKEN", SENTINEL)],
    );
    e.until_metrics("a up", |s| s.v("mcp_probe_up", &[("target", "a")]) == 1.0)
        .await;

    // A bad config: the reload fails, names file and field, and the running target stays.
    std::fs::write(&path, "targets:\n  - name: a\n    url: ftp://nope/mcp\n").unwrap();
    let s = e
        .refused_reload(&["mcp_exporter.yml", "targets[0].url"])
        .await;
    assert_eq!(s.v("mcp_probe_up", &[("target", "a")]), 1.0);
    assert_eq!(
        s.v(
            "mcp_exporter_config_reloads_total",
            &[("result", "failure")]
        ),
        1.0
    );

    // A good config via SIGHUP: b starts, a is kept.
    std::fs::write(
        &path,
        config_text(&[
            ("a", lab.url("a").to_string()),
            ("b", lab.url("b").to_string()),
        ]),
    )
    .unwrap();
    let pid = e.child.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success()
    );
    let s = e
        .until_metrics("b up after SIGHUP", |s| {
            s.v("mcp_probe_up", &[("target", "b")]) == 1.0
                && s.v("mcp_exporter_config_last_reload_successful", &[]) == 1.0
        })
        .await;
    assert_eq!(s.v("mcp_exporter_targets", &[]), 2.0);
    assert_eq!(lab.initializes("a"), 1, "a was kept across both reloads");
    assert_eq!(
        s.v(
            "mcp_exporter_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );

    // Secrets appear nowhere: not in metrics, the landing page, or the logs.
    let landing = get(&format!("{}/", e.base)).await.unwrap();
    assert!(
        landing.contains(">a<") && landing.contains(">b<"),
        "{landing}"
    );
    assert!(!landing.contains(SENTINEL) && !s.text.contains(SENTINEL));
    assert_eq!(
        get(&format!("{}/-/healthy", e.base)).await.as_deref(),
        Some("Healthy\n")
    );
    assert_eq!(
        get(&format!("{}/-/ready", e.base)).await.as_deref(),
        Some("Ready\n")
    );

    // Graceful shutdown on SIGTERM: exits 0 after closing sessions.
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = wait_exit(&mut e.child);
    assert!(status.success(), "exit status {status:?}");
    let logs = e.logs();
    assert!(logs.contains("configuration not applied"), "{logs}");
    assert!(!logs.contains(SENTINEL), "a secret leaked into the logs");
}

#[test]
fn config_check_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.yml");
    std::fs::write(
        &good,
        "targets:\n  - name: kb\n    url: http://127.0.0.1:1/mcp\n",
    )
    .unwrap();
    let bad = dir.path().join("bad.yml");
    std::fs::write(
        &bad,
        "targets:\n  - name: kb\n    urll: http://127.0.0.1:1/mcp\n",
    )
    .unwrap();
    let run = |p: &std::path::Path| {
        Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
            .arg("--config.check")
            .arg(format!("--config.file={}", p.display()))
            .output()
            .unwrap()
    };
    let ok = run(&good);
    assert!(ok.status.success());
    let err = run(&bad);
    assert!(!err.status.success());
    let msg = String::from_utf8_lossy(&err.stderr);
    assert!(
        msg.contains("bad.yml") && msg.contains("urll") && msg.contains("line 3"),
        "{msg}"
    );
}
