//! Owns the connection tasks and applies configuration changes to them.
//!
//! A reload is a diff: targets whose resolved configuration is equal keep their tasks, sessions
//! and counters; changed targets restart with fresh series; removed targets stop and their series
//! disappear at once. Nothing here knows the protocol.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::connection::Connection;
use super::status::StatusBoard;
use crate::config::{Config, TargetConfig};
use crate::telemetry::Telemetry;

/// How long stopping connections get to end their sessions (DELETE) before they are aborted.
const STOP_GRACE: Duration = Duration::from_secs(3);

struct Running {
    config: TargetConfig,
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
        let wanted: BTreeMap<&str, &TargetConfig> = config
            .targets
            .iter()
            .map(|t| (t.name.as_str(), t))
            .collect();
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            match wanted.get(name.as_str()) {
                Some(t) if self.running[&name].config == **t => applied.kept.push(name),
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
        for t in &config.targets {
            if !self.running.contains_key(&t.name) {
                self.start(t);
                if !applied.restarted.contains(&t.name) {
                    applied.started.push(t.name.clone());
                }
            }
        }
        applied
    }

    /// Names and configs of the running targets.
    pub fn targets(&self) -> impl Iterator<Item = &TargetConfig> {
        self.running.values().map(|r| &r.config)
    }

    fn start(&mut self, t: &TargetConfig) {
        let probes: Vec<String> = t.probes.iter().map(|p| p.tool.clone()).collect();
        let metrics = self.telemetry.add_target(&t.name, t.connections, &probes);
        let status = self.status.add(t);
        let (tx, rx) = watch::channel(false);
        let mut tasks = Vec::with_capacity(t.connections as usize);
        for index in 0..t.connections {
            match Connection::new(
                t.clone(),
                index,
                metrics.connection(index),
                status.connection(index),
            ) {
                Ok(conn) => tasks.push(tokio::spawn(conn.run(rx.clone()))),
                Err(e) => tracing::error!(target = %t.name, error = %e, "cannot build HTTP client"),
            }
        }
        self.running.insert(
            t.name.clone(),
            Running {
                config: t.clone(),
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

async fn join_or_abort(tasks: Vec<JoinHandle<()>>) {
    let aborts: Vec<_> = tasks.iter().map(JoinHandle::abort_handle).collect();
    let all = futures_util::future::join_all(tasks);
    if tokio::time::timeout(STOP_GRACE, all).await.is_err() {
        aborts.iter().for_each(|a| a.abort());
    }
}
