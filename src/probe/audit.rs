//! The audit's judgement: is a difference between the cache and the server a change the client
//! was told about, or one it was not?
//!
//! An audit that finds the cache behind the server starts a grace period
//! (`notification_grace`) for that server list. If a `list_changed` arrives within it, the change
//! was announced (the refresh it triggers heals the cache); if none does, it is an unannounced
//! change, counted once. A list that changes again within the grace keeps the first change's
//! clock, so a list churning faster than the grace is still seen as unannounced.
//!
//! [`TtlWatch`] adds what only the modern era allows: a listing promises freshness (`ttlMs`), so
//! a list that changed while the previous listing was still promised fresh, with no
//! `list_changed`, broke that promise — every client caching by the spec served a stale list.
//! Only while the notification channel stayed open: a change next to a gap may have been
//! announced and lost, which is the channel's fault, not the promise's.

use std::time::Duration;

use tokio::time::Instant;

/// The pending divergence of one connection.
pub struct Audit {
    grace: Duration,
    /// Boxed: rare, and a connection keeps an audit for each list it watches.
    divergence: Option<Box<Divergence>>,
}

struct Divergence {
    server_fingerprint: u64,
    deadline: Instant,
    notifications_before: u64,
    counted: bool,
}

impl Audit {
    pub fn new(grace: Duration) -> Self {
        Audit {
            grace,
            divergence: None,
        }
    }

    /// When the grace of an uncounted divergence ends.
    pub fn deadline(&self) -> Option<Instant> {
        self.divergence
            .as_ref()
            .filter(|d| !d.counted)
            .map(|d| d.deadline)
    }

    /// The current divergence went unannounced past its grace (counted).
    pub fn unannounced(&self) -> bool {
        self.divergence.as_ref().is_some_and(|d| d.counted)
    }

    /// The cache matches the server again.
    pub fn matched(&mut self) {
        self.divergence = None;
    }

    /// An audit found the cache behind the server list `server_fingerprint`, with
    /// `notifications` list_changed received so far. Returns whether this starts a new
    /// divergence (worth a log line).
    pub fn diverged(&mut self, server_fingerprint: u64, notifications: u64) -> bool {
        match &mut self.divergence {
            Some(d) if d.server_fingerprint == server_fingerprint => return false,
            Some(d) if !d.counted => {
                d.server_fingerprint = server_fingerprint;
                return false;
            }
            _ => {}
        }
        self.divergence = Some(Box::new(Divergence {
            server_fingerprint,
            deadline: Instant::now() + self.grace,
            notifications_before: notifications,
            counted: false,
        }));
        true
    }

    /// The grace is over. Returns whether the change went unannounced (count it, once).
    pub fn grace_over(&mut self, notifications_now: u64) -> bool {
        let Some(d) = self.divergence.as_mut() else {
            return false;
        };
        if notifications_now > d.notifications_before {
            self.divergence = None;
            return false;
        }
        d.counted = true;
        true
    }
}

/// Watches the freshness promises of consecutive listings.
///
/// A listing that differs from a previous one still promised fresh is only a suspect: the
/// server changes its list and then sends `list_changed`, so a walk may see the new list a moment
/// before the notification arrives. The promise counts as broken when no `list_changed` arrived
/// within `notification_grace` of that listing (the same grace unannounced changes get).
#[derive(Default)]
pub struct TtlWatch {
    last: Option<Promise>,
    /// The notification channel was down at some point since the last listing (or a new session
    /// started): a `list_changed` may have been sent and lost, so a change is not held against
    /// the server's promise.
    gap: bool,
    /// A change seen inside a promise, waiting out the grace.
    /// Boxed: rare, and a connection keeps a watch for each list it watches.
    suspect: Option<Box<Suspect>>,
    /// A confirmed broken promise: until when a client that fetched the listing just before the
    /// change still holds it (that listing's freshness ran out then).
    broken_until: Option<Instant>,
}

