//! The series of a connection's other lists (prompts, resources, resource templates), labelled
//! by `list`. The tool list keeps its own families, unchanged since before the other lists were
//! watched; these exist only for a list the server declares and the target watches, from its
//! first listing that holds an item: a tools-only server costs nothing here, and neither does
//! one that declares every capability and lists nothing else (fastmcp's and the Python SDK's
//! `FastMCP` defaults), while its empty lists are still walked and audited.
//!
//! Born then, a list's item counts and verdict start at their values of that moment (the alert
//! on the verdict reads a gauge). Its drift by kind is written from the first audit that finds
//! that kind (and kept from then on, back at 0 when it clears): nine series of 0 on every healthy
//! connection that watches the three lists were a fifth of its bytes, and the verdict, from the
//! start, already says whether the cache holds. Its unannounced changes, TTL violations,
//! notifications, item changes by class and walk failures are written from their first event: no
//! alert reads their increase, and at 0 from the start they were a third of what a watched list
//! costs.

use std::sync::Mutex;

use crate::telemetry::families as m;
use exposition::{ABSENT, Cell, Exposition, Kind, Lazy, Value};
use mcp_client::listing::changes::CHANGE_KINDS;
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
    drift: DriftCells,
    unannounced: Cell,
    ttl_violations: Cell,
    stale: Cell,
    notifications: Cell,
    /// By [`CHANGE_KINDS`], each written from its first event.
    changes: [Cell; 5],
    walk_failures: Lazy<&'static str, Cell>,
}

/// A list's drift by [`DRIFT_KINDS`]: each absent until an audit finds that kind, then kept.
struct DriftCells([Cell; 3]);

impl Default for DriftCells {
    fn default() -> Self {
        DriftCells([Cell::absent(), Cell::absent(), Cell::absent()])
    }
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
    /// `list` has listed an item: its series appear (at 0), if they had not.
    pub(super) fn listed(&self, list: List) {
        let Some(i) = index(list) else { return };
        self.lists[i]
            .lock()
            .expect("metrics lock poisoned")
            .get_or_insert_with(Box::default);
    }

