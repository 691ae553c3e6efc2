//! The Grafana dashboards in `dashboards/` and the alert rules in `alerts/` against the metric
//! catalog: well-formed dashboards, only metrics the exporter emits, the core signals covered,
//! every alert with a runbook section and a promtool test, and (when `promtool` is installed)
//! every dashboard query syntax-checked by Prometheus itself.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use mcp_exporter::telemetry::families::family_of;
use serde_json::Value;

const PREFIXES: [&str; 3] = ["mcp_probe_", "mcp_exporter_", "mcp_proxy_"];
const DATASOURCE: &str = "${datasource}";

fn repo_dir(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(name)
}

/// Files in `dir` ending in one of `exts`, sorted; none when the folder does not exist.
fn files(dir: &str, exts: &[&str]) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(repo_dir(dir)) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| {
            p.extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| exts.contains(&e))
        })
        .collect();
    out.sort();
    out
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Every dashboard, by file name, parsed.
fn dashboards() -> Vec<(String, Value)> {
    let found: Vec<(String, Value)> = files("dashboards", &["json"])
        .into_iter()
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let json = serde_json::from_str(&read(&p))
                .unwrap_or_else(|e| panic!("{name} is not valid JSON: {e}"));
            (name, json)
        })
        .collect();
    assert!(!found.is_empty(), "no dashboards/*.json found");
    found
}

/// All panels of a dashboard, including panels nested in collapsed rows.
fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(list: &'a Value, out: &mut Vec<&'a Value>) {
        for p in list.as_array().into_iter().flatten() {
            out.push(p);
            if let Some(nested) = p.get("panels") {
                walk(nested, out);
            }
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// The `expr` of every query target of every panel.
fn exprs(dashboard: &Value) -> Vec<&str> {
    panels(dashboard)
        .into_iter()
        .flat_map(|p| p["targets"].as_array().into_iter().flatten())
        .filter_map(|t| t["expr"].as_str())
        .collect()
}

/// The queries of the templating variables (`label_values(...)`), string or object form.
fn variable_queries(dashboard: &Value) -> Vec<&str> {
    dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|v| v["type"] == "query")
        .filter_map(|v| v["query"].as_str().or_else(|| v["query"]["query"].as_str()))
        .collect()
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == ':'
}

/// Identifiers starting with a metric prefix. Recording-rule names (`level:metric:op`, anything
/// with a `:`) and the word right after `record:` are the rules' own names, not exporter metrics,
/// and are skipped; so is a bare prefix or a name ending in `_`.
fn metric_like_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for line in text.lines() {
        let recorded = line
            .trim_start()
            .trim_start_matches("- ")
            .strip_prefix("record:")
            .map(|r| r.trim().trim_matches(['"', '\'']));
        let mut rest = line;
        while let Some(start) = rest.find(is_ident) {
            let tail = &rest[start..];
            let end = tail.find(|c: char| !is_ident(c)).unwrap_or(tail.len());
            let word = &tail[..end];
            rest = &tail[end..];
            if PREFIXES.iter().any(|p| word.starts_with(p))
                && !word.contains(':')
                && !word.ends_with('_')
                && recorded != Some(word)
            {
                names.insert(word.to_string());
            }
        }
    }
    names
}

fn uses_datasource_variable(ds: &Value) -> bool {
    ds.as_str() == Some(DATASOURCE) || ds["uid"].as_str() == Some(DATASOURCE)
}

