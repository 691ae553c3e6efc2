//! Item and list fingerprints, and the diff between what a client caches and what a server serves.
//!
//! A connection stores fingerprints, not definitions: a key (a tool's or prompt's name, a
//! resource's URI, a template's URI template; see [`super::list::List::key_field`]) and 8 bytes per
//! item keep memory per connection in kilobytes while still catching a changed `inputSchema` (F13).
//! Fingerprints are truncated to 53 bits so a list fingerprint is exact as a Prometheus float
//! gauge.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// 2^53 - 1: the largest integer a float64 holds exactly.
const FINGERPRINT_MASK: u64 = (1 << 53) - 1;

/// The fingerprint of one tool definition: SHA-256 of its canonical JSON without `_meta`.
pub fn definition_fingerprint(tool: &Value) -> u64 {
    let mut hasher = Sha256::new();
    match tool {
        // `_meta` is out-of-band data the spec lets change freely; it is not the contract.
        Value::Object(map) => write_object(map, |k| k != "_meta", &mut hasher),
        other => write_canonical(other, &mut hasher),
    }
    truncate_digest(hasher)
}

/// Canonical JSON: object keys sorted, no whitespace, serde_json's number and string forms.
/// Written straight into the hash: a walk fingerprints every definition it reads, so a string
/// per key and per scalar was a third of the work.
fn write_canonical(value: &Value, out: &mut Sha256) {
    match value {
        Value::Object(map) => write_object(map, |_| true, out),
        Value::Array(items) => {
            out.update(b"[");
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.update(b",");
                }
                write_canonical(v, out);
            }
            out.update(b"]");
        }
        scalar => write_json(scalar, out),
    }
}

/// `map`'s entries whose key `keep`s, keys sorted (whatever order the map keeps them in).
fn write_object(
    map: &serde_json::Map<String, Value>,
    keep: impl Fn(&str) -> bool,
    out: &mut Sha256,
) {
    out.update(b"{");
    let mut keys: Vec<&String> = map.keys().filter(|k| keep(k)).collect();
    keys.sort();
    for (i, k) in keys.into_iter().enumerate() {
        if i > 0 {
            out.update(b",");
        }
        write_json(k, out);
        out.update(b":");
        write_canonical(&map[k], out);
    }
    out.update(b"}");
}

/// A key or scalar as serde_json writes it compactly (`Value`'s `Display`), into the hash.
fn write_json<T: serde::Serialize + ?Sized>(v: &T, out: &mut Sha256) {
    struct Hashing<'a>(&'a mut Sha256);
    impl std::io::Write for Hashing<'_> {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.update(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    // Strings and JSON scalars always serialize, and the hash never refuses bytes.
    serde_json::to_writer(Hashing(out), v).expect("a JSON scalar serializes");
}

fn truncate_digest(hasher: Sha256) -> u64 {
    let digest = hasher.finalize();
    let mut eight = [0u8; 8];
    eight.copy_from_slice(&digest[..8]);
    u64::from_be_bytes(eight) & FINGERPRINT_MASK
}

/// Whether a tool definition promises to be safe to call from a probe: annotated
/// `readOnlyHint: true` and not `destructiveHint: true`. Annotations are hints from the server,
/// so an absent annotation is never read as a promise.
pub fn read_only_hinted(tool: &Value) -> bool {
    let hint = |k: &str| {
        tool.get("annotations")
            .and_then(|a| a.get(k))
            .and_then(Value::as_bool)
    };
    hint("readOnlyHint") == Some(true) && hint("destructiveHint") != Some(true)
}

/// The spec's longest tool name (`tools` § Tool Names: 1 to 128 characters).
pub const MAX_NAME_CHARS: usize = 128;
/// How much of an over-long name is kept in front of its hash: enough to recognise it on the
/// status page, small enough that a hostile server's megabyte names cost a few dozen bytes each.
const LONG_NAME_PREFIX_CHARS: usize = 48;

