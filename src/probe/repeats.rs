//! One log line per change of state, not per occurrence.
//!
//! A broken server fails the same way on every audit, ping and retry; logging each occurrence
//! turns a short outage into gigabytes of identical lines (and a hostile server into a disk
//! filler). A [`Repeats`] lets the first failure of a kind through, stays quiet while the same
//! reason repeats — with a summary line at most every [`SUMMARY_EVERY`] — lets a different reason
//! through at once, and reports the recovery once.

use std::time::Duration;

use tokio::time::Instant;

/// While the same failure repeats, one summary line at most this often.
pub const SUMMARY_EVERY: Duration = Duration::from_secs(300);
/// Names listed in one log line; the rest are counted.
pub const NAMES_PER_LINE: usize = 5;
/// Bytes of one server-supplied string in a log line.
pub const LOG_STRING_BYTES: usize = 160;

/// The failing streak of one kind of event on one connection.
#[derive(Debug, Default)]
pub struct Repeats {
    reason: Option<&'static str>,
    streak: u64,
    unlogged: u64,
    last_line: Option<Instant>,
}

impl Repeats {
    /// One more failure with `reason`. `Some(n)`: log it (the log field `repeated`), `n` being
    /// how many occurrences since the previous line were not logged (0 for the first of a kind or
    /// a change of reason, more for a summary); `None`: say nothing.
    pub fn failed(&mut self, reason: &'static str) -> Option<u64> {
        self.failed_at(reason, Instant::now())
    }

    fn failed_at(&mut self, reason: &'static str, now: Instant) -> Option<u64> {
        self.streak += 1;
        if self.reason != Some(reason) {
            self.reason = Some(reason);
            self.unlogged = 0;
            self.last_line = Some(now);
            return Some(0);
        }
        self.unlogged += 1;
        match self.last_line {
            Some(at) if now.duration_since(at) < SUMMARY_EVERY => None,
            _ => {
                self.last_line = Some(now);
                Some(std::mem::take(&mut self.unlogged))
            }
        }
    }

    /// It worked: `Some(failures)` when this ends a failing streak (log the recovery once).
    pub fn recovered(&mut self) -> Option<u64> {
        self.reason.take()?;
        self.unlogged = 0;
        self.last_line = None;
        Some(std::mem::take(&mut self.streak))
    }
}

/// Names for a log line: the first [`NAMES_PER_LINE`], each cut to [`LOG_STRING_BYTES`] and
/// made printable, then how many more.
pub fn name_list(names: &[String]) -> String {
    crate::text::bounded_list(names, NAMES_PER_LINE, LOG_STRING_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_per_change_then_summaries() {
        let t0 = Instant::now();
        let mut r = Repeats::default();
        assert_eq!(r.failed_at("timeout", t0), Some(0));
        for i in 1..100 {
            assert_eq!(r.failed_at("timeout", t0 + Duration::from_secs(i)), None);
        }
        // Past the summary period: one line counting what was not logged.
        assert_eq!(
            r.failed_at("timeout", t0 + SUMMARY_EVERY + Duration::from_secs(1)),
            Some(100)
        );
        // A different reason is a change of state: logged at once.
        assert_eq!(
            r.failed_at("http_5xx", t0 + SUMMARY_EVERY + Duration::from_secs(2)),
            Some(0)
        );
        assert_eq!(r.recovered(), Some(102));
        assert_eq!(r.recovered(), None, "a recovery is reported once");
        assert_eq!(r.failed_at("timeout", t0), Some(0));
    }

    #[test]
    fn name_lists_are_capped_in_count_and_bytes() {
        let names: Vec<String> = (0..1000)
            .map(|i| format!("{i}{}", "x".repeat(50_000)))
            .collect();
        let line = name_list(&names);
        assert!(
            line.ends_with("… and 995 more"),
            "{}",
            &line[line.len() - 40..]
        );
        assert!(line.len() < NAMES_PER_LINE * (LOG_STRING_BYTES + 8) + 40);
        assert_eq!(name_list(&["a\x1bb".into()]), "a\\u{1b}b");
    }
}