#[test]
fn dashboards_are_well_formed() {
    let mut problems = Vec::new();
    for (name, d) in dashboards() {
        let version = d["schemaVersion"].as_u64().unwrap_or(0);
        if version < 36 {
            problems.push(format!("{name}: schemaVersion {version} < 36"));
        }
        if d["uid"].as_str().is_none_or(str::is_empty) {
            problems.push(format!("{name}: no uid"));
        }
        let defined: BTreeSet<&str> = d["templating"]["list"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["name"].as_str())
            .collect();
        let mut ids = BTreeSet::new();
        for p in panels(&d) {
            let title = p["title"].as_str().unwrap_or("");
            let id = p["id"].as_u64();
            let at = format!("{name}: panel {id:?} {title:?}");
            match id {
                Some(id) if !ids.insert(id) => problems.push(format!("{at}: duplicate id")),
                None => problems.push(format!("{at}: no numeric id")),
                _ => {}
            }
            if title.trim().is_empty() {
                problems.push(format!("{at}: no title"));
            }
            if p["gridPos"].as_object().is_none() {
                problems.push(format!("{at}: no gridPos"));
            }
            // A row only groups the panels below it: a title, no queries of its own.
            if p["type"] == "row" {
                if p.get("targets").is_some() {
                    problems.push(format!("{at}: a row with targets (Grafana ignores them)"));
                }
                continue;
            }
            if p["description"]
                .as_str()
                .is_none_or(|s| s.trim().is_empty())
            {
                problems.push(format!("{at}: no description"));
            }
            if !uses_datasource_variable(&p["datasource"]) {
                problems.push(format!("{at}: datasource is not {DATASOURCE}"));
            }
            let targets = p["targets"].as_array().map(Vec::as_slice).unwrap_or(&[]);
            if targets.is_empty() {
                problems.push(format!("{at}: no targets"));
            }
            for t in targets {
                let expr = t["expr"].as_str().unwrap_or("");
                if expr.trim().is_empty() {
                    problems.push(format!("{at}: target without expr"));
                }
                if !t["legendFormat"].is_string() {
                    problems.push(format!("{at}: target without legendFormat"));
                }
                let vars = expr
                    .split('$')
                    .skip(1)
                    .map(|s| s.trim_start_matches('{'))
                    .map(|s| &s[..s.find(|c: char| !is_ident(c)).unwrap_or(s.len())])
                    .filter(|v| !v.starts_with("__"));
                for v in vars {
                    if !defined.contains(v) {
                        problems.push(format!("{at}: ${v} is not a dashboard variable"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "dashboards:\n{}", problems.join("\n"));
}

#[test]
fn dashboards_and_alerts_use_only_catalog_metrics() {
    let mut sources: Vec<(String, String)> = dashboards()
        .into_iter()
        .map(|(name, d)| {
            let text = exprs(&d)
                .into_iter()
                .chain(variable_queries(&d))
                .collect::<Vec<_>>()
                .join("\n");
            (name, text)
        })
        .collect();
    for path in files("alerts", &["yml", "yaml"]) {
        let name = format!("alerts/{}", path.file_name().unwrap().to_string_lossy());
        sources.push((name, read(&path)));
    }
    let mut unknown = Vec::new();
    for (name, text) in &sources {
        for metric in metric_like_names(text) {
            if family_of(&metric).is_none() {
                unknown.push(format!("{name}: {metric}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "metrics the exporter does not emit (not in the catalog):\n{}",
        unknown.join("\n")
    );
}

#[test]
fn dashboards_cover_the_core_signals() {
    let used: BTreeSet<&'static str> = dashboards()
        .iter()
        .filter(|(name, _)| {
            name == "mcp-exporter-overview.json" || name == "mcp-exporter-target.json"
        })
        .flat_map(|(_, d)| {
            exprs(d)
                .into_iter()
                .map(metric_like_names)
                .collect::<Vec<_>>()
        })
        .flatten()
        .filter_map(|m| family_of(&m).map(|d| d.name))
        .collect();
    let required = [
        "mcp_probe_up",
        "mcp_probe_cache_drift_tools",
        "mcp_probe_unannounced_changes_total",
        "mcp_probe_tools_list_cursor_errors_total",
        "mcp_probe_tools_list_loop_cap_hits_total",
        "mcp_probe_tools_list_pages",
        "mcp_probe_tools_list_requests_total",
        "mcp_probe_tools_list_fingerprint",
        "mcp_probe_ping_duration_seconds",
        "mcp_probe_ready",
        "mcp_probe_tool_probe_success",
        "mcp_probe_tool_probe_duration_seconds",
        "mcp_probe_tool_probe_failures_total",
    ];
    let missing: Vec<&str> = required.into_iter().filter(|m| !used.contains(m)).collect();
    assert!(
        missing.is_empty(),
        "the overview and target dashboards do not query: {missing:?}"
    );
}

/// A dashboard expr with Grafana's variables replaced by values Prometheus accepts.
fn concrete(expr: &str) -> String {
    expr.replace("$__rate_interval", "5m")
        .replace("$__range", "1h")
        .replace("${job}", ".*")
        .replace("$job", ".*")
        .replace("${target}", ".+")
        .replace("$target", ".+")
        .replace("${connection}", ".+")
        .replace("$connection", ".+")
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

#[test]
fn dashboard_queries_pass_promtool() {
    let mut rules = String::from("groups:\n  - name: dashboard_queries\n    rules:\n");
    let mut count = 0;
    for (name, d) in dashboards() {
        for expr in exprs(&d) {
            let expr = concrete(expr);
            assert!(!expr.contains('$'), "{name}: unreplaced variable in {expr}");
            count += 1;
            // A JSON string is a valid YAML double-quoted scalar.
            let quoted = serde_json::to_string(&expr).unwrap();
            rules.push_str(&format!(
                "      - record: dashboard:query_{count}:check\n        expr: {quoted}\n"
            ));
        }
    }
    let file = std::env::temp_dir().join(format!(
        "mcp_exporter_dashboard_queries_{}.yml",
        std::process::id()
    ));
    std::fs::write(&file, &rules).expect("write the generated rules file");
    let Some(promtool) = on_path("promtool") else {
        println!(
            "note: promtool is not on PATH; {count} dashboard queries written to {} but not \
             syntax-checked",
            file.display()
        );
        return;
    };
    let out = std::process::Command::new(promtool)
        .arg("check")
        .arg("rules")
        .arg(&file)
        .output()
        .expect("run promtool");
    let report = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool check rules {} failed:\n{report}",
        file.display()
    );
    let _ = std::fs::remove_file(&file);
    println!("promtool checked {count} dashboard queries: {report}");
}

#[test]
fn the_scanner_skips_recording_rule_names() {
    let text = "  - record: job:mcp_probe_up:avg\n    expr: avg(mcp_probe_up)\n\
                - record: mcp_probe_made_up_ratio\n  expr: rate(mcp_probe_ping_duration_seconds_bucket[5m])\n\
                  annotations: {summary: \"see mcp_probe_… and x_mcp_probe_up\"}";
    let names: Vec<String> = metric_like_names(text).into_iter().collect();
    assert_eq!(
        names,
        ["mcp_probe_ping_duration_seconds_bucket", "mcp_probe_up"]
    );
    assert!(family_of("mcp_probe_ping_duration_seconds_bucket").is_some());
    assert!(family_of("mcp_probe_up_count").is_none());
}

/// `(alert name, runbook_url)` of every alert in `alerts/mcp_exporter.rules.yml`, in file order.
fn alerts_and_runbook_urls() -> Vec<(String, Option<String>)> {
    let text = read(&repo_dir("alerts").join("mcp_exporter.rules.yml"));
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    for line in text.lines() {
        let line = line.trim_start().trim_start_matches("- ");
        if let Some(name) = line.strip_prefix("alert:") {
            out.push((name.trim().to_string(), None));
        } else if let Some(url) = line.strip_prefix("runbook_url:") {
            let last = out.last_mut().expect("runbook_url before the first alert");
            assert!(last.1.is_none(), "{}: two runbook_urls", last.0);
            last.1 = Some(url.trim().to_string());
        }
    }
    out
}

#[test]
fn every_alert_has_a_runbook_section_and_a_promtool_test() {
    let alerts = alerts_and_runbook_urls();
    assert!(alerts.len() >= 17, "only {} alerts found", alerts.len());
    let runbook = read(&repo_dir("docs").join("runbook.md"));
    let sections: BTreeSet<String> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(|h| h.trim().to_lowercase())
        .collect();
    let tests = read(
        &repo_dir("alerts")
            .join("tests")
            .join("mcp_exporter.test.yml"),
    );
    let mut problems = Vec::new();
    for (name, url) in &alerts {
        let anchor = name.to_lowercase();
        match url {
            None => problems.push(format!("{name}: no runbook_url")),
            Some(url) if !url.ends_with(&format!("/docs/runbook.md#{anchor}")) => problems.push(
                format!("{name}: runbook_url {url} does not end in #{anchor}"),
            ),
            _ => {}
        }
        if !sections.contains(&anchor) {
            problems.push(format!("{name}: no '## {name}' section in docs/runbook.md"));
        }
        if !runbook.contains(&format!("| [{name}](#{anchor}) |")) {
            problems.push(format!(
                "{name}: not in the table at the top of docs/runbook.md"
            ));
        }
        // Fires somewhere (an exp_alerts entry under its name) and is tested silent somewhere.
        let tested: Vec<&str> = tests
            .split("alertname: ")
            .skip(1)
            .filter(|t| t.starts_with(name.as_str()) && t[name.len()..].starts_with([',', '\n']))
            .collect();
        if !tested.iter().any(|t| t.contains("exp_labels")) {
            problems.push(format!("{name}: no promtool test where it fires"));
        }
        if !tested.iter().any(|t| t.contains("exp_alerts: []")) {
            problems.push(format!("{name}: no promtool test where it stays silent"));
        }
    }
    assert!(problems.is_empty(), "alerts:\n{}", problems.join("\n"));
}

/// The `--metrics.exclude` set docs/scaling.md recommends for a fleet leaves out no family an
/// alert, a recording rule or the overview dashboard reads, and every name in it is accepted.
#[test]
fn the_fleet_exclusion_set_blinds_no_alert_and_no_overview_panel() {
    let doc = read(&repo_dir("docs").join("scaling.md"));
    let block = doc
        .split("--metrics.exclude=")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/scaling.md shows a --metrics.exclude set");
    let excluded: Vec<String> = block
        .split([',', '\\', '\n', ' '])
        .filter(|w| w.starts_with("mcp_probe_"))
        .map(str::to_string)
        .collect();
    assert!(excluded.len() > 5, "{excluded:?}");
    mcp_exporter::telemetry::parse_exclusions(&excluded).expect("every name is a probe family");
    let mut read_by = metric_like_names(
        &files("alerts", &["yml", "yaml"])
            .iter()
            .map(|p| read(p))
            .collect::<Vec<_>>()
            .join("\n"),
    );
    for (name, d) in dashboards() {
        if name.contains("overview") {
            read_by.extend(metric_like_names(&exprs(&d).join("\n")));
        }
    }
    let families: BTreeSet<&str> = read_by
        .iter()
        .filter_map(|m| family_of(m).map(|d| d.name))
        .collect();
    let blinded: Vec<&String> = excluded
        .iter()
        .filter(|x| families.contains(x.as_str()))
        .collect();
    assert!(
        blinded.is_empty(),
        "excluded but read by alerts or the overview: {blinded:?}"
    );
}

/// The probe families a target that has done nothing yet writes: one connection, a functional
/// probe and credentials, so every family created with the target is there. Its one token
/// request succeeded: both token request series are born at the first request, and the alert
/// that reads their failures needs a token in use, which only a successful request gives.
fn families_written_from_the_start() -> BTreeSet<String> {
    use mcp_client::oauth::TokenEvents as _;
    let telemetry = mcp_exporter::telemetry::Telemetry::new();
    let target = telemetry.add_target("t", 1, &["tool".to_string()]);
    let _sink = target.auth_failures();
    target.token_request(true);
    let _conn = target.connection(0);
    telemetry
        .render()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.split(['{', ' ']).next())
        .filter_map(|series| family_of(series).map(|d| d.name.to_string()))
        .collect()
}

/// Counters written from their first event (docs/scaling.md) reach `increase()` and `rate()`
/// only from their second: the series is born at 1. So an alert that fires on one event reads
/// a counter written at 0 from the start; one written from its first event is read only by an
/// alert that holds for at least 10 minutes, which needs the anomaly to go on and loses one
/// event's time, not the alert.
#[test]
fn no_alert_misses_the_first_increase_of_a_counter() {
    let rules: yaml_serde::Value =
        yaml_serde::from_str(&read(&repo_dir("alerts").join("mcp_exporter.rules.yml")))
            .expect("alert rules parse");
    let at_start = families_written_from_the_start();
    assert!(
        at_start.contains("mcp_probe_unannounced_changes_total"),
        "{at_start:?}"
    );
    let mut problems = Vec::new();
    let mut checked = 0;
    let groups = rules["groups"].as_sequence().expect("groups");
    for rule in groups
        .iter()
        .flat_map(|g| g["rules"].as_sequence().expect("rules"))
    {
        let Some(alert) = rule["alert"].as_str() else {
            continue;
        };
        let expr = rule["expr"].as_str().expect("expr");
        let held = rule["for"]
            .as_str()
            .map(|f| humantime::parse_duration(f).expect("for: a duration"))
            .unwrap_or_default();
        for name in metric_like_names(expr) {
            let Some(def) = family_of(&name) else {
                continue;
            };
            if !def.name.starts_with("mcp_probe_")
                || def.kind != exposition::Kind::Counter
                || !(expr.contains(&format!("increase({name}"))
                    || expr.contains(&format!("rate({name}")))
            {
                continue;
            }
            checked += 1;
            if !at_start.contains(def.name) && held < std::time::Duration::from_secs(600) {
                problems.push(format!(
                    "{alert} (for: {held:?}) fires on the first increase of {name}, which is written only from its first event"
                ));
            }
        }
    }
    assert!(checked >= 8, "only {checked} counters read by alerts");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
