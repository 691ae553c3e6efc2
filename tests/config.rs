//! The configuration file through the binary, as an operator meets it: `example.yml` passes
//! `--config.check` as shipped, a hostile file is refused with the reason and its place, and a
//! reload to zero targets succeeds but is logged as a warning.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::Exporter;
use mcp_exporter::config::{Config, Endpoint};

fn config_check(path: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .arg("--config.check")
        .arg(format!("--config.file={}", path.display()))
        .env_remove("KB_TOKEN")
        .output()
        .expect("the exporter runs")
}

#[test]
fn example_yml_passes_config_check_as_shipped() {
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("example.yml");
    let out = config_check(&example);
    assert!(
        out.status.success(),
        "example.yml fails --config.check without KB_TOKEN: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn config_check_refuses_hostile_files_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "deep.yml",
            // The report's file: a flow sequence nested 100,000 deep, 200 KB.
            format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
            "deep.yml: line 1 column 65: nested deeper than 64 levels",
        ),
        (
            "no_host.yml",
            "targets:\n  - name: kb\n    url: http:///mcp\n".to_string(),
            "no_host.yml: targets[0].url: URL has no host",
        ),
        (
            "big.yml",
            format!("# {}\n", "x".repeat(4 << 20)),
            "big.yml: configuration file is larger than 4194304 bytes (4 MiB)",
        ),
    ];
    for (name, text, want) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let out = config_check(&path);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} passed --config.check");
        assert!(
            stderr.contains(want),
            "{name}: expected {want:?} in {stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_to_zero_targets_succeeds_with_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(
        &path,
        "targets:\n  - name: kb\n    url: http://127.0.0.1:1/mcp\n",
    )
    .unwrap();
    let e = Exporter::spawn(
        &[
            format!("--config.file={}", path.display()),
            "--web.enable-lifecycle".into(),
        ],
        &[],
    );
    e.until_metrics("one target", |s| s.v("mcp_exporter_targets", &[]) == 1.0)
        .await;

    std::fs::write(&path, "# every target removed\ntargets: []\n").unwrap();
    let resp = e.reload().await;
    assert_eq!(resp.status(), 200, "an empty configuration is valid");
    let s = e
        .until_metrics("zero targets applied", |s| {
            s.v("mcp_exporter_targets", &[]) == 0.0
                && s.v(
                    "mcp_exporter_config_reloads_total",
                    &[("result", "success")],
                ) == 2.0
        })
        .await;
    assert_eq!(s.v("mcp_exporter_config_last_reload_successful", &[]), 1.0);
    let logs = e.logs();
    let warning = logs
        .lines()
        .find(|l| l.contains("configuration has no targets"))
        .unwrap_or_else(|| panic!("no warning about zero targets:\n{logs}"));
    assert!(
        warning.to_ascii_lowercase().contains("warn"),
        "not a warning: {warning}"
    );
    assert!(warning.contains("stopped=1"), "{warning}");
}

// --- target kinds: url (with transport) or command -------------------------------------------

const SENTINEL: &str = "s3cr3t-stdio-token";

/// `--config.check` of `text` written to `dir/name`, with `FILES_TOKEN` set to the sentinel.
fn check_text(dir: &Path, name: &str, text: &str) -> Output {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .arg("--config.check")
        .arg(format!("--config.file={}", path.display()))
        .env("FILES_TOKEN", SENTINEL)
        .env_remove("NOT_SET_ANYWHERE")
        .output()
        .expect("the exporter runs");
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !all.contains(SENTINEL),
        "{name}: a secret was printed: {all}"
    );
    out
}

#[test]
fn config_check_accepts_and_lists_every_target_kind() {
    let dir = tempfile::tempdir().unwrap();
    let text = "\
targets:
  - name: kb
    url: https://u:pw@kb.example.com/mcp?key=k
  - name: modern
    url: https://modern.example.com/mcp
    transport: streamable_http
  - name: legacy
    url: https://legacy.example.com/sse
    transport: sse
  - name: files
    command: /usr/local/bin/files-mcp
    args: [--root, /srv/share, --read-only]
    env:
      FILES_TOKEN: 'Bearer ${FILES_TOKEN}'
    cwd: /srv/share
";
    let out = check_text(dir.path(), "kinds.yml", text);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines[0].ends_with("kinds.yml: OK, 4 target(s)"), "{stdout}");
    assert_eq!(
        &lines[1..],
        [
            "  kb: https://u:<redacted>@kb.example.com/mcp?<redacted>",
            "  modern: https://modern.example.com/mcp (transport streamable_http)",
            "  legacy: https://legacy.example.com/sse (transport sse)",
            "  files: command /usr/local/bin/files-mcp (3 arguments)",
        ]
    );
}