/// A change seen inside a promise: when its grace ends, the promise's ttl and end, and the
/// `list_changed` count when it was seen.
#[derive(Clone, Copy)]
struct Suspect {
    deadline: Instant,
    ttl: Duration,
    fresh_until: Instant,
    heard: u64,
}

struct Promise {
    fingerprint: u64,
    requested: Instant,
    fresh_until: Instant,
    notifications: u64,
}

impl TtlWatch {
    /// A complete listing with `fingerprint`, requested at `requested` and promising `ttl`, with
    /// `heard_before` list_changed received when it was requested and `heard` when it completed.
    /// When it differs from the previous listing although that one was still promised fresh when
    /// this one was requested and no `list_changed` came in between, the change happened within
    /// the promise: a suspect until `grace` has passed (see [`TtlWatch::grace_over`]). (Requested
    /// after the promise ran out, the change cannot be placed: not held against it.)
    ///
    /// A listing during whose walk a `list_changed` arrived promises nothing to compare with: the
    /// server changed its list while it was read, so it may hold the list before, the list
    /// after, or pages of each — a version no client was ever served whole. Held against the
    /// next listing, the announced change would read as a second, silent one (and a walk that
    /// overlaps each periodic redeploy would keep the target stale for good).
    pub fn listing(
        &mut self,
        fingerprint: u64,
        requested: Instant,
        ttl: Duration,
        heard_before: u64,
        heard: u64,
        grace: Duration,
    ) {
        if self.last.as_ref().is_some_and(|p| requested < p.requested) {
            // A walk started before the last listing's ended after it (an audit overtaken by a
            // notification walk): it may hold the list before, or half of each; a newer listing
            // is already known, so this one says nothing about the promise.
            return;
        }
        let heard_all = !std::mem::take(&mut self.gap);
        let broken = self.last.as_ref().filter(|p| {
            heard_all
                && p.fingerprint != fingerprint
                && requested < p.fresh_until
                && heard == p.notifications
        });
        if let Some(p) = broken
            && self.suspect.is_none()
        {
            self.suspect = Some(Box::new(Suspect {
                deadline: Instant::now() + grace,
                ttl: p.fresh_until - p.requested,
                fresh_until: p.fresh_until,
                heard,
            }));
        }
        self.last = (heard_before == heard).then(|| Promise {
            fingerprint,
            requested,
            fresh_until: requested + ttl,
            notifications: heard,
        });
    }

    /// When the suspect change's grace ends.
    pub fn deadline(&self) -> Option<Instant> {
        self.suspect.as_ref().map(|s| s.deadline)
    }

    /// The grace of the suspect change is over: the promise (its ttl) was broken when no
    /// `list_changed` came since (`notifications_now` unchanged).
    pub fn grace_over(&mut self, notifications_now: u64) -> Option<Duration> {
        let s = self.suspect.take()?;
        if notifications_now != s.heard {
            return None;
        }
        if s.fresh_until > Instant::now() {
            self.broken_until = Some(s.fresh_until);
        }
        Some(s.ttl)
    }

    /// Until when a broken promise still leaves a correct client stale (see
    /// [`TtlWatch::broken_over`]); `None` when none does.
    pub fn broken_until(&self) -> Option<Instant> {
        self.broken_until
    }

    /// The broken promise has run out: every client that held it has re-fetched by now.
    pub fn broken_over(&mut self) {
        self.broken_until = None;
    }

