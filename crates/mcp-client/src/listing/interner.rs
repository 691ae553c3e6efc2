//! One copy of each text across the process: what targets share of tool definitions.
//!
//! Targets behind one deployment (replicas, shards, one server probed under several names) list
//! the same definitions, and each target keeps the definitions it lists to classify changes
//! (see [`super::changes::Definitions`]). Kept per target, 1,000 targets of one server hold
//! 1,000 copies of one listing. Interned here, they hold one: a target keeps an `Arc<str>`,
//! and the [`Interner`] hands out the same allocation for the same text.
//!
//! The table is keyed by a hash of the text and checks the text on every hit, so two different
//! texts that hash alike are never shared (the second one is simply not shared); the default key
//! is SipHash with a per-process random key, so a server cannot aim for a collision anyway.
//! The table holds [`Weak`] references only: a text lives exactly as long as a target keeps it.
//! A dead `Weak` still holds its text's allocation until it is dropped, so the table is pruned
//! by bytes: when what it holds (alive or not) passes twice what was alive at the last prune
//! plus [`PRUNE_FLOOR`], the dead entries are dropped. The table is thus bounded by what is
//! alive, at an amortised constant cost per text interned.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Arc, LazyLock, Mutex, Weak};

/// Bytes the table may grow by, beyond twice what was alive at the last prune, before pruning:
/// a handful of listings, so a small table is not swept at every text.
pub const PRUNE_FLOOR: usize = 64 * 1024;

/// Bytes an entry costs beyond its text: the map slot, the `Weak` and the `Arc` header.
const ENTRY_OVERHEAD: usize = 48;

/// A table of shared texts (see the module docs).
pub struct Interner {
    key: Box<dyn Fn(&str) -> u64 + Send + Sync>,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    map: HashMap<u64, Entry>,
    /// Text and overhead of every entry in `map`, alive or dead.
    held: usize,
    /// Prune when `held` passes this.
    prune_above: usize,
}

struct Entry {
    text: Weak<str>,
    len: usize,
}

impl std::fmt::Debug for Interner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let t = self.lock();
        f.debug_struct("Interner")
            .field("entries", &t.map.len())
            .field("held", &t.held)
            .finish_non_exhaustive()
    }
}

impl Default for Interner {
    fn default() -> Self {
        Self::new()
    }
}

/// The process's table of tool definitions, shared by every target.
pub fn definitions() -> &'static Interner {
    static DEFINITIONS: LazyLock<Interner> = LazyLock::new(Interner::new);
    &DEFINITIONS
}

impl Interner {
    /// A table keyed by SipHash with a random key.
    pub fn new() -> Self {
        let state = std::collections::hash_map::RandomState::new();
        Self::with_key(move |text| state.hash_one(text))
    }

    /// A table keyed by `key`: how tests force two texts onto one key.
    pub fn with_key(key: impl Fn(&str) -> u64 + Send + Sync + 'static) -> Self {
        Interner {
            key: Box::new(key),
            table: Mutex::new(Table {
                prune_above: PRUNE_FLOOR,
                ..Table::default()
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The shared copy of `text`: the one already alive when there is one with the same text,
    /// else `text` itself, recorded for the next caller. A live entry under the same key with
    /// another text (a collision) stays; `text` is then returned unshared.
    pub fn intern(&self, text: &str) -> Arc<str> {
        let key = (self.key)(text);
        let mut t = self.lock();
        if let Some(e) = t.map.get(&key) {
            match e.text.upgrade() {
                Some(alive) if *alive == *text => return alive,
                Some(_) => return Arc::from(text),
                None => {}
            }
        }
        let shared: Arc<str> = Arc::from(text);
        let entry = Entry {
            text: Arc::downgrade(&shared),
            len: text.len(),
        };
        t.held += entry.len + ENTRY_OVERHEAD;
        if let Some(dead) = t.map.insert(key, entry) {
            t.held -= dead.len + ENTRY_OVERHEAD;
        }
        if t.held > t.prune_above {
            t.prune();
        }
        shared
    }

    /// Entries in the table, alive or not yet pruned.
    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Bytes the table holds (texts and overhead), alive or not yet pruned.
    pub fn held(&self) -> usize {
        self.lock().held
    }
}

impl Table {
    fn prune(&mut self) {
        self.map.retain(|_, e| e.text.strong_count() > 0);
        self.held = self.map.values().map(|e| e.len + ENTRY_OVERHEAD).sum();
        self.prune_above = self.held.saturating_mul(2).saturating_add(PRUNE_FLOOR);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_share_one_allocation() {
        let t = Interner::new();
        let a = t.intern("{\"name\":\"search\"}");
        let b = t.intern(&String::from("{\"name\":\"search\"}"));
        assert!(Arc::ptr_eq(&a, &b));
        let c = t.intern("{\"name\":\"other\"}");
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(t.len(), 2);
    }

    #[test]
    fn texts_on_one_key_are_never_shared() {
        let t = Interner::with_key(|_| 7);
        let a = t.intern("first");
        let b = t.intern("second");
        assert_eq!((&*a, &*b), ("first", "second"));
        assert!(!Arc::ptr_eq(&a, &b));
        // The entry alive stays the shared one; the colliding text is not recorded.
        assert!(Arc::ptr_eq(&a, &t.intern("first")));
        assert_eq!(&*t.intern("second"), "second");
        assert_eq!(t.len(), 1);
        // Once the first is gone, the key goes to whoever comes next.
        drop(a);
        let b2 = t.intern("second");
        assert!(Arc::ptr_eq(&b2, &t.intern("second")));
    }

    #[test]
    fn a_text_lives_as_long_as_someone_keeps_it() {
        let t = Interner::new();
        let a = t.intern("kept");
        let weak = Arc::downgrade(&a);
        drop(a);
        assert!(
            weak.upgrade().is_none(),
            "the table keeps no strong reference"
        );
        let again = t.intern("kept");
        assert_eq!(&*again, "kept");
    }

    #[test]
    fn dead_entries_are_pruned_so_the_table_is_bounded_by_what_is_alive() {
        let t = Interner::new();
        let alive: Vec<Arc<str>> = (0..100).map(|i| t.intern(&format!("alive {i}"))).collect();
        let text = "x".repeat(1000);
        for i in 0..10_000 {
            drop(t.intern(&format!("{text} churn {i}")));
            let live: usize = alive.iter().map(|a| a.len() + ENTRY_OVERHEAD).sum();
            // At a prune, the text being interned is alive too.
            assert!(t.held() <= 2 * (live + 1100) + PRUNE_FLOOR, "{}", t.held());
        }
        assert!(t.len() < 200, "{}", t.len());
        assert!(alive.iter().all(|a| Arc::ptr_eq(a, &t.intern(a))));
    }
}
