//! Owns the connection tasks and applies configuration changes to them.
//!
//! A reload is a diff: targets whose resolved configuration is equal keep their tasks, sessions
//! and counters; changed targets restart with fresh series; removed targets stop and their series
//! disappear at once. A target whose labels alone changed (a discovery source relabelled it) is
//! kept too: only its info series is replaced. Nothing here knows the protocol.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::change_watch::TargetChanges;
use super::connection::Connection;
use super::status::StatusBoard;
use crate::config::{Config, TargetConfig};
use crate::probe::metrics::TargetMetrics;
use crate::telemetry::Telemetry;

/// How long stopping connections get to end their sessions (DELETE) before they are aborted.
const STOP_GRACE: Duration = Duration::from_secs(3);
/// Connections started together open their first sessions this far apart (at most 100 per
/// second), spread over no more than their first audit interval: a restart with thousands of
/// connections does not hit every server, nor this process, at the same instant, and a small
/// configuration still starts at once.
const START_SPACING: Duration = Duration::from_millis(10);

struct Running {
    /// Shared with the target's connections.
    config: Arc<TargetConfig>,
    metrics: Arc<TargetMetrics>,
    shutdown: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// What one `apply` did, by target name.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Applied {
    pub started: Vec<String>,
    pub restarted: Vec<String>,
    pub kept: Vec<String>,
    pub stopped: Vec<String>,
}

pub struct Supervisor {
    telemetry: Arc<Telemetry>,
    status: Arc<StatusBoard>,
    running: BTreeMap<String, Running>,
}

impl Supervisor {
    pub fn new(telemetry: Arc<Telemetry>) -> Self {
        Supervisor {
            telemetry,
            status: Arc::new(StatusBoard::default()),
            running: BTreeMap::new(),
        }
    }

    /// What the status page reads.
    pub fn status(&self) -> Arc<StatusBoard> {
        self.status.clone()
    }

    /// Make the running set match `config`.
    pub fn apply(&mut self, config: &Config) -> Applied {
        let mut applied = Applied::default();
        let wanted: BTreeMap<&str, &Arc<TargetConfig>> = config
            .targets
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            match wanted.get(name.as_str()) {
                Some(t) if self.running[&name].config == **t => applied.kept.push(name),
                Some(t) if self.running[&name].config.same_but_labels(t) => {
                    let r = self.running.get_mut(&name).expect("running");
                    r.metrics.set_labels(&t.labels);
                    r.config = Arc::clone(t);
                    applied.kept.push(name);
                }
                Some(_) => {
                    self.stop(&name);
                    applied.restarted.push(name);
                }
                None => {
                    self.stop(&name);
                    applied.stopped.push(name);
                }
            }
        }
        let new: Vec<&Arc<TargetConfig>> = config
            .targets
            .iter()
            .filter(|t| !self.running.contains_key(&t.name))
            .collect();
        let total: u32 = new.iter().map(|t| u32::from(t.settings.connections)).sum();
        let mut k = 0u32;
        for t in new {
            self.start(t, k, total);
            k += u32::from(t.settings.connections);
            if !applied.restarted.contains(&t.name) {
                applied.started.push(t.name.clone());
            }
        }
        applied
    }

    /// Names and configs of the running targets.
    pub fn targets(&self) -> impl Iterator<Item = &TargetConfig> {
        self.running.values().map(|r| &*r.config)
    }

    /// Start `t`, whose connections are number `first` onwards of `total` started together.
    fn start(&mut self, t: &Arc<TargetConfig>, first: u32, total: u32) {
        let probes: Vec<String> = t.probes.iter().map(|p| p.tool.clone()).collect();
        let metrics = self
            .telemetry
            .add_target(&t.name, t.settings.connections, &probes);
        metrics.set_labels(&t.labels);
        let status = self.status.add(t);
        let (tx, rx) = watch::channel(false);
        let mut tasks = Vec::with_capacity(t.settings.connections as usize + 1);
        // Definitions and pins are the target's, shared by its connections.
        let changes = TargetChanges::new(t, metrics.clone());
        status.set_changes(changes.clone());
        if changes.has_pins() {
            tasks.push(tokio::spawn(changes.clone().watch_pins(rx.clone())));
        }
        // One client and one set of credentials for all the target's connections. Its key
        // material was checked at load; it fails only when a file changed since.
        let net = super::connection::target_http(t)
            .inspect_err(|e| tracing::error!(target = %t.name, error = %e, "cannot build the target's HTTP client; not probing it"))
            .ok();
        if let Some(net) = net.as_ref().filter(|n| n.has_credentials()) {
            net.count_failures(metrics.auth_failures());
            net.token_metrics(metrics.clone());
        }
        let config = Arc::clone(t);
        for index in 0..t.settings.connections {
            let Some(net) = &net else { break };
            let delay = start_delay(first + u32::from(index), total, t.settings.audit_interval);
            match Connection::new(
                config.clone(),
                index,
                metrics.connection(index),
                status.connection(index),
                net,
            ) {
                Ok(conn) => {
                    let conn = conn.starting_after(delay).with_changes(changes.clone());
                    tasks.push(tokio::spawn(conn.run(rx.clone())))
                }
                Err(e) => tracing::error!(target = %t.name, error = %e, "cannot build HTTP client"),
            }
        }
        self.running.insert(
            t.name.clone(),
            Running {
                config,
                metrics,
                shutdown: tx,
                tasks,
            },
        );
    }

    fn stop(&mut self, name: &str) {
        if let Some(r) = self.running.remove(name) {
            self.telemetry.remove_target(name);
            self.status.remove(name);
            let _ = r.shutdown.send(true);
            tokio::spawn(join_or_abort(r.tasks));
        }
    }

    /// Stop everything and wait (bounded) for sessions to be closed.
    pub async fn shutdown(mut self) {
        let mut all = Vec::new();
        for (name, r) in std::mem::take(&mut self.running) {
            self.telemetry.remove_target(&name);
            self.status.remove(&name);
            let _ = r.shutdown.send(true);
            all.extend(r.tasks);
        }
        join_or_abort(all).await;
    }
}

