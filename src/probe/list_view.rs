//! One list as a connection holds it: what a correct client caches (changed only by refresh
//! walks), what the server listed last (every complete walk), and the two watches that judge a
//! difference between them (the audit's grace, the TTL promise). Every list a connection
//! watches — the tools, and the prompts, resources and resource templates a server declares —
//! is one of these, applied by the same code; what differs is only where its series go.

use std::ops::Range;
use std::sync::Arc;
use std::time::Duration;

use super::Trigger;
use super::audit::{Audit, TtlWatch};
use super::contract::Facts;
use mcp_client::listing::items::{Drift, ItemSet};
use mcp_client::listing::list::List;

pub struct ListView {
    pub list: List,
    /// What a correct client holds: changed only by refresh walks.
    pub cache: Option<Arc<ItemSet>>,
    /// The last complete walk of any trigger. One copy with `cache` while the two agree.
    pub server: Option<Arc<ItemSet>>,
    pub audit: Audit,
    pub ttl: TtlWatch,
    /// `ttlMs` of the latest complete listing.
    pub listing_ttl: Duration,
}

/// What applying a complete walk found.
pub struct Applied {
    /// The server view before this walk (to classify changes against).
    pub before: Option<Arc<ItemSet>>,
    /// For a walk that refreshed the cache: whether it found the cache as it was and may count
    /// as a notification without a change (F14).
    pub refreshed_unchanged: Option<bool>,
    pub drift: Drift,
    /// An audit found the cache behind the server and started a new divergence (worth a log
    /// line).
    pub diverged: bool,
}

/// A complete walk to apply, with what was heard around it.
pub struct Walked {
    pub trigger: Trigger,
    pub items: ItemSet,
    pub ttl: Duration,
    /// When the walk was asked for.
    pub requested: tokio::time::Instant,
    /// Another refresh was asked for while this walk ran.
    pub notified_meanwhile: bool,
    /// The list's notification count when the walk started and when it ended.
    pub heard: Range<u64>,
    /// A refresh that finds nothing new may count as a notification without a change.
    pub noise_countable: bool,
}

impl ListView {
    pub fn new(list: List, grace: Duration) -> Self {
        ListView {
            list,
            cache: None,
            server: None,
            audit: Audit::new(grace),
            ttl: TtlWatch::default(),
            listing_ttl: Duration::ZERO,
        }
    }

    /// Apply a complete walk: the server view, the cache for a refresh, the TTL promise and the
    /// audit's judgement of any difference.
    pub fn apply(&mut self, w: Walked, grace: Duration) -> Applied {
        // One copy of a listing: equal to what a view holds already (the cache and the server
        // view agree almost always), the walk's items are dropped for a share of that.
        let items = [&self.server, &self.cache]
            .into_iter()
            .flatten()
            .find(|held| ***held == w.items)
            .cloned()
            .unwrap_or_else(|| Arc::new(w.items));
        self.listing_ttl = w.ttl;
        let fingerprint = items.fingerprint();
        let (start, end) = (w.heard.start, w.heard.end);
        self.ttl
            .listing(fingerprint, w.requested, w.ttl, start, end, grace);
        let refreshed_unchanged = w.trigger.refreshes_cache().then(|| {
            let unchanged = self.cache.as_ref() == Some(&items);
            self.cache = Some(items.clone());
            unchanged && w.noise_countable
        });
        let before = self.server.replace(items);
        let drift = self.drift();
        let diverged = if drift.is_empty() {
            self.audit.matched();
            false
        } else {
            w.trigger == Trigger::Audit
                && !w.notified_meanwhile
                && self.audit.diverged(fingerprint, end)
        };
        Applied {
            before,
            refreshed_unchanged,
            drift,
            diverged,
        }
    }

    /// How the cache differs from the server's latest listing.
    pub fn drift(&self) -> Drift {
        match (&self.server, &self.cache) {
            (Some(s), Some(c)) => ItemSet::diff(s, c),
            (Some(s), None) => ItemSet::diff(s, &ItemSet::new()),
            _ => Drift::default(),
        }
    }

    /// The facts a contract judges, as this list has them now.
    pub fn facts(&self) -> Facts {
        Facts {
            drift: !self.drift().is_empty(),
            unannounced: self.audit.unannounced(),
            ttl_broken: self.ttl.broken_until().is_some(),
        }
    }

    /// The deadlines of its watches.
    pub fn deadlines(&self) -> [Option<tokio::time::Instant>; 3] {
        [
            self.audit.deadline(),
            self.ttl.deadline(),
            self.ttl.broken_until(),
        ]
    }
}
