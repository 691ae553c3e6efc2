//! The consistent copy of the board that `/` and `/status.json` are rendered from.
//!
//! Rendering must not hold the board's locks (connection tasks write through them all the time),
//! and each target must be shown as judged at one moment; so a snapshot judges each target once
//! under its locks, copies it out, and orders the fleet worst first. Fitting it under the byte
//! cap is [`super::json`]'s job.

use std::sync::Arc;

use serde::Serialize;

use super::{ConnStatus, ProbeStatus, Severity, Stamp, StatusBoard, TargetStatus};
use crate::probe::change_watch::PinsView;

/// `/status.json`.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    pub version: &'static str,
    pub generated_at: Stamp,
    /// Some targets were trimmed or left out to keep the JSON under
    /// [`MAX_RESPONSE_BYTES`](super::MAX_RESPONSE_BYTES).
    pub truncated: bool,
    /// Targets sent in their light form (newest events and a few drift names only).
    pub targets_trimmed: usize,
    /// Targets left out (the healthiest, at the end of the order).
    pub targets_omitted: usize,
    /// Worst first (see [`Severity`]), then by name.
    pub targets: Vec<TargetSnapshot>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TargetSnapshot {
    pub name: String,
    pub url: String,
    /// `down`, `not_ready`, `stale`, `at_risk`, `no_promise` or `healthy`.
    pub severity: Severity,
    /// Some connection is up (as `mcp_probe_up`).
    pub up: bool,
    /// Up with a complete last walk and every probe passing on the current session (as
    /// `mcp_probe_ready`). A stale cache does not make a target unready; see `stale`.
    pub ready: bool,
    /// Some connection's correct client holds a stale list: a promise of its era broken (see
    /// `connections[].contract`; the drift of a notification-driven cache is
    /// `connections[].drift`).
    pub stale: bool,
    /// When the condition `severity` names began (see docs/health.md).
    pub since: Stamp,
    /// Why, in words, worst first; at most
    /// [`verdict::MAX_CAUSES`](super::verdict::MAX_CAUSES) entries.
    pub causes: Vec<String>,
    /// This target is in its light form (see [`Snapshot::targets_trimmed`]).
    pub trimmed: bool,
    pub connections: Vec<ConnStatus>,
    pub probes: Vec<ProbeStatus>,
    /// The pinned baseline against connection 0's listing; absent without `pins:`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pins: Option<PinsView>,
}
impl StatusBoard {
    /// A consistent copy of everything, worst targets first.
    pub fn snapshot(&self) -> Snapshot {
        let targets: Vec<Arc<TargetStatus>> = self
            .targets
            .read()
            .expect("status lock poisoned")
            .values()
            .cloned()
            .collect();
        let mut targets: Vec<TargetSnapshot> = targets
            .iter()
            .map(|t| {
                t.judge(|v, since, conns, probes| TargetSnapshot {
                    name: t.name.clone(),
                    url: t.url.clone(),
                    severity: v.severity,
                    up: v.up,
                    ready: v.ready,
                    stale: v.stale,
                    since,
                    causes: v.causes.clone(),
                    trimmed: false,
                    connections: conns.iter().map(|c| (*c).clone()).collect(),
                    probes: probes.to_vec(),
                    pins: t.changes.get().and_then(|c| c.view()),
                })
            })
            .collect();
        // Stable: equal severities keep the name order of the map.
        targets.sort_by_key(|t| t.severity);
        Snapshot {
            version: env!("CARGO_PKG_VERSION"),
            generated_at: Stamp::now(),
            truncated: false,
            targets_trimmed: 0,
            targets_omitted: 0,
            targets,
        }
    }
}
