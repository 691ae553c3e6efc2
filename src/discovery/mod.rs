//! Targets from discovery: `file_sd_configs` and `http_sd_configs`, merged with the static
//! targets of the configuration file.
//!
//! Each source runs as a task of its own that sends every refresh's outcome here; this module
//! keeps each source's last good targets, so a source that fails (a file half written, a registry
//! down) changes nothing but its failure series. Whenever the targets of a source change, the
//! daemon merges static and discovered targets again and applies the result exactly as it applies
//! a reloaded file: kept targets keep their sessions and counters, removed ones' series vanish.
//!
//! Merge rules: static targets first, then each source in file order (file sources, then HTTP
//! ones). A name already taken is left out and counted (`static` when a static target has it,
//! `duplicate` when an earlier source or group does), so the first definition always wins and
//! a discovery source can never replace a target written in the file.
//!
//! A configuration reload reconfigures the sources: one whose settings did not change keeps
//! running (and its targets); a changed one starts again but keeps offering its last targets
//! until its first refresh, so a reload does not stop and restart every discovered target.

pub mod file;
pub mod groups;
pub mod http;

use std::collections::HashSet;
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::{Config, FileSdConfig, HttpSdConfig, MAX_TOTAL_CONNECTIONS, TargetConfig};
use crate::telemetry::{Telemetry, families};
use groups::Found;

/// Refreshes waiting to be taken in; a source whose refresh cannot be queued waits.
const QUEUE: usize = 64;

/// One refresh of source `id`: what it found, or why it could not.
pub(crate) struct Refresh {
    id: u64,
    outcome: Result<Found, String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum SourceConfig {
    File(Box<FileSdConfig>),
    Http(Box<HttpSdConfig>),
}

impl SourceConfig {
    fn mechanism(&self) -> &'static str {
        match self {
            SourceConfig::File(_) => "file",
            SourceConfig::Http(_) => "http",
        }
    }

    fn name(&self) -> &str {
        match self {
            SourceConfig::File(f) => &f.name,
            SourceConfig::Http(h) => &h.name,
        }
    }
}

struct Source {
    config: SourceConfig,
    id: u64,
    task: JoinHandle<()>,
    /// The last good refresh (empty until the first one).
    found: Found,
    /// The error of the last refresh, if it failed: logged when it changes.
    error: Option<String>,
}

impl Source {
    fn labels(&self) -> [(&'static str, String); 2] {
        [
            ("mechanism", self.config.mechanism().to_string()),
            ("config", self.config.name().to_string()),
        ]
    }
}

impl Drop for Source {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The running discovery sources and what they last found.
pub struct Discovery {
    telemetry: Arc<Telemetry>,
    sources: Vec<Source>,
    tx: mpsc::Sender<Refresh>,
    rx: mpsc::Receiver<Refresh>,
    next_id: u64,
}

/// Static and discovered targets after the merge, and the part this replica owns.
#[derive(Debug, Default)]
pub struct Merged {
    /// The targets this replica probes.
    pub owned: Vec<Arc<TargetConfig>>,
    /// Static and discovered targets together, before sharding.
    pub configured: usize,
}

/// Why a discovered target is left out of the merge (the `reason` label).
const DROP_REASONS: [&str; 3] = ["duplicate", "static", "connections"];

impl Discovery {
    pub fn new(telemetry: Arc<Telemetry>) -> Self {
        let (tx, rx) = mpsc::channel(QUEUE);
        Discovery {
            telemetry,
            sources: Vec::new(),
            tx,
            rx,
            next_id: 0,
        }
    }

    /// Run the sources of `config`. Unchanged sources keep running; a changed one starts again
    /// with its last targets; removed ones stop (their `sd_targets` go to 0).
    pub fn configure(&mut self, config: &Config) {
        let wanted = config
            .file_sd
            .iter()
            .map(|f| SourceConfig::File(Box::new(f.clone())))
            .chain(
                config
                    .http_sd
                    .iter()
                    .map(|h| SourceConfig::Http(Box::new(h.clone()))),
            );
        let mut old = std::mem::take(&mut self.sources);
        for cfg in wanted {
            let same_key = old.iter().position(|s| {
                s.config.mechanism() == cfg.mechanism() && s.config.name() == cfg.name()
            });
            let previous = same_key.map(|i| old.remove(i));
            match previous {
                Some(s) if s.config == cfg => self.sources.push(s),
                previous => {
                    let found = previous.map(|mut p| std::mem::take(&mut p.found));
                    self.start(cfg, found.unwrap_or_default());
                }
            }
        }
        for gone in old {
            let labels = gone.labels();
            self.telemetry
                .daemon_gauge_with(families::SD_TARGETS, &labels)
                .set(0.0);
            for reason in DROP_REASONS {
                self.dropped_gauge(&labels, reason).set(0.0);
            }
        }
    }

