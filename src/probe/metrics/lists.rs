//! The series of a connection's other lists (prompts, resources, resource templates), labelled
//! by `list`. The tool list keeps its own families, unchanged since before the other lists were
//! watched; these exist only for a list the server declares and the target watches, from the
//! session that first declares it, so a tools-only server costs nothing here.
//!
//! A watched list's drift, unannounced changes, TTL violations and verdict are at 0 from the
//! start (the alert on the verdict, and any on the counters, must see their first increase);
//! notifications and walk failures are written from their first event.

use std::sync::Mutex;

use crate::telemetry::families as m;
use exposition::{Cell, Exposition, Lazy, Value};
use mcp_client::listing::items::{Drift, ItemSet};
use mcp_client::listing::list::List;

/// The lists with series of their own here: every list but the tools.
const LISTS: [List; 3] = [List::Prompts, List::Resources, List::ResourceTemplates];
const VIEWS: [&str; 2] = ["server", "cache"];
const DRIFT_KINDS: [&str; 3] = ["missing", "extra", "changed"];

/// The cells of one watched list.
#[derive(Default)]
pub(super) struct ListCells {
    items: [Cell; 2],
    drift: [Cell; 3],
    unannounced: Cell,
    ttl_violations: Cell,
    stale: Cell,
    notifications: Cell,
    walk_failures: Lazy<&'static str, Cell>,
}

/// A connection's other lists: none until a session declares one.
#[derive(Default)]
pub(super) struct ListSeries {
    lists: [Mutex<Option<Box<ListCells>>>; 3],
}

fn index(list: List) -> Option<usize> {
    LISTS.iter().position(|l| *l == list)
}

impl ListSeries {
    /// Watch `list` (its series appear, at 0) or stop (they disappear). Nothing for the tools.
    pub(super) fn watch(&self, list: List, on: bool) {
        let Some(i) = index(list) else { return };
        let mut cells = self.lists[i].lock().expect("metrics lock poisoned");
        match (on, cells.is_some()) {
            (true, false) => *cells = Some(Box::default()),
            (false, true) => *cells = None,
            _ => {}
        }
    }

    /// Record on `list`'s cells, when it is watched.
    pub(super) fn with(&self, list: List, f: impl FnOnce(&ListCells)) {
        let Some(i) = index(list) else { return };
        if let Some(cells) = self.lists[i]
            .lock()
            .expect("metrics lock poisoned")
            .as_deref()
        {
            f(cells);
        }
    }

    pub(super) fn render(&self, labels: &str, out: &mut Exposition) {
        for (list, cells) in LISTS.iter().zip(&self.lists) {
            let cells = cells.lock().expect("metrics lock poisoned");
            let Some(c) = cells.as_deref() else { continue };
            let l = ("list", list.as_str());
            let gauge = |c: &Cell| Value::Float(f64::from_bits(c.raw()));
            for (view, cell) in VIEWS.iter().zip(&c.items) {
                out.sample(
                    m::slot(m::LIST_ITEMS),
                    labels,
                    &[l, ("view", view)],
                    gauge(cell),
                );
            }
            for (kind, cell) in DRIFT_KINDS.iter().zip(&c.drift) {
                out.sample(
                    m::slot(m::LIST_DRIFT),
                    labels,
                    &[l, ("kind", kind)],
                    gauge(cell),
                );
            }
            let count = |c: &Cell| Value::Count(c.raw());
            out.sample(
                m::slot(m::LIST_UNANNOUNCED),
                labels,
                &[l],
                count(&c.unannounced),
            );
            out.sample(
                m::slot(m::LIST_TTL_VIOLATIONS),
                labels,
                &[l],
                count(&c.ttl_violations),
            );
            out.sample(m::slot(m::LIST_CACHE_STALE), labels, &[l], gauge(&c.stale));
            if let Some(v) = Value::from_first_event(&c.notifications) {
                out.sample(m::slot(m::LIST_NOTIFICATIONS), labels, &[l], v);
            }
            c.walk_failures.each(|reason, cell| {
                let extra = [l, ("reason", reason)];
                out.sample(m::slot(m::LIST_WALK_FAILURES), labels, &extra, count(cell));
            });
        }
    }
}

impl ListCells {
    pub(super) fn server_view(&self, items: &ItemSet) {
        self.items[0].set(items.len() as f64);
    }

    pub(super) fn cache_view(&self, items: &ItemSet) {
        self.items[1].set(items.len() as f64);
    }

    pub(super) fn drift(&self, drift: &Drift) {
        let counts = [drift.missing.len(), drift.extra.len(), drift.changed.len()];
        for (cell, n) in self.drift.iter().zip(counts) {
            cell.set(n as f64);
        }
    }

    pub(super) fn unannounced(&self) {
        self.unannounced.add(1);
    }

    pub(super) fn ttl_violation(&self) {
        self.ttl_violations.add(1);
    }

    pub(super) fn stale(&self, stale: bool) {
        self.stale.set_flag(stale);
    }

    pub(super) fn notifications(&self, n: u64) {
        self.notifications.add(n);
    }

    pub(super) fn walk_failed(&self, reason: &'static str) {
        self.walk_failures.get(reason).add(1);
    }
}