/// A tool name as a connection keeps it. Names within the spec's 128 characters are kept as
/// they are; a longer one (a finding in itself) is kept as its first 48 characters, `…#` and 16
/// hex digits of its hash, so that distinct long names stay distinct while each costs at most
/// ~215 bytes whatever the server sent. Returns whether the name was shortened.
pub fn kept_name(name: &str) -> (Box<str>, bool) {
    match name.char_indices().nth(MAX_NAME_CHARS) {
        None => (name.into(), false),
        Some(_) => {
            let cut = name
                .char_indices()
                .nth(LONG_NAME_PREFIX_CHARS)
                .map_or(name.len(), |(i, _)| i);
            let digest = Sha256::digest(name.as_bytes());
            let mut kept = String::with_capacity(cut + 24);
            kept.push_str(&name[..cut]);
            kept.push_str("…#");
            for b in &digest[..8] {
                kept.push_str(&format!("{b:02x}"));
            }
            (kept.into_boxed_str(), true)
        }
    }
}

/// What a connection keeps of one item: where its key is in the set's text, its definition
/// fingerprint (53 bits) and, in the top bit, whether the definition is hinted read-only (see
/// [`read_only_hinted`]; covered by the fingerprint). 16 bytes.
#[derive(Debug, Clone, Copy)]
struct Kept {
    start: u32,
    len: u32,
    kept: u64,
}

const READ_ONLY: u64 = 1 << 63;

impl Kept {
    fn fingerprint(self) -> u64 {
        self.kept & FINGERPRINT_MASK
    }

    fn read_only(self) -> bool {
        self.kept & READ_ONLY != 0
    }
}

/// Heap bytes one kept item costs beyond its key's text, rounded up: what is charged against
/// the listing budget, so that many one-letter items cannot slip past it.
pub const BYTES_PER_ITEM: usize = 64;

/// A list as key → definition fingerprint, plus which tools are hinted read-only.
///
/// Kept as the keys' text in one string and a vector of 16-byte slots sorted by key, not as a
/// tree with a box per key: a connection keeps one or two of these per list for as long as it
/// runs, and a tree's nodes and the boxes cost about four times what an item needs here (two
/// allocations a set, whatever its length). Inserting in key order, as most servers list, is a
/// push; out of order it moves the slots of larger keys, bounded by the walker's caps (at most
/// [`super::walker::MAX_ITEMS_PER_WALK`] items, fewer within the byte budget). The text grows
/// by each key inserted, duplicates excepted; a set holds at most 4 GiB of keys (the budget
/// is at most 64 MiB).
#[derive(Debug, Clone, Default)]
pub struct ItemSet {
    text: String,
    slots: Vec<Kept>,
}

impl PartialEq for ItemSet {
    /// The same keys with the same definitions (and hints), whatever order they were listed in.
    fn eq(&self, other: &Self) -> bool {
        self.slots.len() == other.slots.len()
            && self
                .slots
                .iter()
                .zip(&other.slots)
                .all(|(a, b)| a.kept == b.kept && self.key(*a) == other.key(*b))
    }
}

impl Eq for ItemSet {}

