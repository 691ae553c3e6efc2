//! When something happened, as the status page says it.
//!
//! Kept as milliseconds since the Unix epoch (8 bytes, nothing allocated) and written as RFC 3339
//! with milliseconds only when a page or `/status.json` is rendered. A connection keeps a dozen
//! of these and up to 100 events; as strings each was a 24-byte header and a 32-byte allocation,
//! ~0.6 KB a connection, written far more often than anyone reads them.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Serialize, Serializer};

/// An instant, to the millisecond.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(u64);

impl Stamp {
    pub fn now() -> Self {
        Self::of(SystemTime::now())
    }

    /// `t`, to the millisecond; a time before 1970 (a clock set wrong) is 1970.
    pub fn of(t: SystemTime) -> Self {
        let ms = t.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis();
        Stamp(u64::try_from(ms).unwrap_or(u64::MAX))
    }

    pub fn time(self) -> SystemTime {
        UNIX_EPOCH + Duration::from_millis(self.0)
    }

    /// Whether both fall on the same day in UTC (the day the RFC 3339 text starts with).
    pub fn same_utc_day(self, other: Stamp) -> bool {
        const DAY_MS: u64 = 24 * 60 * 60 * 1000;
        self.0 / DAY_MS == other.0 / DAY_MS
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&humantime::format_rfc3339_millis(self.time()), f)
    }
}

impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stamp_is_written_as_rfc3339_with_milliseconds() {
        let t = UNIX_EPOCH + Duration::from_millis(1_796_654_800_376);
        let s = Stamp::of(t);
        assert_eq!(s.to_string(), "2026-12-07T14:46:40.376Z");
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            "\"2026-12-07T14:46:40.376Z\""
        );
        assert_eq!(
            Stamp::of(UNIX_EPOCH - Duration::from_secs(1)).to_string(),
            "1970-01-01T00:00:00.000Z"
        );
        assert!(Stamp::of(t) < Stamp::of(t + Duration::from_millis(1)));
        let midnight = UNIX_EPOCH + Duration::from_secs(1_796_688_000); // 2026-12-08T00:00:00Z
        let before = Stamp::of(midnight - Duration::from_millis(1));
        assert!(before.same_utc_day(s));
        assert!(!before.same_utc_day(Stamp::of(midnight)));
    }
}
