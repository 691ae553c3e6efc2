//! `mcp_exporter lab`: the scenarios an operator can serve to test their alerting pipeline.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use common::{Harness, free_port, target};

#[test]
fn lab_list_names_every_scenario_once_per_line() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .args(["lab", "--list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "healthy",
        "notification-lost",
        "cursor-rejected",
        "slow-server",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(name)),
            "{name} missing:\n{text}"
        );
    }
    assert_eq!(text.lines().count(), mcp_lab::scenarios::all().len());
    let bad = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .args(["lab", "--scenario", "nope"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}

/// Serve `scenario` with `extra` flags on a free port; the child and the URL it prints.
fn serve(scenario: &str, extra: &[&str]) -> (std::process::Child, url::Url) {
    let port = free_port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .args(["lab", "--scenario", scenario, "--listen", &listen])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let url = url::Url::parse(line.trim()).expect("the lab prints its URL");
    (child, url)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_served_scenario_is_probed_like_any_server() {
    let (mut child, url) = serve("paginated", &[]);
    let mut h = Harness::new();
    h.apply(vec![target("lab", url)]);
    let s = h
        .until("walked", |s| {
            s.v(
                "mcp_probe_tools",
                &[("target", "lab"), ("connection", "0"), ("view", "cache")],
            ) == 14.0
        })
        .await;
    assert_eq!(
        s.v(
            "mcp_probe_tools_list_pages",
            &[("target", "lab"), ("connection", "0")]
        ),
        2.0
    );
    let _ = child.kill();
    let _ = child.wait();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn era_and_ttl_flags_shape_the_served_scenario() {
    let (mut child, url) = serve("healthy", &["--era", "modern", "--ttl-ms", "5"]);
    let discover = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
        "params": {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let resp = tokio::time::timeout(
        common::DEADLINE,
        reqwest::Client::new()
            .post(url)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", "2026-07-28")
            .header("Mcp-Method", "server/discover")
            .json(&discover)
            .send(),
    )
    .await
    .expect("answer within the deadline")
    .expect("request sent");
    let v: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(
        v["result"]["supportedVersions"],
        serde_json::json!(["2026-07-28"]),
        "{v}"
    );
    assert_eq!(v["result"]["ttlMs"], 5, "{v}");
    let _ = child.kill();
    let _ = child.wait();
    let bad = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .args(["lab", "--scenario", "healthy", "--era", "future"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
}