    /// `list` is no longer watched: its series disappear.
    pub(super) fn unwatch(&self, list: List) {
        let Some(i) = index(list) else { return };
        *self.lists[i].lock().expect("metrics lock poisoned") = None;
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
            let gauge = Value::of_gauge;
            for (view, cell) in VIEWS.iter().zip(&c.items) {
                out.sample(
                    m::slot(m::LIST_ITEMS),
                    labels,
                    &[l, ("view", view)],
                    gauge(cell),
                );
            }
            for (kind, cell) in DRIFT_KINDS.iter().zip(&c.drift.0) {
                if let Some(v) = Value::of(Kind::Gauge, cell.raw()) {
                    out.sample(m::slot(m::LIST_DRIFT), labels, &[l, ("kind", kind)], v);
                }
            }
            out.sample(m::slot(m::LIST_CACHE_STALE), labels, &[l], gauge(&c.stale));
            for (family, cell) in [
                (m::LIST_UNANNOUNCED, &c.unannounced),
                (m::LIST_TTL_VIOLATIONS, &c.ttl_violations),
                (m::LIST_NOTIFICATIONS, &c.notifications),
            ] {
                if let Some(v) = Value::from_first_event(cell) {
                    out.sample(m::slot(family), labels, &[l], v);
                }
            }
            for (change, cell) in CHANGE_KINDS.iter().zip(&c.changes) {
                if let Some(v) = Value::from_first_event(cell) {
                    out.sample(
                        m::slot(m::LIST_CHANGES),
                        labels,
                        &[l, ("change", change)],
                        v,
                    );
                }
            }
            c.walk_failures.each(|reason, cell| {
                let extra = [l, ("reason", reason)];
                let v = Value::Count(cell.raw());
                out.sample(m::slot(m::LIST_WALK_FAILURES), labels, &extra, v);
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
        for (cell, n) in self.drift.0.iter().zip(counts) {
            if n > 0 || cell.raw() != ABSENT {
                cell.set(n as f64);
            }
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

    /// Item changes between two listings, counted per [`CHANGE_KINDS`].
    pub(super) fn changes(&self, counts: [u64; 5]) {
        for (cell, n) in self.changes.iter().zip(counts) {
            cell.add(n);
        }
    }

    pub(super) fn walk_failed(&self, reason: &'static str) {
        self.walk_failures.with(reason, |c| c.add(1));
    }
}

#[cfg(test)]
mod tests {
    use mcp_client::listing::items::ItemSet;
    use mcp_client::listing::list::List;
    use mcp_client::listing::walker::WalkReport;

    fn listed(names: &[&str]) -> WalkReport {
        let mut items = ItemSet::new();
        for (i, n) in names.iter().enumerate() {
            items.insert((*n).into(), i as u64);
        }
        WalkReport::listed(items)
    }

    /// A declared list that lists nothing (fastmcp's default prompts and resources) has no
    /// series; they appear at its first item, at 0 but for what that walk found, and go when
    /// the list is no longer watched. The tools never get any.
    #[test]
    fn a_list_has_series_from_its_first_item_until_it_is_unwatched() {
        let telemetry = crate::telemetry::Telemetry::new();
        let conn = telemetry.add_target("t", 1, &[]).connection(0);
        conn.list_walk_finished(List::Prompts, &listed(&[]));
        conn.list_stale(List::Prompts, false);
        conn.list_walk_finished(List::Tools, &listed(&["a"]));
        assert!(
            !telemetry.render().contains("list=\""),
            "no list series yet"
        );
        conn.list_walk_finished(List::Prompts, &listed(&["summarize", "triage"]));
        let text = telemetry.render();
        for line in [
            r#"mcp_probe_list_items{target="t",connection="0",list="prompts",view="server"} 2"#,
            r#"mcp_probe_list_items{target="t",connection="0",list="prompts",view="cache"} 0"#,
            r#"mcp_probe_list_cache_stale{target="t",connection="0",list="prompts"} 0"#,
        ] {
            assert!(text.contains(line), "{line}\n{text}");
        }
        assert!(
            !text.contains("mcp_probe_list_notifications_total{"),
            "{text}"
        );
        assert!(!text.contains("list=\"resources\"") && !text.contains("list=\"tools\""));
        conn.list_unwatched(List::Prompts);
        assert!(!telemetry.render().contains("list=\""));
    }

    /// A list's drift by kind is absent while audits find none of that kind, born at the first
    /// that does, and kept at 0 once it clears (the panel sees it end).
    #[test]
    fn a_drift_kind_is_written_from_the_first_audit_that_finds_it() {
        use mcp_client::listing::items::Drift;
        let telemetry = crate::telemetry::Telemetry::new();
        let conn = telemetry.add_target("t", 1, &[]).connection(0);
        conn.list_walk_finished(List::Resources, &listed(&["kb://a"]));
        conn.list_drift(List::Resources, &Drift::default());
        let family = "mcp_probe_list_cache_drift_items{";
        assert!(!telemetry.render().contains(family), "no drift yet");
        let found = Drift {
            extra: vec!["kb://legacy".into()],
            ..Drift::default()
        };
        conn.list_drift(List::Resources, &found);
        let extra = r#"mcp_probe_list_cache_drift_items{target="t",connection="0",list="resources",kind="extra"}"#;
        let text = telemetry.render();
        assert!(text.contains(&format!("{extra} 1\n")), "{text}");
        assert!(
            !text.contains(r#"list="resources",kind="missing""#),
            "{text}"
        );
        conn.list_drift(List::Resources, &Drift::default());
        let text = telemetry.render();
        assert!(text.contains(&format!("{extra} 0\n")), "{text}");
        assert!(
            !text.contains(r#"list="resources",kind="changed""#),
            "{text}"
        );
    }
}
