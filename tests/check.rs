//! `mcp_exporter check URL`, run as the real binary against the lab's scenarios and against an
//! rmcp server: exit codes, the rows that name each problem, the JSON schema, and secrets that
//! never reach the output.

mod common;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use common::{DEADLINE, free_port, start_lab};
use mcp_lab::{Lab, scenarios};
use serde_json::Value;

/// What one run printed and how it ended.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().expect("exited, not killed"),
            stdout: String::from_utf8(out.stdout).expect("UTF-8 stdout"),
            stderr: String::from_utf8(out.stderr).expect("UTF-8 stderr"),
        }
    }

    /// The detail of the row `STATUS  id  detail`, if the report has that row.
    fn row(&self, status: &str, id: &str) -> Option<&str> {
        self.stdout.lines().find_map(|l| {
            let mut parts = l.splitn(2, char::is_whitespace);
            (parts.next()? == status)
                .then(|| parts.next())?
                .map(str::trim_start)
                .and_then(|rest| rest.strip_prefix(id))
                .filter(|d| d.starts_with(' '))
                .map(str::trim_start)
        })
    }

    /// Like [`Run::row`], failing the test with the whole report when the row is missing.
    fn expect(&self, status: &str, id: &str) -> &str {
        self.row(status, id).unwrap_or_else(|| {
            panic!(
                "no {status} {id} row (exit {})\n{}\n{}",
                self.code, self.stdout, self.stderr
            )
        })
    }

    /// Assert the exit code and the verdict of the summary line.
    fn ended(&self, code: i32, verdict: &str) {
        let line = format!("result: {verdict}, exit {code} (");
        assert!(
            self.code == code && self.stdout.contains(&line),
            "wanted {line:?}, got exit {}\n{}\n{}",
            self.code,
            self.stdout,
            self.stderr
        );
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("{e}\n{}", self.stdout))
    }
}

fn command(args: &[String], envs: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"));
    cmd.arg("check")
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

/// Run `mcp_exporter check ARGS` to completion (off the runtime, so the lab keeps serving).
async fn check(args: &[&str], envs: &[(&str, &str)]) -> Run {
    let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    let envs: Vec<(String, String)> = envs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let envs: Vec<(&str, &str)> = envs.iter().map(|(k, v)| (&**k, &**v)).collect();
        Run::from(command(&args, &envs).output().expect("check runs"))
    })
    .await
    .expect("check thread")
}

/// A lab serving the named scenarios' behaviours, each at `/<name>/mcp`, without churn.
async fn lab(names: &[&str]) -> Lab {
    let profiles = names.iter().map(|n| {
        let s = scenarios::find(n).unwrap_or_else(|| panic!("no scenario {n}"));
        (n.to_string(), s.behaviour)
    });
    start_lab(profiles).await
}