    fn start(&mut self, config: SourceConfig, found: Found) {
        let id = self.next_id;
        self.next_id += 1;
        let tx = self.tx.clone();
        let task = match config.clone() {
            SourceConfig::File(f) => tokio::spawn(file::run(*f, id, tx)),
            SourceConfig::Http(h) => tokio::spawn(http::run(*h, id, tx)),
        };
        let source = Source {
            config,
            id,
            task,
            found,
            error: None,
        };
        let labels = source.labels();
        self.telemetry
            .daemon_counter(families::SD_REFRESH_FAILURES, &labels)
            .absolute(0);
        self.telemetry
            .daemon_gauge_with(families::SD_TARGETS, &labels)
            .set(source.found.targets.len() as f64);
        tracing::info!(
            mechanism = source.config.mechanism(),
            config = source.config.name(),
            "discovery source started"
        );
        self.sources.push(source);
    }

    /// Wait for the next refresh and take it in; `true` when a source's targets changed (the
    /// caller merges and applies again). Pending forever without sources.
    pub async fn next(&mut self) -> bool {
        let Some(refresh) = self.rx.recv().await else {
            return std::future::pending().await;
        };
        let Some(source) = self.sources.iter_mut().find(|s| s.id == refresh.id) else {
            return false; // from a source stopped since
        };
        let labels = source.labels();
        let (mechanism, name) = (source.config.mechanism(), source.config.name().to_string());
        let ok_gauge = self
            .telemetry
            .daemon_gauge_with(families::SD_LAST_REFRESH_OK, &labels);
        match refresh.outcome {
            Ok(found) => {
                ok_gauge.set(1.0);
                if source.error.take().is_some() {
                    tracing::info!(mechanism, config = %name, targets = found.targets.len(), "discovery source refreshed again");
                }
                self.telemetry
                    .daemon_gauge_with(families::SD_TARGETS, &labels)
                    .set(found.targets.len() as f64);
                if found == source.found {
                    return false;
                }
                tracing::debug!(mechanism, config = %name, targets = found.targets.len(), "discovery source changed");
                source.found = found;
                true
            }
            Err(e) => {
                ok_gauge.set(0.0);
                self.telemetry
                    .daemon_counter(families::SD_REFRESH_FAILURES, &labels)
                    .increment(1);
                if source.error.as_deref() != Some(e.as_str()) {
                    tracing::warn!(mechanism, config = %name, error = %e, kept = source.found.targets.len(), "discovery refresh failed; keeping the last good targets");
                    source.error = Some(e);
                }
                false
            }
        }
    }

    /// `statics` and the discovered targets, merged (first name wins, static first), and the
    /// ones `owns` says this replica probes, at most [`MAX_TOTAL_CONNECTIONS`] connections.
    pub fn merge(&self, statics: &[Arc<TargetConfig>], owns: impl Fn(&str) -> bool) -> Merged {
        let static_names: HashSet<&str> = statics.iter().map(|t| t.name.as_str()).collect();
        let mut seen = static_names.clone();
        let mut owned: Vec<Arc<TargetConfig>> =
            statics.iter().filter(|t| owns(&t.name)).cloned().collect();
        let mut connections: u32 = owned
            .iter()
            .map(|t| u32::from(t.settings.connections))
            .sum();
        let mut configured = statics.len();
        for source in &self.sources {
            let mut dropped = [source.found.duplicates, 0, 0];
            for t in &source.found.targets {
                if static_names.contains(t.name.as_str()) {
                    dropped[1] += 1;
                    continue;
                }
                if !seen.insert(t.name.as_str()) {
                    dropped[0] += 1;
                    continue;
                }
                configured += 1;
                if !owns(&t.name) {
                    continue;
                }
                if connections + u32::from(t.settings.connections) > MAX_TOTAL_CONNECTIONS {
                    dropped[2] += 1;
                    continue;
                }
                connections += u32::from(t.settings.connections);
                owned.push(t.clone());
            }
            let labels = source.labels();
            for (reason, n) in DROP_REASONS.iter().zip(dropped) {
                self.dropped_gauge(&labels, reason).set(n as f64);
            }
            if dropped[2] > 0 {
                tracing::warn!(
                    mechanism = source.config.mechanism(),
                    config = source.config.name(),
                    dropped = dropped[2],
                    "discovered targets left out: this replica would open more than {MAX_TOTAL_CONNECTIONS} connections (add shards)"
                );
            }
        }
        Merged { owned, configured }
    }

