//! What a target shares among its connections for change classification and pins: the
//! [`Definitions`] store (told every complete listing, so it keeps what is listed and forgets
//! the rest), and the pins file with its last good content.
//!
//! The pins file is re-read when its modification time or size changes (polled every
//! [`PINS_POLL`] while the target runs, and at every listing of connection 0), so updating the
//! approved baseline takes effect without a reload. A file that no longer parses is logged
//! with its field, `mcp_probe_tool_pins_file_valid` turns 0, and the last good pins stay in
//! force: a typo must not silently approve everything. Pins are judged against connection 0's
//! listing: connections behind different instances may disagree, and one judgement per target
//! keeps the series one per pinned tool. The other lists a file pins (prompts, resources,
//! resource templates) are judged the same way, each against connection 0's listing of it, and
//! exported as counts per list.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use crate::config::TargetConfig;
use crate::probe::metrics::{ListPins, TargetMetrics};
use mcp_client::listing::changes::pins::{Mismatch, PinReport, Pins, compare, compare_in};
use mcp_client::listing::changes::{Definitions, ToolChange, pin_change};
use mcp_client::listing::items::ItemSet;
use mcp_client::listing::list::List;

/// How often a pins file is checked for a change.
pub const PINS_POLL: Duration = Duration::from_secs(2);

/// A file's identity for "has it changed": modification time and length.
type Signature = (Option<SystemTime>, u64);

fn signature(path: &std::path::Path) -> Option<Signature> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok(), m.len()))
}

/// The pins of one target as they stand.
#[derive(Debug, Default)]
struct PinState {
    /// The last good content.
    pins: Option<Pins>,
    /// Of the last read, good or not.
    signature: Option<Signature>,
    /// Why the last read failed, if it did.
    error: Option<String>,
    /// Connection 0's last complete listing of each list.
    listings: BTreeMap<List, ItemSet>,
    /// The last comparison of the tool list.
    report: Option<PinReport>,
    /// The last comparison of each other list the file pins.
    reports: BTreeMap<List, PinReport>,
}

/// A target's shared change state.
pub struct TargetChanges {
    pub definitions: Definitions,
    pins_path: Option<PathBuf>,
    pins: Mutex<PinState>,
    metrics: Arc<TargetMetrics>,
}

impl std::fmt::Debug for TargetChanges {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TargetChanges")
            .field("definitions", &self.definitions)
            .field("pins_path", &self.pins_path)
            .finish_non_exhaustive()
    }
}

/// The pins' judgement as the status page shows it.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct PinsView {
    pub file: String,
    pub valid: bool,
    pub error: Option<String>,
    pub pinned: usize,
    /// Listed tools not pinned (at most [`MAX_SHOWN`] names).
    pub unpinned: Vec<String>,
    pub unpinned_total: usize,
    /// Pinned tools that differ (at most [`MAX_SHOWN`]).
    pub mismatched: Vec<ToolChange>,
    pub mismatched_total: usize,
    /// The other lists the file pins.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub lists: Vec<ListPinsView>,
}

/// Another list's pins as the status page shows them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ListPinsView {
    pub list: &'static str,
    pub pinned: usize,
    /// Pinned items that differ or are gone (at most [`MAX_SHOWN`]; `tool` holds the item's key).
    pub mismatched: Vec<ToolChange>,
    pub mismatched_total: usize,
    pub unpinned_total: usize,
}

/// Whether a pin's mismatch is a changed description (the rug-pull pattern).
fn description_changed(m: &Mismatch) -> bool {
    matches!(
        m,
        Mismatch::Changed {
            description_changed: true,
            ..
        }
    )
}

/// Names and mismatches the status page shows per target.
pub const MAX_SHOWN: usize = 20;

impl TargetChanges {
    /// The store capped for `config` (twice its `max_listing_bytes` per connection), and its
    /// pins read now.
    pub fn new(config: &TargetConfig, metrics: Arc<TargetMetrics>) -> Arc<Self> {
        let me = Arc::new(TargetChanges {
            definitions: Definitions::for_lists(
                config.settings.max_listing_bytes,
                config.settings.connections,
                config.settings.lists,
            ),
            pins_path: config.pins.clone(),
            pins: Mutex::new(PinState::default()),
            metrics,
        });
        me.refresh_pins();
        me
    }

    fn state(&self) -> std::sync::MutexGuard<'_, PinState> {
        self.pins.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn has_pins(&self) -> bool {
        self.pins_path.is_some()
    }

    /// Re-read the pins file if it changed; re-judge the last listing against it. Returns
    /// whether it was read.
    pub fn refresh_pins(&self) -> bool {
        let Some(path) = &self.pins_path else {
            return false;
        };
        let now = signature(path);
        let mut s = self.state();
        if s.signature.is_some() && s.signature == now {
            return false;
        }
        s.signature = now;
        match Pins::load(path) {
            Ok(p) => {
                if s.error.take().is_some() {
                    tracing::info!(target = %self.metrics.name(), "pins file readable again");
                }
                tracing::debug!(target = %self.metrics.name(), pinned = p.tools.len(), "pins loaded");
                s.pins = Some(p);
            }
            Err(e) => {
                tracing::error!(target = %self.metrics.name(), error = %e, "pins file refused; the last good pins stay in force");
                s.error = Some(mcp_client::text::bounded(&e, 400).into_owned());
            }
        }
        self.judge(&mut s);
        true
    }