/// When the `k`-th of `total` connections started together opens its first session.
fn start_delay(k: u32, total: u32, audit_interval: Duration) -> Duration {
    let window = START_SPACING.saturating_mul(total).min(audit_interval);
    window.mul_f64(f64::from(k) / f64::from(total.max(1)))
}

async fn join_or_abort(tasks: Vec<JoinHandle<()>>) {
    let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
    let all = futures_util::future::join_all(tasks);
    if tokio::time::timeout(STOP_GRACE, all).await.is_err() {
        aborts.iter().for_each(|a| a.abort());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_are_spread_over_at_most_the_audit_interval() {
        let audit = Duration::from_secs(30);
        // A small configuration starts at once (within 10 ms per connection).
        assert_eq!(start_delay(0, 5, audit), Duration::ZERO);
        assert_eq!(start_delay(4, 5, audit), Duration::from_millis(40));
        // 16 000 connections: 100 per second would take 160 s; the window is the audit interval.
        let last = start_delay(15_999, 16_000, audit);
        assert!(last < audit && last > audit.mul_f64(0.99), "{last:?}");
        assert_eq!(start_delay(8_000, 16_000, audit), Duration::from_secs(15));
    }

    #[tokio::test]
    async fn a_running_target_shares_the_configuration_it_was_started_from() {
        let t = crate::config::TargetConfig {
            name: "x".into(),
            endpoint: crate::config::Endpoint::http(
                url::Url::parse("http://127.0.0.1:1/mcp").expect("URL"),
            ),
            protocol_version: crate::config::ProtocolChoice::Auto,
            headers: vec![],
            settings: Default::default(),
            probes: vec![],
            http: Default::default(),
            labels: Default::default(),
            pins: None,
        };
        let config = Config {
            targets: vec![Arc::new(t)],
            ..Config::default()
        };
        let mut s = Supervisor::new(Telemetry::new());
        assert_eq!(s.apply(&config).started, ["x"]);
        let running = s.targets().next().expect("running");
        assert!(
            std::ptr::eq(running, &*config.targets[0]),
            "one copy of a target's configuration, not one per reader"
        );
        s.shutdown().await;
    }
}
