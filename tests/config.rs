//! The configuration file through the binary, as an operator meets it: `example.yml` passes
//! `--config.check` as shipped, a hostile file is refused with the reason and its place, and a
//! reload to zero targets succeeds but is logged as a warning.

mod common;

use std::path::Path;
use std::process::{Command, Output};

use common::Exporter;

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
    let e = Exporter::spawn(&[format!("--config.file={}", path.display())], &[]);
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
