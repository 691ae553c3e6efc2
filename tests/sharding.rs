//! Horizontal sharding through the binary: three exporters with one configuration probe
//! disjoint sets of targets whose union is every target, each the set rendezvous hashing gives
//! its shard; the index comes from the flag or from a StatefulSet pod name.

mod common;

use std::collections::BTreeSet;

use common::{Exporter, start_lab};
use mcp_exporter::shard::owner;
use mcp_lab::Behaviour;

const TARGETS: usize = 12;
const SHARDS: u32 = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shards_probe_disjoint_sets_that_cover_every_target() {
    let names: Vec<String> = (0..TARGETS).map(|i| format!("t{i}")).collect();
    let lab = start_lab(names.iter().map(|n| (n.clone(), Behaviour::default()))).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    let mut yaml = String::from(
        "global:\n  audit_interval: 30s\n  ping_interval: 10s\n  request_timeout: 5s\ntargets:\n",
    );
    for n in &names {
        yaml.push_str(&format!("  - name: {n}\n    url: {}\n", lab.url(n)));
    }
    std::fs::write(&path, yaml).unwrap();
    let config = format!("--config.file={}", path.display());

    // Shards 0 and 2 by flag, shard 1 from its pod name as in a StatefulSet.
    let exporters: Vec<Exporter> = (0..SHARDS)
        .map(|i| {
            let count = format!("--shard.count={SHARDS}");
            if i == 1 {
                Exporter::spawn(
                    &[config.clone(), count, "--shard.auto".into()],
                    &[("POD_NAME", "mcp-exporter-1")],
                )
            } else {
                Exporter::spawn(&[config.clone(), count, format!("--shard.index={i}")], &[])
            }
        })
        .collect();

    let mut union = BTreeSet::new();
    let mut total = 0;
    for (i, e) in exporters.iter().enumerate() {
        let expected: BTreeSet<String> = names
            .iter()
            .filter(|n| owner(n, SHARDS) == i as u32)
            .cloned()
            .collect();
        let index = i.to_string();
        let s = e
            .until_metrics(&format!("shard {i} probes its targets, all up"), |s| {
                let up = s.targets("mcp_probe_up");
                up == expected
                    && up
                        .iter()
                        .all(|t| s.v("mcp_probe_up", &[("target", t)]) == 1.0)
                    && s.v(
                        "mcp_exporter_shard_info",
                        &[("index", index.as_str()), ("count", "3")],
                    ) == 1.0
            })
            .await;
        assert_eq!(s.v("mcp_exporter_targets", &[]), expected.len() as f64);
        assert_eq!(s.v("mcp_exporter_targets_configured", &[]), TARGETS as f64);
        // No series of a target another shard owns, in any family.
        let foreign: Vec<&String> = names
            .iter()
            .filter(|n| !expected.contains(*n) && s.has_target(n))
            .collect();
        assert!(foreign.is_empty(), "shard {i} exposes {foreign:?}");
        assert!(
            union.is_disjoint(&expected),
            "shard {i} overlaps: {expected:?}"
        );
        total += expected.len();
        union.extend(expected);
    }
    assert_eq!(union, names.iter().cloned().collect::<BTreeSet<_>>());
    assert_eq!(total, TARGETS);
    // Each lab target was dialed by its one owner only.
    for n in &names {
        assert_eq!(
            lab.initializes(n),
            1,
            "{n} was probed by more than one shard"
        );
    }
}

#[test]
fn bad_shard_flags_exit_2_with_a_reason() {
    let bin = env!("CARGO_BIN_EXE_mcp_exporter");
    for (args, env, why) in [
        (
            vec!["--shard.count=3"],
            None,
            "needs --shard.index or --shard.auto",
        ),
        (
            vec!["--shard.count=3", "--shard.index=3"],
            None,
            "not below --shard.count 3",
        ),
        (
            vec!["--shard.count=0", "--shard.index=0"],
            None,
            "between 1 and",
        ),
        (
            vec!["--shard.count=3", "--shard.auto"],
            Some("mcp-exporter"),
            "does not end in -N",
        ),
        (
            vec!["--shard.count=2", "--shard.auto"],
            Some("mcp-exporter-2"),
            "ordinal 2",
        ),
    ] {
        let mut cmd = std::process::Command::new(bin);
        cmd.args(&args).arg("--config.file=/nonexistent.yml");
        if let Some(pod) = env {
            cmd.env("POD_NAME", pod);
        }
        let out = cmd.output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(why), "{args:?}: {stderr}");
    }
}