    /// A complete listing of connection `index`: the store told what is listed now (it keeps
    /// that and the listing before, and forgets the rest), the listing kept for the pins
    /// (connection 0 only) and the store's size published. Called after the change from the
    /// connection's previous listing was classified, though the store keeps that one anyway.
    pub fn listing(&self, index: u16, list: List, items: &ItemSet) {
        self.definitions.listed_in(list, index, items);
        self.metrics.definitions_bytes(self.definitions.bytes());
        if index != 0 || self.pins_path.is_none() {
            return;
        }
        self.refresh_pins();
        let mut s = self.state();
        if s.listings.get(&list) == Some(items) {
            return;
        }
        s.listings.insert(list, items.clone());
        self.judge(&mut s);
    }

    fn judge(&self, s: &mut PinState) {
        let valid = s.error.is_none();
        let Some(pins) = &s.pins else {
            self.metrics.pins_invalid();
            return;
        };
        // A list not listed yet: every pin counts as matching until a listing says otherwise.
        let served = |fp| self.definitions.get(fp);
        let reports: BTreeMap<List, PinReport> = pins
            .lists()
            .filter(|(list, _)| *list != List::Tools)
            .filter_map(|(list, _)| {
                let listing = s.listings.get(&list)?;
                Some((list, compare_in(list, pins, listing, served)?))
            })
            .collect();
        let list_pins = pins
            .lists()
            .filter(|(list, _)| *list != List::Tools)
            .map(|(list, _)| {
                let r = reports.get(&list);
                let mismatches = r.map_or(0, |r| r.mismatches().count());
                let description_changes = r.map_or(0, |r| {
                    r.mismatches()
                        .filter(|(_, m)| description_changed(m))
                        .count()
                });
                let unpinned = r.map_or(0, |r| r.unpinned.len());
                ListPins {
                    list,
                    mismatches,
                    description_changes,
                    unpinned,
                }
            })
            .collect();
        self.metrics.list_pins(list_pins);
        s.reports = reports;
        let Some(listing) = s.listings.get(&List::Tools) else {
            let states: Vec<_> = pins.tools.keys().map(|n| (&**n, false, false)).collect();
            self.metrics.pins(valid, &states, 0);
            return;
        };
        let report = compare(pins, listing, served);
        let states: Vec<_> = report
            .pinned
            .iter()
            .map(|(n, m)| {
                (
                    &**n,
                    m.is_some(),
                    m.as_ref().is_some_and(description_changed),
                )
            })
            .collect();
        self.metrics.pins(valid, &states, report.unpinned.len());
        s.report = Some(report);
    }

    /// Each other list the file pins, as last judged.
    fn list_pins_view(s: &PinState) -> Vec<ListPinsView> {
        let Some(pins) = &s.pins else {
            return Vec::new();
        };
        pins.lists()
            .filter(|(list, _)| *list != List::Tools)
            .map(|(list, pinned)| {
                let r = s.reports.get(&list);
                ListPinsView {
                    list: list.as_str(),
                    pinned: pinned.len(),
                    mismatched: r.map_or(Vec::new(), |r| {
                        r.mismatches()
                            .take(MAX_SHOWN)
                            .map(|(n, m)| pin_change(n, m))
                            .collect()
                    }),
                    mismatched_total: r.map_or(0, |r| r.mismatches().count()),
                    unpinned_total: r.map_or(0, |r| r.unpinned.len()),
                }
            })
            .collect()
    }

    /// What the status page shows of the pins; `None` without `pins:`.
    pub fn view(&self) -> Option<PinsView> {
        let path = self.pins_path.as_ref()?;
        let s = self.state();
        let mut v = PinsView {
            file: mcp_client::text::bounded(&path.display().to_string(), 300).into_owned(),
            valid: s.error.is_none() && s.pins.is_some(),
            error: s.error.clone(),
            pinned: s.pins.as_ref().map_or(0, |p| p.tools.len()),
            lists: Self::list_pins_view(&s),
            ..PinsView::default()
        };
        if let Some(r) = &s.report {
            v.unpinned_total = r.unpinned.len();
            v.unpinned = r
                .unpinned
                .iter()
                .take(MAX_SHOWN)
                .map(|n| mcp_client::text::bounded(n, 160).into_owned())
                .collect();
            let mismatches: Vec<_> = r.mismatches().collect();
            v.mismatched_total = mismatches.len();
            v.mismatched = mismatches
                .into_iter()
                .take(MAX_SHOWN)
                .map(|(n, m)| pin_change(n, m))
                .collect();
        }
        Some(v)
    }

    /// Poll the pins file until `shutdown` (nothing to do without `pins:`).
    pub async fn watch_pins(self: Arc<Self>, mut shutdown: tokio::sync::watch::Receiver<bool>) {
        if self.pins_path.is_none() {
            return;
        }
        let mut tick = tokio::time::interval(PINS_POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tick.tick() => { self.refresh_pins(); }
            }
        }
    }
}
