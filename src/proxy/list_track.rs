//! What a session did with its other cached lists (prompts, resources, resource templates): per
//! list, the cursor it was sent and not yet followed, a `list_changed` not yet followed by a
//! re-list, and whether it listed the list at all. One code path for the three lists, the list
//! a value; the tool list keeps its own fields in [`super::sessions::Session`] (its series are
//! older and richer).
//!
//! It exists apart from the session table so that a session that never touches these lists
//! (most do not) pays one pointer: the three trackers are allocated on first use, ~150 bytes.
//!
//! The rules, per list, are the tool list's: a cursor not followed within `cursor_grace`, or
//! before the session's next listing without a cursor or next use of the list (`prompts/get` for
//! prompts; `resources/read` for both resource lists), makes the session first-page-only for
//! that list, once. A `list_changed` of the list (`notifications/resources/list_changed` counts
//! for both resource lists) makes a re-list due, *only if the session listed that list before*
//! (a client that never listed resource templates holds no copy of them to refresh); the next
//! listing without a cursor times the lag, a use or `relist_grace` first counts a session without
//! re-list.

use std::time::{Duration, Instant};

use super::labels::Client;
use crate::proxy::metrics::ListEvent;
use mcp_client::listing::list::List;

/// One list's state in one session.
#[derive(Debug, Default, Clone, Copy)]
struct Track {
    /// The nextCursor last sent (its digest) and when, while not followed.
    cursor: Option<(u64, Instant)>,
    /// A `list_changed` forwarded and not yet followed by a re-list.
    relist_due: Option<Instant>,
    /// The session listed this list (a request without a cursor).
    listed: bool,
    /// Counted first-page-only already (once per session and list).
    first_page_only: bool,
    /// Stale uses of this list (prompts and resources only).
    stale: u16,
}

/// The session's other lists, allocated on first use.
#[derive(Debug, Default)]
pub struct Tracks(Option<Box<[Track; 3]>>);

fn index(list: List) -> Option<usize> {
    match list {
        List::Tools => None,
        List::Prompts => Some(0),
        List::Resources => Some(1),
        List::ResourceTemplates => Some(2),
    }
}

const LISTS: [List; 3] = [List::Prompts, List::Resources, List::ResourceTemplates];

/// What a use of an item touches: `prompts/get` the prompts; `resources/read` both resource
/// lists (the URI may come from either).
pub fn used_by(list: List) -> &'static [List] {
    match list {
        List::Prompts => &[List::Prompts],
        List::Resources | List::ResourceTemplates => &[List::Resources, List::ResourceTemplates],
        List::Tools => &[],
    }
}

impl Tracks {
    fn get(&mut self, list: List) -> Option<&mut Track> {
        let i = index(list)?;
        Some(&mut self.0.get_or_insert_with(Default::default)[i])
    }

    /// A listing request of `list` at `now` (`cursor`: the digest of the cursor it carried):
    /// the cursor followed or a new walk started. Returns the re-list lag when it settles a due
    /// re-list.
    pub fn listing(
        &mut self,
        list: List,
        cursor: Option<u64>,
        now: Instant,
        client: &Client,
    ) -> Option<Duration> {
        let t = self.get(list)?;
        match cursor {
            Some(d) => {
                if t.cursor.is_some_and(|(held, _)| held == d) {
                    t.cursor = None;
                }
                None
            }
            None => {
                abandon(t, list, client);
                t.listed = true;
                t.relist_due.take().map(|due| now.duration_since(due))
            }
        }
    }

    /// A page of `list` passed to the session with `next` (a nextCursor's digest) at `now`.
    pub fn page(&mut self, list: List, next: Option<u64>, now: Instant) {
        if let Some(t) = self.get(list) {
            t.cursor = next.map(|d| (d, now));
        }
    }

    /// The session used an item of `list` (`prompts/get`, `resources/read`): what it holds of
    /// the lists it used is what it has, so an outstanding cursor is abandoned and a due re-list
    /// missed.
    pub fn used(&mut self, list: List, client: &Client) {
        for l in used_by(list) {
            if let Some(t) = self.get(*l) {
                abandon(t, *l, client);
                missed(t, *l, client);
            }
        }
    }