    fn dropped_gauge(&self, labels: &[(&'static str, String); 2], reason: &str) -> metrics::Gauge {
        let mut with_reason = labels.to_vec();
        with_reason.push(("reason", reason.to_string()));
        self.telemetry
            .daemon_gauge_with(families::SD_DROPPED, &with_reason)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> Config {
        Config::parse(text, "t.yml", &|_| None).unwrap()
    }

    fn found(targets: &[&str], template: &crate::config::TargetTemplate) -> Found {
        Found {
            targets: targets
                .iter()
                .map(|n| {
                    Arc::new(template.instantiate(
                        n.to_string(),
                        url::Url::parse(&format!("http://{n}.example/mcp")).unwrap(),
                        Default::default(),
                    ))
                })
                .collect(),
            duplicates: 0,
        }
    }

    #[tokio::test]
    async fn static_targets_win_and_the_first_source_wins() {
        let c = config(
            "targets:\n  - {name: a, url: 'http://static/'}\nfile_sd_configs:\n  - {name: one, files: [/nonexistent/x.yml]}\n  - {name: two, files: [/nonexistent/y.yml]}\n",
        );
        let mut d = Discovery::new(Telemetry::new());
        d.configure(&c);
        let t = &c.file_sd[0].template;
        d.sources[0].found = found(&["a", "b", "c"], t);
        d.sources[1].found = found(&["c", "d"], t);
        let m = d.merge(&c.targets, |_| true);
        let names: Vec<&str> = m.owned.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "c", "d"]);
        assert_eq!(m.owned[0].url().unwrap().as_str(), "http://static/");
        assert_eq!(m.configured, 4);
        let text = d.telemetry.render();
        for line in [
            r#"mcp_exporter_sd_dropped_targets{mechanism="file",config="one",reason="static"} 1"#,
            r#"mcp_exporter_sd_dropped_targets{mechanism="file",config="two",reason="duplicate"} 1"#,
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        // Sharded: only the owned ones, the count before sharding unchanged.
        let m = d.merge(&c.targets, |n| n == "b" || n == "d");
        let names: Vec<&str> = m.owned.iter().map(|t| t.name.as_str()).collect();
        assert_eq!((names, m.configured), (vec!["b", "d"], 4));
    }

    #[tokio::test]
    async fn reconfiguring_keeps_unchanged_sources_and_the_targets_of_changed_ones() {
        let mut d = Discovery::new(Telemetry::new());
        let before = config(
            "file_sd_configs:\n  - {name: one, files: [/nonexistent/x.yml]}\n  - {name: two, files: [/nonexistent/y.yml]}\n",
        );
        d.configure(&before);
        let t = &before.file_sd[0].template;
        d.sources[0].found = found(&["a"], t);
        d.sources[1].found = found(&["b"], t);
        let (id0, id1) = (d.sources[0].id, d.sources[1].id);
        let after = config(
            "file_sd_configs:\n  - {name: one, files: [/nonexistent/x.yml]}\n  - {name: two, files: [/nonexistent/z.yml]}\n",
        );
        d.configure(&after);
        assert_eq!(d.sources[0].id, id0, "unchanged: the same task");
        assert_ne!(d.sources[1].id, id1, "changed: started again");
        assert_eq!(
            d.sources[1].found.targets[0].name, "b",
            "with its last targets"
        );
        d.configure(&config(""));
        assert!(d.sources.is_empty());
    }
}