impl ItemSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Insert an item; returns false when the key was already present (a duplicate).
    /// The first definition seen wins, as a client that de-duplicates by name would keep it.
    pub fn insert(&mut self, name: Box<str>, fingerprint: u64) -> bool {
        self.insert_tool(name, fingerprint, false)
    }

    /// [`ItemSet::insert`], recording whether the definition is hinted read-only.
    pub fn insert_tool(&mut self, name: Box<str>, fingerprint: u64, read_only: bool) -> bool {
        let at = match self.slots.last() {
            Some(last) if self.key(*last) < &*name => self.slots.len(),
            None => 0,
            _ => match self.position(&name) {
                Ok(_) => return false,
                Err(at) => at,
            },
        };
        let (Ok(start), Ok(len)) = (u32::try_from(self.text.len()), u32::try_from(name.len()))
        else {
            return false;
        };
        if start.checked_add(len).is_none() {
            return false;
        }
        self.text.push_str(&name);
        let kept = fingerprint & FINGERPRINT_MASK | if read_only { READ_ONLY } else { 0 };
        self.slots.insert(at, Kept { start, len, kept });
        true
    }

    /// Give back the spare capacity of the walk's growth: a finished listing is kept as is.
    pub fn shrink_to_fit(&mut self) {
        self.text.shrink_to_fit();
        self.slots.shrink_to_fit();
    }

    fn key(&self, slot: Kept) -> &str {
        &self.text[slot.start as usize..(slot.start + slot.len) as usize]
    }

    fn position(&self, name: &str) -> Result<usize, usize> {
        self.slots.binary_search_by(|s| self.key(*s).cmp(name))
    }

    fn get(&self, name: &str) -> Option<Kept> {
        self.position(name).ok().map(|i| self.slots[i])
    }

    /// Heap bytes this set is charged: keys plus [`BYTES_PER_ITEM`] each (more than it holds).
    /// Bounded by the walker's caps (items per walk, name length), so it bounds what one
    /// connection keeps.
    pub fn heap_bytes(&self) -> usize {
        self.text.len() + self.slots.len() * BYTES_PER_ITEM
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }

    pub fn contains(&self, name: &str) -> bool {
        self.position(name).is_ok()
    }

    /// Whether `name` is listed and hinted read-only (see [`read_only_hinted`]).
    pub fn is_read_only(&self, name: &str) -> bool {
        self.get(name).is_some_and(Kept::read_only)
    }

    /// The definition fingerprint of `name`, when listed.
    pub fn fingerprint_of(&self, name: &str) -> Option<u64> {
        self.get(name).map(Kept::fingerprint)
    }

    /// Names with their definition fingerprints, in name order.
    pub fn entries(&self) -> impl Iterator<Item = (&str, u64)> {
        self.slots.iter().map(|s| (self.key(*s), s.fingerprint()))
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.slots.iter().map(|s| self.key(*s))
    }

    /// The list fingerprint: a hash over the sorted tool fingerprints (each covers its name).
    pub fn fingerprint(&self) -> u64 {
        let mut fps: Vec<u64> = self.slots.iter().map(|s| s.fingerprint()).collect();
        fps.sort_unstable();
        let mut hasher = Sha256::new();
        for fp in fps {
            hasher.update(fp.to_be_bytes());
        }
        truncate_digest(hasher)
    }

    /// How `cache` differs from `server`.
    pub fn diff(server: &ItemSet, cache: &ItemSet) -> Drift {
        let mut drift = Drift::default();
        for (name, fingerprint) in server.entries() {
            match cache.fingerprint_of(name) {
                None => drift.missing.push(name.to_string()),
                Some(c) if c != fingerprint => drift.changed.push(name.to_string()),
                Some(_) => {}
            }
        }
        for name in cache.names() {
            if !server.contains(name) {
                drift.extra.push(name.to_string());
            }
        }
        drift
    }
}

/// The consistency probe's result, by tool name (names are kept for logs and the status page,
/// counts go to metrics).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Drift {
    /// On the server, not in the cache: the client cannot call them.
    pub missing: Vec<String>,
    /// In the cache, gone from the server: the client will call tools that no longer exist.
    pub extra: Vec<String>,
    /// Same name, different definition.
    pub changed: Vec<String>,
}

impl Drift {
    pub fn is_empty(&self) -> bool {
        self.missing.is_empty() && self.extra.is_empty() && self.changed.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Computed before the hash was fed without intermediate strings (2026-12-07).
    const GOLDEN: u64 = 7437063278986008;

    /// Fingerprints are written to pins files and compared across releases: the bytes hashed for
    /// a definition never change. Keys in any order, escapes, non-ASCII, numbers of every kind,
    /// nested arrays and `_meta` (left out) against a value computed once.
    #[test]
    fn a_definition_fingerprint_is_stable_across_releases() {
        let tool = json!({
            "name": "search_v2",
            "description": "Search \"the\" KB — ünïcødé\n\ttabbed \u{1}",
            "inputSchema": {
                "type": "object",
                "required": ["q"],
                "properties": {
                    "q": {"type": "string", "maxLength": 512},
                    "limit": {"type": "integer", "minimum": -1, "maximum": 18446744073709551615u64, "default": 2.5e-7},
                    "flags": {"type": "array", "items": [true, false, null, 0.1, 1e300]}
                },
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true},
            "_meta": {"changes": "freely"}
        });
        assert_eq!(definition_fingerprint(&tool), GOLDEN);
    }

    #[test]
    fn fingerprint_ignores_key_order_and_meta_but_not_schema() {
        let a = json!({"name": "search", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}});
        let b = json!({"inputSchema": {"properties": {"q": {"type": "string"}}, "type": "object"}, "name": "search", "_meta": {"x": 1}});
        let c = json!({"name": "search", "inputSchema": {"type": "object", "properties": {"q": {"type": "integer"}}}});
        assert_eq!(definition_fingerprint(&a), definition_fingerprint(&b));
        assert_ne!(definition_fingerprint(&a), definition_fingerprint(&c));
        assert!(definition_fingerprint(&a) <= FINGERPRINT_MASK);
    }

