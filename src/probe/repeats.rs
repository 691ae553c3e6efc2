//! One log line per change of state, not per occurrence — and never more than a few per window.
//!
//! A broken server fails the same way on every audit, ping and retry; logging each occurrence
//! turns a short outage into gigabytes of identical lines (and a hostile server into a disk
//! filler). A [`Repeats`] lets the first failure of a kind through, stays quiet while the same
//! reason repeats — with a summary line at most every [`SUMMARY_EVERY`] — lets a different reason
//! through at once, and reports the recovery once.
//!
//! Why a budget on top: "one line per change of state" alone is unbounded when the state itself
//! changes all the time. A server whose tool list changes several times a second (a churn soak
//! logged 14 GB a day of "tool definitions changed"), or a verdict that flaps on every audit,
//! changes state on every occurrence. So each kind may write at most [`LINES_PER_WINDOW`] lines
//! per [`SUMMARY_EVERY`], state changes and recoveries included; what it could not write is
//! counted into the `repeated` field of its next line. One connection's kinds are a fixed set (see
//! `super::events`), so a connection writes a bounded number of lines per window whatever its
//! server does.

use std::time::Duration;

use tokio::time::Instant;

/// While the same failure repeats, one summary line at most this often; also the window of
/// [`LINES_PER_WINDOW`].
pub const SUMMARY_EVERY: Duration = Duration::from_secs(300);
/// Lines one kind of event of one connection writes per [`SUMMARY_EVERY`] at most, whatever
/// changes: the first line, a few changes of state or recoveries; further ones are counted.
pub const LINES_PER_WINDOW: u32 = 4;
/// Names listed in one log line; the rest are counted.
pub const NAMES_PER_LINE: usize = 5;
/// Bytes of one server-supplied string in a log line.
pub const LOG_STRING_BYTES: usize = 160;

/// The state of one kind of event on one connection, and what it may still log.
///
/// Allocated at the kind's first event: a connection keeps a dozen kinds and a healthy one uses
/// few, so an unused kind costs a pointer, not its state (72 bytes each, ~0.9 KB a connection,
/// was the largest part of a connection's idle future).
#[derive(Debug, Default)]
pub struct Repeats(Option<Box<State>>);

#[derive(Debug, Default)]
struct State {
    reason: Option<&'static str>,
    streak: u64,
    unlogged: u64,
    last_line: Option<Instant>,
    /// Start of the current budget window, and lines written in it.
    window: Option<Instant>,
    lines: u32,
}

impl Repeats {
    /// One more failure with `reason`. `Some(n)`: log it (the log field `repeated`), `n` being
    /// how many occurrences since the previous line were not logged (0 for the first of a kind or
    /// a change of reason, more for a summary); `None`: say nothing.
    pub fn failed(&mut self, reason: &'static str) -> Option<u64> {
        self.failed_at(reason, Instant::now())
    }

    /// An event that is not a failure but must not flood either (a tool list that changed, a
    /// session that opened): the same rules as [`Self::failed`], keyed by `what`.
    pub fn occurred(&mut self, what: &'static str) -> Option<u64> {
        self.failed(what)
    }

    fn failed_at(&mut self, reason: &'static str, now: Instant) -> Option<u64> {
        self.0.get_or_insert_default().failed_at(reason, now)
    }

    /// It worked: `Some(failures)` when this ends a failing streak (log the recovery once).
    pub fn recovered(&mut self) -> Option<u64> {
        self.recovered_at(Instant::now())
    }

    fn recovered_at(&mut self, now: Instant) -> Option<u64> {
        self.0.as_mut()?.recovered_at(now)
    }

    /// It works, and that is not worth a line of its own: the next failure is a change again.
    pub fn reset(&mut self) {
        if let Some(s) = &mut self.0 {
            s.reset();
        }
    }
}

