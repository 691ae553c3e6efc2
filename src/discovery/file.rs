//! `file_sd_configs`: files of target groups, looked at every second and read again when one
//! changes (or appears, or goes), and in full every `refresh_interval` whatever happened.
//!
//! Polling one `stat` per file (and one directory listing per wildcard) is cheap, works on every
//! file system a ConfigMap or a network share can be, and sees the atomic rename a config
//! management tool does; an inotify watch would miss the last on some of them. The full re-read
//! catches a change that kept both the length and the modification time.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tokio::sync::mpsc;

use super::Refresh;
use super::groups::{Format, Found};
use crate::config::FileSdConfig;
use mcp_client::net::files::{self, Stamp};

/// How often the files are looked at for a change.
pub const WATCH_PERIOD: Duration = Duration::from_secs(1);
/// Largest file read.
pub const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;
/// Most files one pattern may match.
pub const MAX_FILES: usize = 1000;

/// What the files looked like at the last look: each matched path and its stamp.
type Snapshot = Vec<(PathBuf, Option<Stamp>)>;

/// Watch `cfg`'s files and send each read's outcome as source `id`, until the receiver is gone.
pub(super) async fn run(cfg: FileSdConfig, id: u64, tx: mpsc::Sender<Refresh>) {
    let mut last: Option<Result<Snapshot, String>> = None;
    let mut last_read: Option<Instant> = None;
    let mut tick = tokio::time::interval(WATCH_PERIOD);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let due = last_read.is_none_or(|t| t.elapsed() >= cfg.refresh_interval);
        let c = cfg.clone();
        let prev = last.clone();
        let Ok((now, outcome)) = tokio::task::spawn_blocking(move || {
            let now = snapshot(&c.files);
            let read = (due || prev.as_ref() != Some(&now)).then(|| match &now {
                Ok(files) => read_all(&c, files),
                Err(e) => Err(e.clone()),
            });
            (now, read)
        })
        .await
        else {
            continue;
        };
        last = Some(now);
        let Some(outcome) = outcome else { continue };
        last_read = Some(Instant::now());
        if tx.send(Refresh { id, outcome }).await.is_err() {
            return;
        }
    }
}

/// The files the patterns match now, sorted, with their stamps. A literal path that does not
/// exist is an error (its last good targets stay); a wildcard that matches nothing is not.
fn snapshot(patterns: &[PathBuf]) -> Result<Snapshot, String> {
    let mut out = Vec::new();
    for pattern in patterns {
        let name = pattern
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if !name.contains(['*', '?']) {
            let stamp = files::stamp(pattern)
                .ok_or_else(|| format!("{}: cannot read it", pattern.display()))?;
            out.push((pattern.clone(), Some(stamp)));
            continue;
        }
        let dir = match pattern.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let entries = std::fs::read_dir(dir)
            .map_err(|e| format!("{}: cannot list the directory: {e}", dir.display()))?;
        let mut matched = Vec::new();
        for entry in entries.flatten() {
            let file = entry.file_name();
            let Some(file) = file.to_str() else { continue };
            if wildcard(name, file) && !file.starts_with('.') {
                if matched.len() >= MAX_FILES {
                    return Err(format!(
                        "{}: matches more than {MAX_FILES} files",
                        pattern.display()
                    ));
                }
                matched.push(entry.path());
            }
        }
        matched.sort();
        out.extend(matched.into_iter().map(|p| {
            let s = files::stamp(&p);
            (p, s)
        }));
    }
    Ok(out)
}

/// Every file's targets, in file order.
fn read_all(cfg: &FileSdConfig, snapshot: &Snapshot) -> Result<Found, String> {
    let mut found = Found::default();
    let mut seen = HashSet::new();
    for (path, _) in snapshot {
        let shown = path.display().to_string();
        let bytes = files::read_capped(path, MAX_FILE_BYTES)
            .map_err(|e| format!("{shown}: cannot read it: {e}"))?
            .ok_or_else(|| format!("{shown}: larger than {MAX_FILE_BYTES} bytes"))?;
        let text = String::from_utf8(bytes).map_err(|_| format!("{shown}: not UTF-8"))?;
        let format = if shown.ends_with(".json") {
            Format::Json
        } else {
            Format::Yaml
        };
        found.add(&text, format, &cfg.template, &mut seen, &shown)?;
    }
    Ok(found)
}

/// Whether `name` matches `pattern`, where `*` is any run of characters and `?` one character.
fn wildcard(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    // The classic two-pointer match with backtracking to the last `*`: linear in practice,
    // O(len(p)·len(n)) at worst, both bounded by a file name's length.
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < n.len() {
        if i < p.len() && (p[i] == '?' || p[i] == n[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_file_names() {
        for (p, n, want) in [
            ("*.yml", "a.yml", true),
            ("*.yml", "a.yaml", false),
            ("t-?.json", "t-1.json", true),
            ("t-?.json", "t-12.json", false),
            ("*-*.yml", "a-b-c.yml", true),
            ("a*", "a", true),
            ("fleet.json", "fleet.json", true),
        ] {
            assert_eq!(wildcard(p, n), want, "{p} {n}");
        }
    }

    #[test]
    fn a_missing_literal_file_is_an_error_and_an_empty_wildcard_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let e = snapshot(&[dir.path().join("none.yml")]).unwrap_err();
        assert!(e.contains("none.yml: cannot read it"), "{e}");
        assert_eq!(snapshot(&[dir.path().join("*.yml")]).unwrap(), vec![]);
        std::fs::write(dir.path().join("b.yml"), "[]").unwrap();
        std::fs::write(dir.path().join("a.yml"), "[]").unwrap();
        std::fs::write(dir.path().join("a.json"), "[]").unwrap();
        let s = snapshot(&[dir.path().join("*.yml")]).unwrap();
        let names: Vec<_> = s.iter().map(|(p, _)| p.file_name().unwrap()).collect();
        assert_eq!(names, ["a.yml", "b.yml"]);
    }
}