#[test]
fn config_check_refuses_a_mixed_or_incomplete_target_by_name_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "both.yml",
            "targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n    command: kb-server\n",
            "both.yml: targets[0].command: target \"kb\" sets both `url` and `command`",
        ),
        (
            "neither.yml",
            "targets:\n  - name: kb\n    connections: 2\n",
            "neither.yml: targets[0].url: required: `url` (the MCP endpoint, for example \
             https://mcp.example.com/mcp) or `command`",
        ),
        (
            "headers.yml",
            "targets:\n  - name: files\n    command: files-mcp\n    headers:\n      Authorization: x\n",
            "headers.yml: targets[0].headers: target \"files\" runs a `command` (stdio): `headers` \
             applies only to a target with a `url`",
        ),
        (
            "transport.yml",
            "targets:\n  - name: files\n    command: files-mcp\n    transport: sse\n",
            "transport.yml: targets[0].transport: target \"files\" runs a `command` (stdio)",
        ),
        (
            "args.yml",
            "targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n    args: [--stdio]\n",
            "args.yml: targets[0].args: target \"kb\" has a `url`: `args` applies only to a target \
             with a `command`",
        ),
        (
            "empty.yml",
            "targets:\n  - name: files\n    command: ''\n",
            "empty.yml: targets[0].command: command is empty",
        ),
        (
            "shell.yml",
            "targets:\n  - name: files\n    command: npx -y files-mcp\n",
            "shell.yml: targets[0].command: command must not contain whitespace",
        ),
        (
            "unset.yml",
            "targets:\n  - name: files\n    command: files-mcp\n    env:\n      TOKEN: '${NOT_SET_ANYWHERE}'\n",
            "unset.yml: targets[0].env.TOKEN: environment variable NOT_SET_ANYWHERE is not set",
        ),
        (
            "unknown_transport.yml",
            "targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n    transport: ws\n",
            "unknown_transport.yml: targets[0].transport: unknown transport \"ws\"; allowed \
             values: auto, streamable_http, sse",
        ),
    ];
    for (name, text, want) in cases {
        let out = check_text(dir.path(), name, text);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name} passed --config.check");
        assert!(
            stderr.contains(want),
            "{name}: expected {want:?} in {stderr}"
        );
    }
}

#[test]
fn env_values_are_expanded_and_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("env.yml");
    std::fs::write(
        &path,
        "targets:\n  - name: files\n    command: files-mcp\n    env:\n      TOKEN: 'Bearer ${MCP_EXPORTER_TEST_STDIO_TOKEN}'\n      MODE: ro\n",
    )
    .unwrap();
    // SAFETY: a variable only this test reads.
    unsafe { std::env::set_var("MCP_EXPORTER_TEST_STDIO_TOKEN", SENTINEL) };
    let c = Config::load(&path).expect("valid");
    let Endpoint::Command(spec) = &c.targets[0].endpoint else {
        panic!("not a command target");
    };
    assert_eq!(spec.env[0].0, "TOKEN");
    assert_eq!(spec.env[0].1.expose(), format!("Bearer {SENTINEL}"));
    assert_eq!(spec.env[1].1.expose(), "ro");
    assert_eq!(c.targets[0].url(), None);
    let shown = format!("{c:?} {}", c.targets[0].endpoint);
    assert!(!shown.contains(SENTINEL), "{shown}");
    assert!(shown.contains("TOKEN"), "{shown}");
}

#[test]
fn relative_command_and_cwd_are_resolved_against_the_config_directory() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("stdio.yml");
    std::fs::write(
        &path,
        "targets:\n  - name: here\n    command: ./bin/files-mcp\n    cwd: data\n  - name: on_path\n    command: files-mcp\n",
    )
    .unwrap();
    let c = Config::load(&path).expect("valid");
    let spec = |i: usize| match &c.targets[i].endpoint {
        Endpoint::Command(spec) => spec.clone(),
        other => panic!("not a command target: {other:?}"),
    };
    assert_eq!(spec(0).command, dir.path().join("./bin/files-mcp"));
    assert_eq!(spec(0).cwd, Some(dir.path().join("data")));
    // A bare name is looked up in PATH when the program starts; no cwd: the exporter's own.
    assert_eq!(spec(1).command, Path::new("files-mcp"));
    assert_eq!(spec(1).cwd, None);
}

#[test]
fn config_check_refuses_a_proxys_bad_catalog_credentials_by_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let base = "proxies:\n  - name: kb\n    listen: 127.0.0.1:10119\n    upstream: https://kb.example.com/mcp\n";
    std::fs::write(dir.path().join("catalog.token"), format!("{SENTINEL}\n")).unwrap();
    // A proxy with a target's credentials (relative files resolved against the config's folder).
    let ok = check_text(
        dir.path(),
        "ok.yml",
        &format!(
            "{base}    authorization:\n      credentials_file: catalog.token\n    headers:\n      X-Key: ${{FILES_TOKEN}}\n"
        ),
    );
    assert!(ok.status.success(), "{ok:?}");
    for (name, extra, want) in [
        (
            "missing.yml",
            "    authorization:\n      credentials_file: nope.token\n",
            "proxies[0].authorization.credentials_file: cannot read ",
        ),
        (
            "typo.yml",
            "    oauth2:\n      client_id: c\n      client_secrt: x\n",
            "unknown field `client_secrt`",
        ),
        (
            "unknown.yml",
            "    bearer_token: x\n",
            "unknown field `bearer_token`",
        ),
        (
            "unset.yml",
            "    headers:\n      X-Key: ${NOT_SET_ANYWHERE}\n",
            "proxies[0].headers.X-Key: environment variable NOT_SET_ANYWHERE is not set",
        ),
    ] {
        let out = check_text(dir.path(), name, &format!("{base}{extra}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{name}: accepted");
        assert!(err.contains(name) && err.contains(want), "{name}: {err}");
    }
}
