//! Which walk runs next. Walks are single-flight: one at a time per connection. Refresh
//! triggers (initial, reconnect, notification, stream gap) coalesce into one pending walk; a
//! failed refresh is retried with backoff (F5: a client that gives up after a failed re-list
//! keeps a stale cache forever) unless a newer trigger arrives first; audits wait behind
//! refreshes.

use tokio::time::Instant;

use super::Trigger;
use mcp_client::backoff::Backoff;

pub struct WalkSchedule {
    pending: Option<Trigger>,
    retry_at: Option<Instant>,
    backoff: Backoff,
    audit_due: bool,
}

impl WalkSchedule {
    /// A schedule whose first walk is `first`.
    pub fn new(first: Trigger) -> Self {
        WalkSchedule {
            pending: Some(first),
            retry_at: None,
            backoff: Backoff::default(),
            audit_due: false,
        }
    }

    /// A refresh is wanted; whatever refresh is pending already covers it.
    pub fn refresh(&mut self, trigger: Trigger) {
        self.pending.get_or_insert(trigger);
    }

    /// A list_changed arrived: re-list, and at once (a pending retry wait is cut short).
    pub fn notified(&mut self) {
        self.pending.get_or_insert(Trigger::Notification);
        self.retry_at = None;
    }

    /// The audit interval passed.
    pub fn audit_due(&mut self) {
        self.audit_due = true;
    }

    /// Whether a refresh is waiting (a notification during a walk makes that walk stale).
    pub fn refresh_pending(&self) -> bool {
        self.pending.is_some()
    }

    /// When a failed refresh is retried.
    pub fn retry_at(&self) -> Option<Instant> {
        self.retry_at
    }

    pub fn retry_wait_over(&mut self) {
        self.retry_at = None;
    }

    /// The walk to start now (none is running), if any.
    pub fn next(&mut self) -> Option<Trigger> {
        let refresh = if self.retry_at.is_none() {
            self.pending.take()
        } else {
            None
        };
        refresh.or_else(|| std::mem::take(&mut self.audit_due).then_some(Trigger::Audit))
    }

    /// A walk finished.
    pub fn finished(&mut self, trigger: Trigger, complete: bool) {
        if !trigger.refreshes_cache() {
            return;
        }
        if complete {
            self.backoff.reset();
        } else {
            self.pending.get_or_insert(trigger);
            self.retry_at = Some(Instant::now() + self.backoff.next_delay());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn refreshes_coalesce_and_go_before_audits() {
        let mut s = WalkSchedule::new(Trigger::Initial);
        s.audit_due();
        s.notified();
        assert_eq!(
            s.next(),
            Some(Trigger::Initial),
            "the pending refresh covers the notification"
        );
        assert_eq!(s.next(), Some(Trigger::Audit));
        assert_eq!(s.next(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_refresh_is_retried_after_a_wait_that_a_notification_cuts_short() {
        let mut s = WalkSchedule::new(Trigger::Initial);
        assert_eq!(s.next(), Some(Trigger::Initial));
        s.finished(Trigger::Initial, false);
        assert!(s.retry_at().is_some());
        s.audit_due();
        assert_eq!(
            s.next(),
            Some(Trigger::Audit),
            "audits run while the retry waits"
        );
        assert_eq!(s.next(), None);
        s.notified();
        assert!(s.retry_at().is_none());
        assert_eq!(s.next(), Some(Trigger::Initial));
        s.finished(Trigger::Initial, true);
        assert!(s.retry_at().is_none());
        s.finished(Trigger::Audit, false);
        assert_eq!(s.next(), None, "a failed audit is not retried");
    }
}
