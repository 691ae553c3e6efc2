//! The values behind the series: plain atomics the program writes and the scrape reads.
//!
//! A counter or gauge is one `AtomicU64` (a gauge holds `f64` bits), so recording is one atomic
//! operation with no key built and no map looked up, and 10,000 connections cost a few hundred
//! bytes each. A histogram is a fixed array of bucket counts. Nothing here knows label names;
//! [`crate::Exposition`] writes them at scrape time.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bits of a gauge that has no value yet: its series is left out of the exposition. A negative
/// NaN that `f64::to_bits` of any value a program sets never produces.
pub const ABSENT: u64 = u64::MAX;

/// Upper bounds (seconds) of the latency histograms' buckets, `+Inf` implied. Ten buckets from
/// 5 ms to 10 s: loopback pings land in the first, a slow backend's walk near the end, and each
/// histogram costs 13 series.
pub const DURATION_BUCKETS: [f64; 10] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0];

/// One counter or gauge.
#[derive(Debug, Default)]
pub struct Cell(AtomicU64);

impl Cell {
    pub const fn absent() -> Self {
        Cell(AtomicU64::new(ABSENT))
    }

    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn set(&self, v: f64) {
        self.0.store(v.to_bits(), Ordering::Relaxed);
    }

    pub fn set_flag(&self, on: bool) {
        self.set(if on { 1.0 } else { 0.0 });
    }

    /// Raw value: a count, or gauge bits.
    pub fn raw(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A histogram with [`DURATION_BUCKETS`]; buckets are kept per bucket and summed at render.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; DURATION_BUCKETS.len() + 1],
    sum_bits: AtomicU64,
}

/// What a histogram held at one instant: cumulative bucket counts (the last is `+Inf`, the
/// count) and the sum.
pub struct HistogramSnapshot {
    pub cumulative: [u64; DURATION_BUCKETS.len() + 1],
    pub sum: f64,
}

impl Histogram {
    pub fn record(&self, v: f64) {
        let i = DURATION_BUCKETS
            .iter()
            .position(|b| v <= *b)
            .unwrap_or(DURATION_BUCKETS.len());
        self.buckets[i].fetch_add(1, Ordering::Relaxed);
        // The sum is an f64: add by compare-and-swap (uncontended: one connection records).
        let _ = self
            .sum_bits
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
                Some((f64::from_bits(bits) + v).to_bits())
            });
    }

    pub fn snapshot(&self) -> HistogramSnapshot {
        let mut cumulative = [0u64; DURATION_BUCKETS.len() + 1];
        let mut running = 0;
        for (c, b) in cumulative.iter_mut().zip(&self.buckets) {
            running += b.load(Ordering::Relaxed);
            *c = running;
        }
        HistogramSnapshot {
            cumulative,
            sum: f64::from_bits(self.sum_bits.load(Ordering::Relaxed)),
        }
    }
}

/// Series created on first use, keyed by label values from closed sets (methods, reasons,
/// triggers — all `&'static str` from the code), so their number is bounded by those sets.
///
/// The values are kept inline, in a vector of exactly their number: a connection has a handful
/// of these sets, and a shared pointer and an allocation per value (what `get` once handed out)
/// cost more than the atomics themselves.
#[derive(Debug)]
pub struct Lazy<K, V> {
    entries: Mutex<Vec<(K, V)>>,
}

impl<K, V> Default for Lazy<K, V> {
    fn default() -> Self {
        Lazy {
            entries: Mutex::new(Vec::new()),
        }
    }
}

impl<K: PartialEq + Copy, V> Lazy<K, V> {
    /// `f` of the value for `key`, created (at its default) on first use.
    pub fn with<R>(&self, key: K, f: impl FnOnce(&V) -> R) -> R
    where
        V: Default,
    {
        self.with_or(key, V::default, f)
    }

    /// `f` of the value for `key`, made by `init` on first use.
    pub fn with_or<R>(&self, key: K, init: impl FnOnce() -> V, f: impl FnOnce(&V) -> R) -> R {
        let mut entries = self.entries.lock().expect("metrics lock poisoned");
        let i = match entries.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                entries.reserve_exact(1);
                entries.push((key, init()));
                entries.len() - 1
            }
        };
        f(&entries[i].1)
    }

    /// Every key and value so far, in creation order.
    pub fn each(&self, mut f: impl FnMut(K, &V)) {
        for (k, v) in self.entries.lock().expect("metrics lock poisoned").iter() {
            f(*k, v);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_sum_adds_up() {
        let h = Histogram::default();
        for v in [0.001, 0.005, 0.3, 20.0] {
            h.record(v);
        }
        let s = h.snapshot();
        assert_eq!(s.cumulative[0], 2, "0.001 and 0.005 are <= 5 ms");
        assert_eq!(s.cumulative[6], 3, "0.3 is <= 0.5");
        assert_eq!(s.cumulative[DURATION_BUCKETS.len() - 1], 3);
        assert_eq!(s.cumulative[DURATION_BUCKETS.len()], 4, "+Inf counts all");
        assert!((s.sum - 20.306).abs() < 1e-9);
    }

    #[test]
    fn lazy_series_are_created_once_per_key() {
        let l: Lazy<(&str, &str), Cell> = Lazy::default();
        l.with(("a", "x"), |c| c.add(1));
        l.with(("a", "x"), |c| c.add(2));
        l.with(("b", "x"), |c| c.add(1));
        let mut seen = Vec::new();
        l.each(|k, v| seen.push((k, v.raw())));
        assert_eq!(seen, vec![(("a", "x"), 3), (("b", "x"), 1)]);
    }

    #[test]
    fn absent_gauges_are_marked() {
        let c = Cell::absent();
        assert_eq!(c.raw(), ABSENT);
        c.set(2.5);
        assert_eq!(f64::from_bits(c.raw()), 2.5);
    }
}
