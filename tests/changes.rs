//! Tool definition changes end to end against the lab: each change classified in the metrics
//! and on the status board, pins through file edits and reloads of the binary, and the exit
//! codes of `check --pins`.

mod common;

use std::path::Path;
use std::process::Command;

use common::{Exporter, Harness, Scrape, start_lab, target};
use mcp_client::listing::changes::pins;
use mcp_lab::Behaviour;
use mcp_lab::behaviour::DefinitionChange;
use mcp_lab::kb;

fn changed(b: DefinitionChange) -> Behaviour {
    Behaviour {
        definition_change: Some(b),
        ..Behaviour::default()
    }
}

fn changes(s: &Scrape, target: &str, change: &str) -> f64 {
    s.count(
        "mcp_probe_tool_changes_total",
        &[("target", target), ("connection", "0"), ("change", change)],
    )
}

fn server_tools(s: &Scrape, target: &str) -> f64 {
    s.v(
        "mcp_probe_tools",
        &[("target", target), ("connection", "0"), ("view", "server")],
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_are_classified_in_metrics_and_on_the_status_board() {
    let lab = start_lab([
        ("breaking", changed(DefinitionChange::Breaking)),
        ("compatible", changed(DefinitionChange::Compatible)),
        ("description", changed(DefinitionChange::Description)),
    ])
    .await;
    let mut h = Harness::new();
    let names = ["breaking", "compatible", "description"];
    h.apply(names.iter().map(|n| target(n, lab.url(n))).collect());
    let s = h
        .until("every target listed", |s| {
            names.iter().all(|n| server_tools(s, n) == 14.0)
        })
        .await;
    for n in names {
        for kind in ["added", "removed", "breaking", "compatible", "unknown"] {
            assert_eq!(changes(&s, n, kind), 0.0, "{n} {kind} starts at 0");
        }
    }
    lab.churn();
    let s = h
        .until("each change classified", |s| {
            changes(s, "breaking", "breaking") == 1.0
                && changes(s, "compatible", "compatible") == 1.0
                && changes(s, "description", "compatible") == 1.0
        })
        .await;
    assert_eq!(changes(&s, "breaking", "compatible"), 0.0);
    assert_eq!(changes(&s, "compatible", "breaking"), 0.0);
    assert!(
        s.v(
            "mcp_probe_tool_definitions_bytes",
            &[("target", "breaking")]
        ) > 0.0
    );

    let snap = h.supervisor.status().snapshot();
    let conn = |name: &str| {
        snap.targets
            .iter()
            .find(|t| t.name == name)
            .expect("target on the board")
            .connections[0]
            .clone()
    };
    let b = conn("breaking");
    let c = b.changes.back().expect("a change kept");
    assert_eq!(
        (c.change.tool.as_str(), c.change.change),
        ("ticket_create", "breaking")
    );
    let f = c
        .change
        .findings
        .iter()
        .find(|f| f.rule == "required_added" && f.after.as_deref() == Some("\"priority\""))
        .expect("the new required property named");
    assert_eq!(f.path, "$.inputSchema.required");
    let d = conn("description");
    let json = serde_json::to_value(d.changes.back().unwrap()).unwrap();
    assert_eq!(json["tool"], "kb_get_document");
    assert_eq!(json["findings"][0]["path"], "$.description");
    assert!(
        json["findings"][0]["after"]
            .as_str()
            .unwrap()
            .contains("ticket_create")
    );
}

fn write(path: &Path, text: &str) {
    // Written aside and renamed: the watcher never reads half a file.
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).expect("write");
    std::fs::rename(&tmp, path).expect("rename");
}

fn config(url: &url::Url, pins: &Path) -> String {
    format!(
        "targets:\n  - name: kb\n    url: {url}\n    pins: {}\n    audit_interval: 400ms\n    ping_interval: 400ms\n    notification_grace: 300ms\n",
        pins.display()
    )
}

fn pin_state(s: &Scrape, tool: &str) -> (f64, f64) {
    let l = [("target", "kb"), ("tool", tool)];
    (
        s.v("mcp_probe_tool_pin_mismatch", &l),
        s.v("mcp_probe_tool_pin_description_changed", &l),
    )
}

fn valid(s: &Scrape) -> f64 {
    s.v("mcp_probe_tool_pins_file_valid", &[("target", "kb")])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_follow_file_edits_and_reloads_and_keep_the_last_good_file() {
    let lab = start_lab([("kb", changed(DefinitionChange::Description))]).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let pins_path = dir.path().join("kb.pins.json");
    write(&pins_path, &pins::render(&kb::tools(0)));
    let config_path = dir.path().join("config.yml");
    write(&config_path, &config(&lab.url("kb"), &pins_path));
    let exporter = Exporter::spawn(
        &[
            format!("--config.file={}", config_path.display()),
            "--web.enable-lifecycle".into(),
        ],
        &[],
    );
    let doc = "kb_get_document";
    exporter
        .until_metrics("pins loaded and matching", |s| {
            s.v("mcp_probe_tools_pinned", &[("target", "kb")]) == 14.0
                && s.v("mcp_probe_tools_unpinned", &[("target", "kb")]) == 0.0
                && valid(s) == 1.0
                && server_tools(s, "kb") == 14.0
                && pin_state(s, doc) == (0.0, 0.0)
        })
        .await;

    // The rug pull: the description changes, the name and schema stay.
    lab.churn();
    let s = exporter
        .until_metrics("the pinned tool's description mismatch", |s| {
            pin_state(s, doc) == (1.0, 1.0)
        })
        .await;
    assert_eq!(pin_state(&s, "ticket_create"), (0.0, 0.0));
    let status = exporter
        .until_get(
            "/status.json",
            common::DEADLINE,
            "the pins mismatch on /status.json",
            |t| serde_json::from_str::<serde_json::Value>(t).ok(),
            |v| v["targets"][0]["pins"]["mismatched_total"] == 1,
        )
        .await;
    let m = &status["targets"][0]["pins"]["mismatched"][0];
    assert_eq!(m["tool"], "kb_get_document");
    assert_eq!(m["description_changed"], true);
    assert_eq!(m["findings"][0]["path"], "$.description");
    let page = common::get(&format!("{}/", exporter.base))
        .await
        .expect("the page");
    assert!(page.contains("<h3>Pins</h3>") && page.contains("description changed"));

    // A broken file: refused, the last good pins stay in force.
    write(&pins_path, "{\"version\": 1, \"tools\": [{\"name\": 3}]}");
    let s = exporter
        .until_metrics("the broken pins file refused", |s| valid(s) == 0.0)
        .await;
    assert_eq!(pin_state(&s, doc), (1.0, 1.0));
    let logs = exporter.logs();
    assert!(logs.contains("tools[0].name"), "{logs}");

    // Approving the new definition: re-pin, no reload.
    let approved = kb::tools_changed(1, DefinitionChange::Description);
    write(&pins_path, &pins::render(&approved));
    exporter
        .until_metrics("the re-pinned tool matches", |s| {
            valid(s) == 1.0 && pin_state(s, doc) == (0.0, 0.0)
        })
        .await;

    // A reload naming a broken pins file is refused as a whole (file and field named).
    let broken = dir.path().join("broken.pins.json");
    write(&broken, "{\"version\": 1}");
    write(&config_path, &config(&lab.url("kb"), &broken));
    let s = exporter
        .refused_reload(&["pins", "broken.pins.json", "tools"])
        .await;
    assert_eq!(valid(&s), 1.0);

    // A reload naming a new file that leaves one tool out: one unpinned tool.
    let fewer = dir.path().join("fewer.pins.json");
    let without: Vec<_> = approved
        .into_iter()
        .filter(|t| t["name"] != "ticket_search")
        .collect();
    write(&fewer, &pins::render(&without));
    write(&config_path, &config(&lab.url("kb"), &fewer));
    assert_eq!(exporter.reload().await.status(), 200);
    let s = exporter
        .until_metrics("the new pins after the reload", |s| {
            s.v("mcp_probe_tools_pinned", &[("target", "kb")]) == 13.0
                && s.v("mcp_probe_tools_unpinned", &[("target", "kb")]) == 1.0
        })
        .await;
    assert!(
        s.get("mcp_probe_tool_pin_mismatch", &[("tool", "ticket_search")])
            .is_none()
    );
}

/// Run the binary with `args` off the runtime's threads; returns (exit code, stdout, stderr).
async fn cli(args: Vec<String>) -> (i32, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
            .args(&args)
            .output()
            .expect("runs");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    })
    .await
    .expect("joined")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pin_then_check_pins_passes_until_a_pinned_tool_changes() {
    let lab = start_lab([("kb", changed(DefinitionChange::Breaking))]).await;
    let url = lab.url("kb").to_string();
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("kb.pins.json");

    let (code, stdout, stderr) = cli(vec!["pin".into(), url.clone()]).await;
    assert_eq!(code, 0, "{stderr}");
    let parsed = pins::Pins::parse(stdout.as_bytes()).expect("pin writes a valid pins file");
    assert_eq!(parsed.tools.len(), 14);
    std::fs::write(&file, &stdout).unwrap();
    let check = |extra: &[&str]| {
        let mut args = vec!["check".to_string(), format!("--pins={}", file.display())];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.push(url.clone());
        args
    };

    let (code, out, _) = cli(check(&[])).await;
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("all 14 pinned tools are served as pinned"),
        "{out}"
    );

    lab.churn();
    let (code, out, _) = cli(check(&[])).await;
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("ticket_create (breaking: required_added at $.inputSchema.required"),
        "{out}"
    );

    std::fs::write(&file, "{\"version\": 1, \"tools\": {}}").unwrap();
    let (code, _, err) = cli(check(&[])).await;
    assert_eq!(code, 2);
    assert!(
        err.contains("kb.pins.json") && err.contains("tools"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_listen_for_reports_the_classified_change() {
    let lab = start_lab([("kb", changed(DefinitionChange::Compatible))]).await;
    let url = lab.url("kb").to_string();
    let run = cli(vec![
        "check".into(),
        "--listen-for=20s".into(),
        "--format=json".into(),
        url,
    ]);
    let churn = async {
        // The check is listening once its walks are done: wait for them, then redeploy.
        let start = tokio::time::Instant::now();
        while lab.tools_list_calls() < 4 {
            assert!(start.elapsed() < common::DEADLINE, "check never walked");
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        lab.churn();
    };
    let ((code, out, err), ()) = tokio::join!(run, churn);
    assert_eq!(code, 0, "{out}{err}");
    assert!(
        out.contains(
            "ticket_search (compatible: optional_property_added at $.inputSchema.properties.limit"
        ),
        "{out}"
    );
}

/// The lab's other lists across a redeploy, classified by `changes_in` with the list as a value
/// (what the probe calls for prompts, resources and templates): each retired item is removed,
/// its successor added, keyed by the list's key field; a changed resource is judged by the
/// resource rules. An old tools-only pins file pins none of them.
#[test]
fn other_lists_change_between_lab_generations_by_their_own_rules() {
    use mcp_client::listing::changes::{Definitions, changes_in};
    use mcp_client::listing::items::{ItemSet, definition_fingerprint};
    use mcp_client::listing::list::{List, ListSet};
    use mcp_lab::kb_lists;

    let defs = Definitions::for_lists(256 << 10, 1, ListSet::ALL);
    let set = |list: List, items: &[serde_json::Value]| {
        let mut s = ItemSet::new();
        for i in items {
            let fp = definition_fingerprint(i);
            defs.keep(fp, i);
            s.insert(i[list.key_field()].as_str().unwrap().into(), fp);
        }
        s
    };
    for (list, retired, successor) in [
        (List::Prompts, "summarize_legacy", "summarize_v2"),
        (
            List::Resources,
            "kb://collections/legacy-index",
            "kb://collections/index-v1",
        ),
        (
            List::ResourceTemplates,
            "kb://search/legacy{?q}",
            "kb://search/v1{?q,top_k}",
        ),
    ] {
        let before = set(list, &kb_lists::items(list, 0));
        let after = set(list, &kb_lists::items(list, 1));
        let c = changes_in(list, &before, &after, &defs);
        let kinds: Vec<(&str, &str)> = c.iter().map(|c| (c.tool.as_str(), c.change)).collect();
        assert_eq!(
            kinds,
            [(successor, "added"), (retired, "removed")],
            "{list}"
        );
    }
    // From one revision to the next the prompt keeps its name: only its description changed.
    let c = changes_in(
        List::Prompts,
        &set(List::Prompts, &kb_lists::items(List::Prompts, 1)),
        &set(List::Prompts, &kb_lists::items(List::Prompts, 2)),
        &defs,
    );
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        (c[0].tool.as_str(), c[0].change),
        ("summarize_v2", "compatible")
    );
    assert!(c[0].description_changed);
    // The resource the redeploy keeps under its key: compatible (its size), never breaking.
    let r = |size: u64| serde_json::json!({"uri": "kb://x", "name": "x", "mimeType": "text/markdown", "size": size});
    let c = changes_in(
        List::Resources,
        &set(List::Resources, &[r(1)]),
        &set(List::Resources, &[r(2)]),
        &defs,
    );
    assert_eq!(
        (c[0].change, c[0].findings[0].rule),
        ("compatible", "size_changed")
    );

    let old = pins::Pins::parse(pins::render(&kb::tools(0)).as_bytes()).unwrap();
    assert!(old.others.is_empty() && old.pinned(List::Prompts).is_none());
}