    #[test]
    fn nested_meta_is_part_of_the_definition() {
        let a = json!({"name": "t", "inputSchema": {"_meta": 1}});
        let b = json!({"name": "t", "inputSchema": {"_meta": 2}});
        assert_ne!(definition_fingerprint(&a), definition_fingerprint(&b));
    }

    #[test]
    fn list_fingerprint_is_order_independent_and_exact_as_float() {
        let mut x = ItemSet::new();
        x.insert("a".into(), 1);
        x.insert("b".into(), 2);
        let mut y = ItemSet::new();
        y.insert("b".into(), 2);
        y.insert("a".into(), 1);
        assert_eq!(x.fingerprint(), y.fingerprint());
        let f = x.fingerprint();
        assert_eq!((f as f64) as u64, f);
        y.insert("c".into(), 3);
        assert_ne!(x.fingerprint(), y.fingerprint());
    }

    #[test]
    fn duplicates_keep_the_first_definition() {
        let mut s = ItemSet::new();
        assert!(s.insert("a".into(), 1));
        assert!(!s.insert("a".into(), 2));
        assert_eq!(s.len(), 1);
        let mut t = ItemSet::new();
        t.insert("a".into(), 1);
        assert!(ItemSet::diff(&s, &t).is_empty());
    }

    #[test]
    fn items_are_kept_in_key_order_whatever_order_they_are_listed_in() {
        let mut s = ItemSet::new();
        for (name, fp, ro) in [
            ("m", 3, false),
            ("z", 5, true),
            ("a", 1, true),
            ("k", 2, false),
        ] {
            assert!(s.insert_tool(name.into(), fp, ro));
        }
        assert!(
            !s.insert_tool("k".into(), 9, true),
            "a duplicate out of order"
        );
        s.shrink_to_fit();
        let entries: Vec<_> = s.entries().collect();
        assert_eq!(entries, [("a", 1), ("k", 2), ("m", 3), ("z", 5)]);
        assert!(s.is_read_only("a") && s.is_read_only("z"));
        assert!(!s.is_read_only("k") && !s.is_read_only("m") && !s.is_read_only("b"));
        assert_eq!(s.fingerprint_of("m"), Some(3));
        assert_eq!(s.fingerprint_of("b"), None);
        // The read-only mark is not part of the fingerprint a set reports.
        assert_eq!(s.fingerprint_of("z"), Some(5));
    }

    #[test]
    fn sets_are_equal_whatever_order_their_items_were_listed_in() {
        let mut a = ItemSet::new();
        let mut b = ItemSet::new();
        for (name, fp) in [("x", 1), ("b", 2), ("m", 3)] {
            a.insert(name.into(), fp);
        }
        for (name, fp) in [("b", 2), ("m", 3), ("x", 1)] {
            b.insert(name.into(), fp);
        }
        assert_eq!(a, b);
        b.insert("c".into(), 4);
        assert_ne!(a, b);
        let mut c = ItemSet::new();
        c.insert_tool("b".into(), 2, true);
        c.insert("m".into(), 3);
        c.insert("x".into(), 1);
        assert_ne!(a, c, "a read-only hint differs");
    }

    #[test]
    fn diff_names_missing_extra_and_changed() {
        let mut server = ItemSet::new();
        server.insert("search_v2".into(), 1);
        server.insert("ticket".into(), 5);
        server.insert("export".into(), 7);
        let mut cache = ItemSet::new();
        cache.insert("search_legacy".into(), 2);
        cache.insert("ticket".into(), 6);
        cache.insert("export".into(), 7);
        let d = ItemSet::diff(&server, &cache);
        assert_eq!(d.missing, vec!["search_v2"]);
        assert_eq!(d.extra, vec!["search_legacy"]);
        assert_eq!(d.changed, vec!["ticket"]);
        assert!(!d.is_empty());
    }
}