    /// A `list_changed` announcing `lists` was forwarded to the session at `now`.
    pub fn list_changed(&mut self, lists: &[List], now: Instant) {
        let Some(all) = self.0.as_mut() else {
            return; // never listed any of them
        };
        for l in lists {
            if let Some(i) = index(*l)
                && all[i].listed
            {
                all[i].relist_due.get_or_insert(now);
            }
        }
    }

    /// A use of `list` was judged stale.
    pub fn stale(&mut self, list: List) {
        if let Some(t) = self.get(list) {
            t.stale = t.stale.saturating_add(1);
        }
    }

    /// Settle the deadlines passed by `now`.
    pub fn sweep(
        &mut self,
        now: Instant,
        cursor_grace: Duration,
        relist_grace: Duration,
        client: &Client,
    ) {
        let Some(all) = self.0.as_mut() else {
            return;
        };
        for (t, l) in all.iter_mut().zip(LISTS) {
            if t.cursor
                .is_some_and(|(_, at)| now.duration_since(at) >= cursor_grace)
            {
                abandon(t, l, client);
            }
            if t.relist_due
                .is_some_and(|at| now.duration_since(at) >= relist_grace)
            {
                missed(t, l, client);
            }
        }
    }

    /// Per list the session touched: (list, first-page-only, stale uses), for the status page.
    pub fn summary(&self) -> Vec<(List, bool, u16)> {
        self.0.as_ref().map_or_else(Vec::new, |all| {
            all.iter()
                .zip(LISTS)
                .filter(|(t, _)| t.listed || t.stale > 0 || t.cursor.is_some())
                .map(|(t, l)| (l, t.first_page_only, t.stale))
                .collect()
        })
    }
}

fn abandon(t: &mut Track, list: List, client: &Client) {
    if t.cursor.take().is_some() && !t.first_page_only {
        t.first_page_only = true;
        client.series.list_event(ListEvent::FirstPageOnly, list);
    }
}

fn missed(t: &mut Track, list: List, client: &Client) {
    if t.relist_due.take().is_some() {
        client.series.list_event(ListEvent::WithoutRelist, list);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::labels::ClientLabels;
    use crate::telemetry::Telemetry;

    #[test]
    fn each_list_is_judged_on_its_own_and_only_a_listed_list_is_due_for_a_relist() {
        let t = Telemetry::new();
        let secs = Duration::from_secs;
        let t0 = Instant::now();
        let c = ClientLabels::new(4, vec![], t.add_proxy("kb"), secs(60)).get_at(Some("c"), t0);
        let mut tr = Tracks::default();
        assert!(tr.0.is_none(), "nothing allocated before use");
        tr.list_changed(&[List::Prompts], t0);
        assert!(tr.0.is_none());
        // Prompts: the first page only, then a use.
        assert_eq!(tr.listing(List::Prompts, None, t0, &c), None);
        tr.page(List::Prompts, Some(7), t0);
        tr.used(List::Prompts, &c);
        // Resources: every page followed.
        tr.listing(List::Resources, None, t0, &c);
        tr.page(List::Resources, Some(9), t0);
        tr.listing(List::Resources, Some(9), t0, &c);
        tr.page(List::Resources, None, t0);
        // The resources notification: resources are due, templates (never listed) are not.
        tr.list_changed(&[List::Resources, List::ResourceTemplates], t0);
        assert_eq!(
            tr.listing(List::Resources, None, t0 + secs(2), &c),
            Some(secs(2))
        );
        tr.list_changed(&[List::Prompts], t0);
        tr.sweep(t0 + secs(100), secs(30), secs(60), &c);
        tr.stale(List::Prompts);
        let text = t.render();
        for (family, list, n) in [
            (
                "mcp_proxy_list_first_page_only_sessions_total",
                "prompts",
                1,
            ),
            ("mcp_proxy_list_sessions_without_relist_total", "prompts", 1),
        ] {
            let line = format!("{family}{{proxy=\"kb\",client=\"c\",list=\"{list}\"}} {n}");
            assert!(text.contains(&line), "{line}\n{text}");
        }
        for absent in ["list=\"resources\"", "list=\"resource_templates\""] {
            assert!(!text.contains(absent), "{absent}\n{text}");
        }
        assert_eq!(
            tr.summary(),
            [(List::Prompts, true, 1), (List::Resources, false, 0)]
        );
    }
}
