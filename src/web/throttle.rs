//! A warning that repeats (connections refused at the cap, failed logins, a web config file
//! that does not load) is logged at most once per [`WARN_EVERY`], with how many there were:
//! the web server's and its guards' one limiter, so a flood of bad requests cannot flood the
//! log.

use std::time::Duration;

use tokio::time::Instant;

/// At most one warning line per this period for each kind: the cap hit, the cap hit with every
/// connection busy, accept errors, failed logins. An attack must not turn into a log flood; the
/// metrics count every event.
pub const WARN_EVERY: Duration = Duration::from_secs(30);

/// One warning line per [`WARN_EVERY`] for an event that repeats.
#[derive(Default)]
pub(crate) struct Throttle {
    last: Option<Instant>,
    count: u64,
}

impl Throttle {
    /// Count an event; the number of events since the last line (this one included) when a
    /// line is due.
    pub(crate) fn hit(&mut self, now: Instant) -> Option<u64> {
        self.count += 1;
        if self
            .last
            .is_some_and(|last| now.duration_since(last) < WARN_EVERY)
        {
            return None;
        }
        self.last = Some(now);
        Some(std::mem::take(&mut self.count))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_logs_once_per_period_with_the_count() {
        let mut t = Throttle::default();
        let start = Instant::now();
        assert_eq!(t.hit(start), Some(1));
        for i in 1..100 {
            assert_eq!(t.hit(start + Duration::from_millis(i)), None);
        }
        assert_eq!(t.hit(start + WARN_EVERY), Some(100));
    }
}