fn url(lab: &Lab, profile: &str) -> String {
    lab.url(profile).to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_healthy_server_passes_with_two_pages_and_fourteen_tools() {
    let lab = lab(&["healthy"]).await;
    let run = check(&[&url(&lab, "healthy")], &[]).await;
    run.ended(0, "pass");
    assert!(
        run.expect("PASS", "tools_list")
            .starts_with("2 page(s) (8 + 6), 14 tools"),
        "{}",
        run.stdout
    );
    for id in [
        "initialize",
        "protocol_version",
        "capabilities",
        "notification_stream",
        "duplicates",
        "tool_names",
        "stable_listing",
        "ping",
        "contract",
    ] {
        run.expect("PASS", id);
    }
    // Every other list the lab declares is walked twice by the same walker, one row each.
    for (id, count) in [
        ("prompts_list", "2 page(s) (8 + 2), 10 prompts"),
        ("resources_list", "2 page(s) (8 + 4), 12 resources"),
        (
            "resource_templates_list",
            "1 page(s) (3), 3 resource templates",
        ),
    ] {
        let detail = run.expect("PASS", id);
        assert!(detail.starts_with(count), "{detail}");
        assert!(
            detail.contains("listed twice; second walk: the same"),
            "{detail}"
        );
    }
    assert!(
        run.expect("PASS", "capabilities")
            .ends_with("also lists prompts, resources, resource_templates")
    );
    assert!(
        run.stdout
            .contains("protocol 2026-07-28, listen stream open"),
        "the era's channel is named: {}",
        run.stdout
    );
    assert!(
        !run.stdout.contains("FAIL") && !run.stdout.contains("WARN"),
        "{}",
        run.stdout
    );
}

/// The contract row: a 2026-07-28 server that promises nothing (no listChanged, ttlMs 0) is
/// information, not a warning: its clients must re-list before every use. The same server to a
/// client pinned to 2025-11-25 is a warning: legacy clients cache anyway (F2).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_promises_nothing_is_information_in_2026_and_a_warning_in_2025() {
    let silent = mcp_lab::Behaviour {
        ttl_ms: 0,
        ..mcp_lab::scenarios::find("no-list-changed")
            .expect("scenario")
            .behaviour
    };
    let lab = start_lab([("silent", silent)]).await;
    let run = check(&[&url(&lab, "silent")], &[]).await;
    run.ended(0, "pass");
    let detail = run.expect("INFO", "contract");
    assert!(detail.contains("re-list before every use"), "{detail}");
    let legacy = check(
        &["--protocol-version", "2025-11-25", &url(&lab, "silent")],
        &[],
    )
    .await;
    legacy.ended(0, "pass with warnings");
    let detail = legacy.expect("WARN", "contract");
    assert!(detail.contains("(F2)"), "{detail}");
    assert!(
        legacy.stdout.contains("protocol 2025-11-25, GET stream"),
        "{}",
        legacy.stdout
    );
    // What its 2025-era clients get: a legacy session that declares no listChanged.
    let asked = check(&["--legacy-clients", &url(&lab, "silent")], &[]).await;
    let detail = asked.expect("WARN", "legacy_clients");
    assert!(detail.contains("declares no listChanged"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn broken_pagination_and_duplicates_exit_1_naming_the_problem() {
    let lab = lab(&[
        "repeated-cursor",
        "endless-cursors",
        "offset-cursor-churn",
        "cursor-rejected",
    ])
    .await;
    let cases = [
        ("repeated-cursor", "tools_list", "repeated cursor"),
        (
            "endless-cursors",
            "tools_list",
            "loop cap: still a nextCursor after 5 pages",
        ),
        ("offset-cursor-churn", "duplicates", "listed more than once"),
        ("cursor-rejected", "tools_list", "cursor error on page 2"),
    ];
    for (profile, id, says) in cases {
        let run = check(&["--max-pages", "5", &url(&lab, profile)], &[]).await;
        run.ended(1, "fail");
        let detail = run.expect("FAIL", id);
        assert!(detail.contains(says), "{profile}: {detail}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_over_the_byte_cap_fails_naming_the_cap() {
    let lab = lab(&["endless-cursors"]).await;
    // Pages without end: the smallest budget (4 KiB) runs out long before the 64-page cap.
    let endless = url(&lab, "endless-cursors");
    let run = check(&["--max-listing-bytes", "4KiB", &endless], &[]).await;
    run.ended(1, "fail");
    let detail = run.expect("FAIL", "tools_list");
    assert!(detail.contains("max_listing_bytes"), "{detail}");
    let bad = check(&["--max-listing-bytes", "lots", &endless], &[]).await;
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("not a size"), "{}", bad.stderr);
    // The configuration's rule: between 4KiB and 64MiB.
    for size in ["1KiB", "65MiB"] {
        let bad = check(&["--max-listing-bytes", size, &endless], &[]).await;
        assert_eq!(bad.code, 2, "{}", bad.stderr);
        assert!(
            bad.stderr.contains("between 4KiB and 64MiB"),
            "{}",
            bad.stderr
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_changed_without_a_get_stream_is_a_warning() {
    let lab = lab(&["no-get-stream"]).await;
    // The lab serves both eras: auto picks the modern one, whose channel is subscriptions/listen.
    let run = check(&[&url(&lab, "no-get-stream")], &[]).await;
    run.ended(0, "pass with warnings");
    let detail = run.expect("WARN", "notification_stream");
    assert!(
        detail.contains("subscriptions/listen") && detail.contains("F3"),
        "{detail}"
    );
    assert!(
        !run.stdout.contains("legacy_clients"),
        "the legacy path is checked only when asked"
    );
    let asked = check(&["--legacy-clients", &url(&lab, "no-get-stream")], &[]).await;
    asked.ended(0, "pass with warnings");
    let legacy_path = asked.expect("WARN", "legacy_clients");
    assert!(
        legacy_path.contains("no GET stream") && legacy_path.contains("2025-era clients"),
        "{legacy_path}"
    );
    let legacy = check(
        &[
            "--protocol-version",
            "2025-11-25",
            &url(&lab, "no-get-stream"),
        ],
        &[],
    )
    .await;
    legacy.ended(0, "pass with warnings");
    let detail = legacy.expect("WARN", "notification_stream");
    assert!(detail.contains("405") && detail.contains("F3"), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_exits_2() {
    let port = free_port();
    let run = check(
        &["--timeout", "5s", &format!("http://127.0.0.1:{port}/mcp")],
        &[],
    )
    .await;
    assert_eq!(run.code, 2, "{}\n{}", run.stdout, run.stderr);
    assert!(
        run.expect("ERROR", "initialize").contains("connect"),
        "{}",
        run.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unusable_arguments_exit_2_before_any_request() {
    let lab = lab(&["healthy"]).await;
    let target = url(&lab, "healthy");
    for args in [
        vec!["--header", "Bad Name: hunter2-value", &target],
        vec!["--header", "X-Token: ${CHECK_TEST_UNSET_VARIABLE}", &target],
        vec![
            "--call",
            "kb_stats",
            "--arguments",
            "[\"hunter2-value\"]",
            &target,
        ],
        vec!["--protocol-version", "1999-01-01", &target],
        vec!["not a url with hunter2-value"],
    ] {
        let run = check(&args, &[]).await;
        assert_eq!(run.code, 2, "{args:?}\n{}\n{}", run.stdout, run.stderr);
        assert!(!run.stderr.contains("hunter2"), "{}", run.stderr);
    }
    assert_eq!(lab.initializes("healthy"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn call_runs_read_only_tools_and_the_guard_refuses_the_others() {
    let lab = lab(&["healthy"]).await;
    let target = url(&lab, "healthy");

    let run = check(&["--call", "kb_stats", &target], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(run.expect("PASS", "call").starts_with("kb_stats answered"));
    assert_eq!(lab.tools_calls(), 1);

    let run = check(&["--call", "kb_write_document", &target], &[]).await;
    assert_eq!(run.code, 2, "{}", run.stdout);
    let detail = run.expect("ERROR", "call");
    assert!(
        detail.starts_with("side_effect_guard") && detail.contains("--allow-side-effects"),
        "{detail}"
    );
    assert_eq!(lab.tools_calls(), 1, "the guard let a write through");

    let run = check(
        &[
            "--call",
            "kb_write_document",
            "--arguments",
            r#"{"document_id": "d1", "body": "x"}"#,
            "--allow-side-effects",
            &target,
        ],
        &[],
    )
    .await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    run.expect("PASS", "call");
    assert_eq!(lab.tools_calls(), 2);

    let run = check(&["--call", "search_v9", &target], &[]).await;
    assert_eq!(run.code, 1, "{}", run.stdout);
    assert!(run.expect("FAIL", "call").starts_with("unknown_tool"));
}

/// Run `check --listen-for 5s` against one scenario and redeploy the lab once both walks are
/// done, while the check listens.
async fn listen_through_a_redeploy(scenario: &str) -> Run {
    let lab = lab(&[scenario]).await;
    let args = vec!["--listen-for".to_string(), "5s".into(), url(&lab, scenario)];
    let child = command(&args, &[]).spawn().expect("check starts");
    // Both walks (2 pages each) are done: the check is listening with its stream open.
    let start = tokio::time::Instant::now();
    while lab.tools_list_calls() < 4 {
        assert!(start.elapsed() < DEADLINE, "the check never walked twice");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    lab.churn();
    tokio::task::spawn_blocking(move || Run::from(child.wait_with_output().unwrap()))
        .await
        .unwrap()
}

/// Listen through a redeploy of `scenario`; the run ends `code, verdict` with a `status`
/// list_changed row containing every one of `needles`.
async fn listen_verdict(scenario: &str, code: i32, verdict: &str, status: &str, needles: &[&str]) {
    let run = listen_through_a_redeploy(scenario).await;
    run.ended(code, verdict);
    let detail = run.expect(status, "list_changed");
    assert!(needles.iter().all(|n| detail.contains(n)), "{detail}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_for_sees_list_changed_and_reports_the_change() {
    let change = "added search_v2; removed search_legacy";
    listen_verdict("healthy", 0, "pass", "PASS", &[change]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_without_the_promised_notification_fails() {
    let change = "yet the list changed: added search_v2; removed search_legacy";
    listen_verdict("notification-lost", 1, "fail", "FAIL", &[change, "(F1)"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_on_a_server_without_list_changed_is_a_warning() {
    // The dual lab is spoken to in the 2026-07-28 era, where its listings promise 60 s (ttlMs):
    // clients caching for that long serve the old list.
    let needles = ["yet the list changed", "announces nothing", "ttlMs"];
    listen_verdict("no-list-changed", 0, "pass with warnings", "WARN", &needles).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_list_changed_within_the_window_is_information() {
    let lab = lab(&["healthy"]).await;
    let run = check(&["--listen-for", "300ms", &url(&lab, "healthy")], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    assert!(
        run.expect("INFO", "list_changed")
            .starts_with("no notifications/tools/list_changed within 300ms")
    );
    assert!(run.stdout.contains("a final walk found the list unchanged"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_follows_the_documented_schema() {
    let lab = lab(&["healthy", "repeated-cursor"]).await;
    let run = check(&["--format", "json", &url(&lab, "healthy")], &[]).await;
    assert_eq!(run.code, 0, "{}", run.stdout);
    let v = run.json();
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "checks",
            "exit_code",
            "lists",
            "result",
            "schema_version",
            "server",
            "url_redacted",
            "walks"
        ]
    );
    assert_eq!(v["schema_version"], 1);
    assert_eq!(v["result"], "pass");
    assert_eq!(v["exit_code"], 0);
    assert_eq!(v["server"]["protocol_version"], "2026-07-28");
    assert_eq!(v["server"]["tools_list_changed"], true);
    assert_eq!(v["server"]["notification_stream"], true);
    for walk in v["walks"].as_array().unwrap() {
        assert_eq!(walk["pages"], serde_json::json!([8, 6]), "{walk}");
        assert_eq!(walk["tools"], 14);
        assert_eq!(walk["complete"], true);
    }
    for c in v["checks"].as_array().unwrap() {
        assert!(c["id"].is_string() && c["detail"].is_string(), "{c}");
        let status = c["status"].as_str().unwrap();
        assert!(["pass", "info"].contains(&status), "{c}");
    }
    assert_eq!(
        v["server"]["lists"],
        serde_json::json!(["tools", "prompts", "resources", "resource_templates"])
    );
    let lists: Vec<(&str, u64)> = v["lists"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            let walks = l["walks"].as_array().unwrap();
            assert_eq!(walks.len(), 2, "{l}");
            assert!(walks.iter().all(|w| w["complete"] == true), "{l}");
            (
                l["list"].as_str().unwrap(),
                walks[0]["items"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        lists,
        [
            ("prompts", 10),
            ("resources", 12),
            ("resource_templates", 3)
        ]
    );

    let run = check(&["--format", "json", &url(&lab, "repeated-cursor")], &[]).await;
    assert_eq!(run.code, 1);
    let v = run.json();
    assert_eq!(
        (v["result"].as_str(), v["exit_code"].as_u64()),
        (Some("fail"), Some(1))
    );
    let failed: Vec<&str> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["status"] == "fail")
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    // The lab's one paginator repeats its cursors in every list: each list's row fails.
    assert_eq!(
        failed,
        [
            "tools_list",
            "prompts_list",
            "resources_list",
            "resource_templates_list"
        ]
    );
    assert_eq!(v["walks"][0]["complete"], false);
    assert_eq!(v["lists"][0]["walks"][0]["complete"], false);
    assert_eq!(v["lists"][0]["walks"].as_array().map(Vec::len), Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_in_the_url_and_headers_never_reach_the_output() {
    const URL_SECRET: &str = "url-s3cr3t-4711";
    const HEADER_SECRET: &str = "header-s3cr3t-0815";
    // A token in the path (issue 22 item 8): hidden by the URL redaction rule.
    const PATH_SECRET: &str = "sk-path5ecret";
    let lab = lab(&["healthy"]).await;
    let addr = lab.addr();
    let dead = free_port();
    for base in [
        format!("http://{addr}/healthy/mcp"),
        format!("http://127.0.0.1:{dead}/mcp"),
        format!("http://127.0.0.1:{dead}/mcp/{PATH_SECRET}/"),
    ] {
        let with_secret = base.replacen("http://", &format!("http://user:{URL_SECRET}@"), 1)
            + &format!("?token={URL_SECRET}");
        for format in ["text", "json"] {
            let run = check(
                &[
                    "--format",
                    format,
                    "--header",
                    "Authorization: Bearer ${CHECK_TEST_TOKEN}",
                    "--timeout",
                    "5s",
                    &with_secret,
                ],
                &[("CHECK_TEST_TOKEN", HEADER_SECRET)],
            )
            .await;
            for secret in [URL_SECRET, HEADER_SECRET, PATH_SECRET] {
                assert!(
                    !run.stdout.contains(secret) && !run.stderr.contains(secret),
                    "{secret} leaked\n{}\n{}",
                    run.stdout,
                    run.stderr
                );
            }
            assert!(run.stdout.contains("<redacted>"), "{}", run.stdout);
        }
    }
}

mod rmcp_server {
    //! A small rmcp server: 5 tools over pages of 2, cursors are the next index.

    use std::borrow::Cow;
    use std::sync::Arc;

    use rmcp::model::{
        Implementation, JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
        ServerCapabilities, ServerConfig, Tool,
    };
    use rmcp::service::RequestContext;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    use rmcp::{ErrorData, RoleServer, ServerHandler};

    const NAMES: [&str; 5] = ["alpha", "beta.read", "gamma-list", "delta_get", "epsilon"];

    #[derive(Clone)]
    struct Five;

    impl ServerHandler for Five {
        fn get_info(&self) -> ServerConfig {
            let caps = ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build();
            ServerConfig::new(caps)
                .with_server_info(Implementation::new("check-five", "0.0.1"))
                .with_protocol_version(ProtocolVersion::V_2025_11_25)
        }

        fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
            Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
        }

        async fn list_tools(
            &self,
            request: Option<PaginatedRequestParams>,
            _context: RequestContext<RoleServer>,
        ) -> Result<ListToolsResult, ErrorData> {
            let from = match request.and_then(|r| r.cursor) {
                None => 0,
                Some(c) => c
                    .parse::<usize>()
                    .ok()
                    .filter(|i| *i < NAMES.len())
                    .ok_or_else(|| ErrorData::invalid_params("unknown cursor", None))?,
            };
            let to = (from + 2).min(NAMES.len());
            let mut schema = JsonObject::new();
            schema.insert("type".into(), serde_json::json!("object"));
            let schema = Arc::new(schema);
            let page = NAMES[from..to]
                .iter()
                .map(|n| Tool::new(n.to_string(), format!("tool {n}"), schema.clone()))
                .collect();
            Ok(ListToolsResult {
                next_cursor: (to < NAMES.len()).then(|| to.to_string()),
                ..ListToolsResult::with_all_items(page)
            })
        }
    }

    /// Serve it on an ephemeral loopback port; the endpoint URL.
    pub async fn serve() -> String {
        let service = StreamableHttpService::new(
            || Ok(Five),
            Arc::new(LocalSessionManager::default()),
            StreamableHttpServerConfig::default().with_legacy_session_mode(true),
        );
        let router = axum::Router::new().nest_service("/mcp", service);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
        format!("http://{addr}/mcp")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rmcp_server_passes() {
    let url = rmcp_server::serve().await;
    let run = check(&["--format", "json", &url], &[]).await;
    assert_eq!(run.code, 0, "{}\n{}", run.stdout, run.stderr);
    let v = run.json();
    assert_eq!(v["server"]["name"], "check-five");
    assert_eq!(v["walks"][0]["pages"], serde_json::json!([2, 2, 1]));
    let statuses: Vec<(&str, &str)> = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap(), c["status"].as_str().unwrap()))
        .collect();
    for id in [
        "tools_list",
        "duplicates",
        "tool_names",
        "stable_listing",
        "ping",
    ] {
        assert!(statuses.contains(&(id, "pass")), "{id}: {statuses:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_change_while_the_stream_was_cut_is_a_warning_not_a_failure() {
    use mcp_lab::Behaviour;
    // A proxy cuts the GET stream 2 s in and the list changes in the gap (F4): a correct
    // client re-opens the stream and re-lists, so it catches up; the check does the same and
    // must not call that F1.
    let behaviour = Behaviour {
        stream_close_after: Some(Duration::from_secs(2)),
        change_in_stream_gap: true,
        ..Behaviour::default()
    };
    let lab = start_lab([("cut", behaviour)]).await;
    let run = check(&["--listen-for", "6s", &url(&lab, "cut")], &[]).await;
    run.ended(0, "pass with warnings");
    let detail = run.expect("WARN", "list_changed");
    assert!(
        detail.contains("the listen stream ended")
            && detail.contains("was re-opened")
            && detail.contains("added search_v2; removed search_legacy")
            && detail.contains("(F4)"),
        "{detail}"
    );
}

/// `check -- PROGRAM`: a local server over stdio (the official Rust SDK as a child process) is
/// checked like a URL: a legacy session on its own channel, both pages walked, a tool called.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_is_checked_after_a_double_dash() {
    let peer = common::example("rmcp_stdio_peer");
    let peer = peer.to_str().expect("a UTF-8 path");
    let run = check(
        &["--call", "add_tool", "--allow-side-effects", "--", peer],
        &[],
    )
    .await;
    run.ended(0, "pass");
    let stream = run.expect("PASS", "notification_stream");
    assert!(stream.contains("own channel"), "{stream}");
    let list = run.expect("PASS", "tools_list");
    assert!(list.contains("2 page(s) (2 + 2), 4 tools"), "{list}");
    run.expect("PASS", "call");
    let headers = check(&["--header", "A: b", "--", peer], &[]).await;
    assert_eq!(headers.code, 2, "{}", headers.stderr);
}

/// Run `mcp_exporter pin URL`; the pins file is its stdout.
async fn pin(url: &str) -> Run {
    let url = url.to_string();
    tokio::task::spawn_blocking(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
            .args(["pin", &url])
            .stdin(Stdio::null())
            .output()
            .expect("pin runs");
        Run::from(out)
    })
    .await
    .expect("pin thread")
}

/// `pin` writes every list the lab declares; `check --pins` judges each pinned list, one row
/// per list, and after a redeploy names the retired prompt, resource and template.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_cover_prompts_resources_and_templates_and_a_redeploy_breaks_each() {
    let lab = lab(&["healthy"]).await;
    let target = url(&lab, "healthy");
    let pinned = pin(&target).await;
    assert_eq!(pinned.code, 0, "{}", pinned.stderr);
    let file: Value = serde_json::from_str(&pinned.stdout).expect("a JSON pins file");
    let keys = |section: &str, field: &str| -> Vec<String> {
        file[section]
            .as_array()
            .unwrap_or_else(|| panic!("no {section} section"))
            .iter()
            .map(|e| e[field].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys("tools", "name").len(), 14);
    assert_eq!(keys("prompts", "name").len(), 10);
    assert!(keys("prompts", "name").contains(&"summarize_legacy".into()));
    assert_eq!(keys("resources", "uri").len(), 12);
    assert!(keys("resources", "uri").contains(&"kb://collections/legacy-index".into()));
    assert_eq!(
        keys("resource_templates", "uriTemplate").len(),
        3,
        "{}",
        pinned.stdout
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kb.pins.json");
    std::fs::write(&path, &pinned.stdout).unwrap();
    let pins_arg = format!("--pins={}", path.display());

    let run = check(&[&pins_arg, &target], &[]).await;
    run.ended(0, "pass");
    for (id, what) in [
        ("pins", "all 14 pinned tools"),
        ("prompts_pins", "all 10 pinned prompts"),
        ("resources_pins", "all 12 pinned resources"),
        ("resource_templates_pins", "all 3 pinned resource templates"),
    ] {
        assert!(run.expect("PASS", id).starts_with(what), "{}", run.stdout);
    }

    lab.churn();
    let run = check(&[&pins_arg, &target], &[]).await;
    run.ended(1, "fail");
    for (id, retired, successor) in [
        ("pins", "search_legacy", "search_v2"),
        ("prompts_pins", "summarize_legacy", "summarize_v2"),
        (
            "resources_pins",
            "\"kb://collections/legacy-index\"",
            "\"kb://collections/index-v1\"",
        ),
        (
            "resource_templates_pins",
            "\"kb://search/legacy{?q}\"",
            "kb://search/v1",
        ),
    ] {
        let detail = run.expect("FAIL", id);
        assert!(
            detail.contains(&format!("{retired} (pinned, not listed)")),
            "{detail}"
        );
        assert!(
            detail.contains("not pinned: ") && detail.contains(successor),
            "{detail}"
        );
    }
}

/// A pins file written before prompts and resources were pinned (tools alone) is judged as it
/// always was: one `pins` row, the other lists walked but not judged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_only_pins_file_is_judged_as_before() {
    let lab = lab(&["healthy"]).await;
    let target = url(&lab, "healthy");
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("tools.pins.json");
    let text = mcp_client::listing::changes::pins::render(&mcp_lab::kb::tools(0));
    assert!(!text.contains("\"prompts\""), "{text}");
    std::fs::write(&path, text).unwrap();
    let pins_arg = format!("--pins={}", path.display());

    let run = check(&[&pins_arg, &target], &[]).await;
    run.ended(0, "pass");
    assert_eq!(
        run.expect("PASS", "pins"),
        "all 14 pinned tools are served as pinned; no unpinned tool"
    );
    lab.churn();
    let run = check(&[&pins_arg, &target], &[]).await;
    run.ended(1, "fail");
    assert_eq!(
        run.expect("FAIL", "pins"),
        "differ from the pins: search_legacy (pinned, not listed); not pinned: search_v2; \
         approve a change by re-pinning (mcp_exporter pin URL > FILE)"
    );
    for id in ["prompts_pins", "resources_pins", "resource_templates_pins"] {
        assert!(!run.stdout.contains(id), "{id} judged: {}", run.stdout);
    }
    // The prompts changed too, and are reported as listed, not as pinned.
    run.expect("PASS", "prompts_list");
}
