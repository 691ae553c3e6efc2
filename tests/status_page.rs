//! The status page and `/status.json` through the binary: after a redeploy behind a lossy
//! gateway they name the stale tool, carry the notify → list → replace timeline of the healthy
//! target and the unannounced change of the lossy one, and never show a secret.

mod common;

use std::net::SocketAddr;
use std::time::Duration;

use common::{DEADLINE, Exporter, get};
use mcp_exporter::lab::{Behaviour, Lab};
use serde_json::Value;

const SENTINEL: &str = "status-s3cr3t-sentinel";

fn config(lab: &Lab) -> String {
    let mut y = String::from(
        "global:\n  audit_interval: 500ms\n  ping_interval: 500ms\n  request_timeout: 400ms\n  notification_grace: 300ms\ntargets:\n",
    );
    for name in ["healthy", "lossy"] {
        let mut url = lab.url(name);
        url.set_query(Some(&format!("token={SENTINEL}")));
        let _ = url.set_password(Some(SENTINEL));
        let _ = url.set_username("probe");
        y.push_str(&format!(
            "  - name: {name}\n    url: {url}\n    headers:\n      Authorization: \"Bearer ${{STATUS_TEST_TOKEN}}\"\n    probes:\n      - tool: search_legacy\n        interval: 300ms\n        timeout: 200ms\n"
        ));
    }
    y
}

fn target<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["targets"]
        .as_array()
        .and_then(|t| t.iter().find(|t| t["name"] == name))
        .unwrap_or(&Value::Null)
}

fn kinds(t: &Value) -> Vec<String> {
    t["connections"][0]["events"]
        .as_array()
        .map(|e| {
            e.iter()
                .filter_map(|e| e["kind"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_names_the_stale_tool_and_tells_the_story() {
    let lab = Lab::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        vec![
            ("healthy".to_string(), Behaviour::default()),
            (
                "lossy".to_string(),
                Behaviour {
                    deliver_list_changed: false,
                    ..Behaviour::default()
                },
            ),
        ],
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(&path, config(&lab)).unwrap();
    let e = Exporter::spawn(
        &[format!("--config.file={}", path.display())],
        &[("STATUS_TEST_TOKEN", SENTINEL)],
    );
    let json_url = format!("{}/status.json", e.base);

    // Both caches hold the first deploy, and the probes pass.
    let start = tokio::time::Instant::now();
    loop {
        let s: Value = match get(&json_url).await {
            Some(body) => serde_json::from_str(&body).expect("status.json is JSON"),
            None => Value::Null,
        };
        let ready = ["healthy", "lossy"].iter().all(|n| {
            let t = target(&s, n);
            t["connections"][0]["cache"]["tools"] == 14 && t["probes"][0]["success"] == true
        });
        if ready {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "never ready: {s}\n{}", e.logs());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    lab.churn();
    let s = loop {
        let body = get(&json_url).await.unwrap_or_default();
        let s: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        let lossy = target(&s, "lossy");
        let healthy = target(&s, "healthy");
        let stale = lossy["connections"][0]["drift"]["extra"]
            .as_array()
            .is_some_and(|x| x.iter().any(|n| n == "search_legacy"));
        let told = kinds(lossy).contains(&"unannounced_change".to_string())
            && lossy["probes"][0]["reason"] == "unknown_tool";
        let refreshed = healthy["connections"][0]["cache"]["replaced_by"] == "notification";
        if stale && told && refreshed {
            break s;
        }
        assert!(
            start.elapsed() < DEADLINE * 2,
            "status never showed the story: {s}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };

    // The healthy connection's timeline reads notify → list → replace, in that order.
    let k = kinds(target(&s, "healthy"));
    let at = |kind: &str| k.iter().rposition(|x| x == kind);
    let (n, w, c) = (
        at("list_changed"),
        at("walk_finished"),
        at("cache_replaced"),
    );
    assert!(n.is_some() && n < w && w < c, "healthy timeline: {k:?}");
    // The lossy one never heard of the change.
    assert!(
        !kinds(target(&s, "lossy")).contains(&"list_changed".to_string()),
        "{s}"
    );

    let page = get(&format!("{}/", e.base)).await.expect("status page");
    assert!(page.contains("<meta http-equiv=\"refresh\""));
    assert!(page.contains("<code>search_legacy</code>"), "{page}");
    assert!(page.contains("unannounced_change") && page.contains("cache_replaced"));
    for (what, text) in [
        ("page", &page),
        ("json", &s.to_string()),
        ("logs", &e.logs()),
    ] {
        assert!(!text.contains(SENTINEL), "a secret leaked into the {what}");
    }
}