impl State {
    fn failed_at(&mut self, reason: &'static str, now: Instant) -> Option<u64> {
        self.streak += 1;
        let changed = self.reason != Some(reason);
        self.reason = Some(reason);
        if changed {
            // A change of state is logged at once (budget allowing), carrying what was not.
            if self.may_log(now) {
                return Some(std::mem::take(&mut self.unlogged));
            }
            self.unlogged += 1;
            return None;
        }
        // The same again: counted, and summarised (this one included) once a period is over.
        self.unlogged += 1;
        let quiet = self
            .last_line
            .is_some_and(|at| now.duration_since(at) < SUMMARY_EVERY);
        if quiet || !self.may_log(now) {
            return None;
        }
        Some(std::mem::take(&mut self.unlogged))
    }

    fn recovered_at(&mut self, now: Instant) -> Option<u64> {
        self.reason.take()?;
        let failures = std::mem::take(&mut self.streak);
        if !self.may_log(now) {
            self.unlogged += 1;
            return None;
        }
        self.last_line = None;
        self.unlogged = 0;
        Some(failures)
    }

    fn reset(&mut self) {
        self.reason = None;
        self.streak = 0;
        self.last_line = None;
    }

    /// Whether the window's budget allows one more line (and take it).
    fn may_log(&mut self, now: Instant) -> bool {
        if self
            .window
            .is_none_or(|start| now.duration_since(start) >= SUMMARY_EVERY)
        {
            self.window = Some(now);
            self.lines = 0;
        }
        if self.lines >= LINES_PER_WINDOW {
            return false;
        }
        self.lines += 1;
        self.last_line = Some(now);
        true
    }
}

/// Names for a log line: the first [`NAMES_PER_LINE`], each cut to [`LOG_STRING_BYTES`] and
/// made printable, then how many more.
pub fn name_list(names: &[String]) -> String {
    mcp_client::text::bounded_list(names, NAMES_PER_LINE, LOG_STRING_BYTES)
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
        let t1 = t0 + SUMMARY_EVERY + Duration::from_secs(3);
        assert_eq!(r.recovered_at(t1), Some(102));
        assert_eq!(r.recovered_at(t1), None, "a recovery is reported once");
        assert_eq!(r.failed_at("timeout", t1), Some(0));
    }

    #[test]
    fn a_state_that_changes_all_the_time_writes_a_bounded_number_of_lines() {
        let t0 = Instant::now();
        let mut r = Repeats::default();
        let mut lines = 0;
        let mut counted = 0;
        // 10 000 flips (fail, recover, fail …) and changes of reason within one window.
        for i in 0..10_000u64 {
            let now = t0 + Duration::from_millis(i);
            let said = match i % 3 {
                0 => r.failed_at("a", now),
                1 => r.failed_at("b", now),
                _ => r.recovered_at(now),
            };
            if let Some(n) = said {
                lines += 1;
                counted += n;
            }
        }
        assert_eq!(lines, LINES_PER_WINDOW, "one window, its budget");
        // The next window: a line at once, carrying what was not written.
        let later = t0 + SUMMARY_EVERY + Duration::from_secs(60);
        let n = r.failed_at("a", later).expect("a new window writes again");
        assert!(n > 9_000 && counted < 10, "{n} {counted}");
    }

    #[test]
    fn the_same_occurrence_forever_is_one_line_per_window() {
        let t0 = Instant::now();
        let mut r = Repeats::default();
        let lines = (0..100_000u64)
            .filter_map(|i| r.failed_at("changed", t0 + Duration::from_millis(10 * i)))
            .count();
        // 1 000 s: the first line, then one summary per 300 s.
        assert_eq!(lines, 4);
    }

    #[test]
    fn a_kind_that_never_fails_keeps_no_state() {
        let mut r = Repeats::default();
        assert_eq!(r.recovered(), None);
        r.reset();
        assert!(
            r.0.is_none(),
            "recoveries and resets of an unused kind allocate nothing"
        );
        assert_eq!(std::mem::size_of::<Repeats>(), std::mem::size_of::<usize>());
        assert_eq!(r.failed("timeout"), Some(0));
        assert!(r.0.is_some());
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
