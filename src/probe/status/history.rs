//! A connection's history (its timeline and its tool changes), bounded in bytes across the board.
//!
//! A count cap alone does not bound memory: a change record with findings is a hundred times a
//! plain one, and a fleet of 10,000 connections whose lists churn would keep every connection's
//! rings full (about 9 KB each on the lab, up to ~40 KB against a hostile server). So each entry
//! weighs what it holds ([`Weigh`]), each [`Ring`] knows its weight, and the board hands every
//! connection a share of one fleet figure ([`HISTORY_BYTES`], split by [`Fleet::share`]): a small
//! fleet keeps long timelines, a large one short ones, and the whole stays near the figure. The
//! newest entry is always kept, whatever it weighs (each is bounded when stored), so the page
//! never loses the latest fact.

use std::collections::VecDeque;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde::{Serialize, Serializer};

/// Bytes the whole board's histories may hold (timelines and tool changes of every connection).
pub const HISTORY_BYTES: usize = 16 << 20;
/// A connection's share never falls below this (a dozen events and the newest change), however
/// large the fleet: 10,000 connections keep at most ~20 MB beyond their newest entries.
pub const MIN_SHARE: usize = 2 << 10;
/// Nor exceeds this, however small the fleet: the count caps bound a connection first anyway.
pub const MAX_SHARE: usize = 64 << 10;

/// What an entry holds in memory: its own size and the heap it owns.
pub trait Weigh {
    fn weight(&self) -> usize;
}

/// Oldest first, with its total weight. Read through `Deref`; changed only by [`Ring::push`],
/// [`Ring::fit`] and [`Ring::keep_newest`], which keep the weight right.
#[derive(Debug, Clone)]
pub struct Ring<T> {
    items: VecDeque<T>,
    bytes: usize,
}

impl<T> Default for Ring<T> {
    fn default() -> Self {
        Ring {
            items: VecDeque::new(),
            bytes: 0,
        }
    }
}

impl<T: Weigh> Ring<T> {
    /// Append `item`, dropping the oldest while more than `max` entries are kept.
    pub fn push(&mut self, item: T, max: usize) {
        self.bytes += item.weight();
        self.items.push_back(item);
        self.keep_newest(max);
    }

    /// Drop the oldest entries until the ring weighs at most `bytes`, keeping the newest.
    pub fn fit(&mut self, bytes: usize) {
        while self.bytes > bytes && self.items.len() > 1 {
            self.pop();
        }
    }

    /// Keep only the newest `n` entries.
    pub fn keep_newest(&mut self, n: usize) {
        while self.items.len() > n {
            self.pop();
        }
    }

    /// What the entries weigh together.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    fn pop(&mut self) {
        if let Some(old) = self.items.pop_front() {
            self.bytes -= old.weight();
        }
    }
}

impl<T> Deref for Ring<T> {
    type Target = VecDeque<T>;

    fn deref(&self) -> &VecDeque<T> {
        &self.items
    }
}

impl<T: Serialize> Serialize for Ring<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.items.serialize(s)
    }
}

/// The board's connections, counted for each one's share of [`HISTORY_BYTES`].
#[derive(Debug, Default)]
pub struct Fleet {
    connections: AtomicUsize,
}

impl Fleet {
    pub fn joined(&self, n: usize) {
        self.connections.fetch_add(n, Ordering::Relaxed);
    }

    pub fn left(&self, n: usize) {
        let _ = self
            .connections
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |c| {
                Some(c.saturating_sub(n))
            });
    }

    /// Bytes of history one connection may keep now.
    pub fn share(&self) -> usize {
        let n = self.connections.load(Ordering::Relaxed).max(1);
        (HISTORY_BYTES / n).clamp(MIN_SHARE, MAX_SHARE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Blob(usize);

    impl Weigh for Blob {
        fn weight(&self) -> usize {
            self.0
        }
    }

    #[test]
    fn a_ring_keeps_its_weight_and_the_newest_entry() {
        let mut r = Ring::default();
        for w in [100, 200, 300] {
            r.push(Blob(w), 10);
        }
        assert_eq!(r.bytes(), 600);
        r.fit(500);
        assert_eq!((r.len(), r.bytes()), (2, 500), "the oldest went first");
        r.fit(10);
        assert_eq!(
            (r.len(), r.bytes()),
            (1, 300),
            "the newest stays, whatever it weighs"
        );
        r.push(Blob(1), 1);
        assert_eq!((r.len(), r.bytes()), (1, 1), "the count cap holds too");
    }

    #[test]
    fn a_share_shrinks_with_the_fleet_within_its_bounds() {
        let f = Fleet::default();
        assert_eq!(
            f.share(),
            MAX_SHARE,
            "no connections yet: the largest share"
        );
        f.joined(1_000);
        assert_eq!(f.share(), HISTORY_BYTES / 1_000);
        f.joined(99_000);
        assert_eq!(f.share(), MIN_SHARE);
        f.left(100_000);
        f.left(5);
        assert_eq!(f.share(), MAX_SHARE, "never below zero connections");
    }
}
