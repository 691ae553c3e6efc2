//! The live board: every running target, its connections and probes behind locks, and the
//! sticky "since" facts of its judgement.
//!
//! A target is judged ([`super::verdict`]) whenever one of its connections writes, not only when
//! someone looks, so "down since 12:03:04" is the moment it went down. Judging takes all of a
//! target's locks at once, in one order ([`TargetStatus::judge`]); every write takes one at a
//! time, so the two cannot deadlock. The locks and that order are kept together here.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::time::SystemTime;

use super::history::Fleet;
use super::{ConnStatus, MAX_NAME, ProbeStatus, Severity, Stamp, keep, verdict};
use crate::config::TargetConfig;
use crate::probe::change_watch::TargetChanges;

/// When the target's judgement last changed: the sticky "since" facts.
#[derive(Debug, Clone)]
struct Since {
    up: (bool, Stamp),
    ready: (bool, Stamp),
    severity: (Severity, Stamp),
}

impl Since {
    fn update(&mut self, v: &verdict::Verdict, at: Stamp) {
        fn flip<T: PartialEq>(slot: &mut (T, Stamp), value: T, at: Stamp) {
            if slot.0 != value {
                *slot = (value, at);
            }
        }
        flip(&mut self.up, v.up, at);
        flip(&mut self.ready, v.ready, at);
        flip(&mut self.severity, v.severity, at);
    }

    /// When the condition `severity` names began: down since the target stopped being up, not
    /// ready since it stopped being ready, stale since the first connection's cache fell
    /// behind; otherwise since the target reached this severity.
    fn of(&self, severity: Severity, conns: &[&ConnStatus]) -> Stamp {
        match severity {
            Severity::Down => self.up.1,
            Severity::NotReady => self.ready.1,
            Severity::Stale => conns
                .iter()
                .filter_map(|c| c.contract.broken_since)
                .min()
                .unwrap_or(self.severity.1),
            Severity::AtRisk | Severity::NoPromise | Severity::Healthy => self.severity.1,
        }
    }
}

/// One target.
#[derive(Debug)]
pub struct TargetStatus {
    pub name: String,
    /// Redacted.
    pub url: String,
    pub connections: Vec<Mutex<ConnStatus>>,
    pub probes: Mutex<Vec<ProbeStatus>>,
    /// Locked before any connection (see [`TargetStatus::judge`]).
    since: Mutex<Since>,
    /// The target's shared change state, for its pins (set once by the supervisor).
    pub(super) changes: std::sync::OnceLock<Arc<TargetChanges>>,
    /// The board's connections, for each connection's share of the history bytes.
    pub(super) fleet: Arc<Fleet>,
}

impl TargetStatus {
    fn new(t: &TargetConfig, fleet: Arc<Fleet>) -> Self {
        let at = Stamp::now();
        TargetStatus {
            name: t.name.clone(),
            url: t.endpoint.to_string(),
            connections: (0..t.settings.connections)
                .map(|i| Mutex::new(ConnStatus::new(i, at)))
                .collect(),
            probes: Mutex::new(
                t.probes
                    .iter()
                    .map(|p| ProbeStatus {
                        tool: keep(&p.tool, MAX_NAME),
                        interval_seconds: p.interval.as_secs_f64(),
                        last_run_at: None,
                        success: false,
                        reason: None,
                        detail: None,
                        duration_seconds: None,
                    })
                    .collect(),
            ),
            since: Mutex::new(Since {
                up: (false, at),
                ready: (false, at),
                severity: (Severity::Down, at),
            }),
            changes: std::sync::OnceLock::new(),
            fleet,
        }
    }

    /// Show this target's pins (see [`TargetChanges::view`]).
    pub fn set_changes(&self, changes: Arc<TargetChanges>) {
        let _ = self.changes.set(changes);
    }

    /// Judge the target as it is now, record when its judgement changed, and hand everything to
    /// `f`. Locks the "since" facts, then every connection in order, then the probes; nothing
    /// else takes two of these locks, so this cannot deadlock with a connection's writes.
    pub(super) fn judge<R>(
        &self,
        f: impl FnOnce(&verdict::Verdict, Stamp, &[&ConnStatus], &[ProbeStatus]) -> R,
    ) -> R {
        let mut since = lock(&self.since);
        let guards: Vec<MutexGuard<'_, ConnStatus>> = self.connections.iter().map(lock).collect();
        let conns: Vec<&ConnStatus> = guards.iter().map(|g| &**g).collect();
        let probes = lock(&self.probes);
        let at = SystemTime::now();
        let v = verdict::assess(&conns, &probes, at);
        since.update(&v, Stamp::of(at));
        let began = since.of(v.severity, &conns);
        f(&v, began, &conns, &probes)
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().expect("status lock poisoned")
}

/// Every running target, as the supervisor started them.
#[derive(Debug, Default)]
pub struct StatusBoard {
    pub(super) targets: RwLock<BTreeMap<String, Arc<TargetStatus>>>,
    /// The connections of those targets, counted as they come and go.
    fleet: Arc<Fleet>,
}

impl StatusBoard {
    pub fn add(&self, t: &TargetConfig) -> Arc<TargetStatus> {
        let s = Arc::new(TargetStatus::new(t, self.fleet.clone()));
        let mut targets = self.targets.write().expect("status lock poisoned");
        self.fleet.joined(s.connections.len());
        if let Some(old) = targets.insert(t.name.clone(), s.clone()) {
            self.fleet.left(old.connections.len());
        }
        s
    }

    pub fn remove(&self, name: &str) {
        let mut targets = self.targets.write().expect("status lock poisoned");
        if let Some(old) = targets.remove(name) {
            self.fleet.left(old.connections.len());
        }
    }
}