    /// The notification channel was lost (or the session ended): until the next listing, a
    /// change may have been announced where the client could not hear it.
    pub fn channel_gap(&mut self) {
        self.gap = true;
        self.suspect = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_change_announced_within_the_grace_is_not_counted() {
        let mut a = Audit::new(Duration::from_secs(5));
        assert!(a.diverged(1, 0));
        assert!(!a.diverged(1, 0), "the same server list is one divergence");
        assert!(a.deadline().is_some());
        assert!(!a.grace_over(1), "a list_changed arrived");
        assert!(a.deadline().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn an_unannounced_change_is_counted_once_and_churn_keeps_the_first_clock() {
        let mut a = Audit::new(Duration::from_secs(5));
        assert!(a.diverged(1, 3));
        let first = a.deadline().unwrap();
        tokio::time::advance(Duration::from_secs(2)).await;
        assert!(!a.diverged(2, 3), "changed again within the grace");
        assert_eq!(a.deadline(), Some(first));
        assert!(!a.unannounced());
        assert!(a.grace_over(3));
        assert!(a.unannounced());
        assert!(a.deadline().is_none(), "counted once");
        assert!(!a.diverged(2, 3));
        assert!(a.diverged(7, 3), "a later change is a new divergence");
        a.matched();
        assert!(a.deadline().is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_listing_read_while_the_server_announced_a_change_is_no_promise() {
        let ttl = Duration::from_secs(60);
        let grace = Duration::from_secs(3);
        let mut w = TtlWatch::default();
        let t0 = Instant::now();
        w.listing(1, t0, ttl, 0, 0, grace);
        // A periodic redeploy lands while an audit walks: page 1 before, page 2 after, and the
        // list_changed arrives before the walk ends.
        w.listing(12, t0 + Duration::from_secs(30), ttl, 0, 1, grace);
        assert!(w.deadline().is_none(), "announced: no suspect");
        // The walk the notification woke reads the list after, unlike the mixed one before it.
        w.listing(2, t0 + Duration::from_secs(31), ttl, 1, 1, grace);
        assert!(
            w.deadline().is_none(),
            "the announced change is not a second, silent one"
        );
        // Once settled again, a silent change inside the promise is still a suspect.
        w.listing(3, t0 + Duration::from_secs(40), ttl, 1, 1, grace);
        assert_eq!(w.grace_over(1), Some(ttl));
        assert!(w.broken_until().is_some());
    }

    #[tokio::test(start_paused = true)]
    async fn ttl_promises_are_broken_only_by_unannounced_changes_within_them() {
        let ttl = Duration::from_secs(60);
        let grace = Duration::from_secs(5);
        let mut w = TtlWatch::default();
        let t0 = Instant::now();
        // A listing, then the grace over with `heard` list_changed: the ttl when broken.
        let judge = |w: &mut TtlWatch, fp, at: u64, ttl, seen, heard| {
            w.listing(fp, t0 + Duration::from_secs(at), ttl, seen, seen, grace);
            w.deadline().and_then(|_| w.grace_over(heard))
        };
        assert_eq!(
            judge(&mut w, 1, 0, ttl, 0, 0),
            None,
            "nothing to compare with"
        );
        assert_eq!(judge(&mut w, 1, 10, ttl, 0, 0), None, "unchanged");
        assert_eq!(
            judge(&mut w, 2, 20, ttl, 0, 0),
            Some(ttl),
            "changed, fresh, silent"
        );
        assert_eq!(
            judge(&mut w, 3, 25, ttl, 0, 1),
            None,
            "the list_changed came within the grace, after the walk saw the change"
        );
        assert_eq!(judge(&mut w, 4, 30, ttl, 1, 1), None, "announced");
        assert_eq!(judge(&mut w, 5, 200, ttl, 1, 1), None, "promise ran out");
        assert_eq!(
            judge(&mut w, 6, 201, Duration::ZERO, 1, 1),
            Some(ttl),
            "within 5's: the promise broken is 5's"
        );
        assert_eq!(
            judge(&mut w, 7, 202, ttl, 1, 1),
            None,
            "ttl 0 promises nothing"
        );
        assert_eq!(
            judge(&mut w, 9, 200, ttl, 1, 1),
            None,
            "a walk requested before the last listing's, finished after it, is not compared"
        );
        assert_eq!(
            w.broken_until(),
            Some(t0 + Duration::from_secs(260)),
            "a client that fetched 5 holds it until its ttl runs out"
        );
        w.broken_over();
        assert_eq!(w.broken_until(), None);
        w.listing(8, t0 + Duration::from_secs(210), ttl, 1, 1, grace);
        assert!(w.deadline().is_some(), "a suspect");
        w.channel_gap();
        assert!(
            w.deadline().is_none(),
            "a lost channel may have lost the notification"
        );
    }
}
