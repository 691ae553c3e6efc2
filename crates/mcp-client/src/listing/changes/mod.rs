//! Definition changes in any cached list (tools, prompts, resources, resource templates): what
//! changed between two listings and whether old callers break ([`classify`] for the walk over
//! a definition and the tool rules, [`lists`] for the other lists' rules, with JSON [`paths`]),
//! and what was approved ([`pins`]). The list is a value ([`List`]): one code path classifies,
//! keeps and pins every list; [`changes`] is [`changes_in`] for tools.
//!
//! A connection keeps fingerprints, not definitions (see [`super::items`]). To say *how* a
//! definition changed, both definitions are needed, so each target keeps one [`Definitions`]
//! store shared by its connections: keyed by fingerprint, so N connections seeing the same
//! listing store it once, not N times; and each text is shared with every other target that
//! keeps the same one ([`super::interner`]), so 1,000 targets of one server hold one copy.
//!
//! The store is bounded by what is listed, not by a budget: told each connection's complete
//! listings ([`Definitions::listed`]), it keeps the definitions of the connection's current
//! listing and of the one before its last change (so the next change is classified before →
//! after even if the store hears of it first), and what walks in flight have read; it forgets a
//! definition no connection lists now or listed just before once the connection reporting has
//! finished two walks since the definition was last read (a walk in flight on another
//! connection keeps what it reads that long). Under churn it thus holds two listings, not a
//! budget's worth. Each list a connection walks is a listing of its own
//! ([`Definitions::listed_in`]): definitions of every list share the store (a fingerprint covers
//! the whole definition, so items of two lists collide only when they are the same JSON), and
//! walking prompts never displaces the tools.
//!
//! A hard cap bounds a store whose walks fail or whose server misbehaves: twice
//! `max_listing_bytes` per connection and list walked ([`Definitions::for_lists`]), the current
//! and previous listing of each (the walker
//! holds a listing to `max_listing_bytes` on the wire, and its compact JSON is no longer but for
//! number forms that serialise longer). Over it, what no listing holds and no walk has read
//! since the last listing goes first, then what only a previous listing holds, then the rest no
//! listing holds, never what a connection lists now. A store told no listings (`check`) keeps
//! what walks read under its cap, the least recently read forgotten first. A change whose old or
//! new definition is not kept is classified `unknown` (rule `definition_not_kept`), never
//! guessed.

pub mod classify;
mod findings;
mod lists;
pub mod paths;
pub mod pins;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::items::ItemSet;
use super::list::{List, ListSet};
pub use classify::{Class, Classification, Finding, classify, classify_item};

/// The `change` label values of `mcp_probe_tool_changes_total`, in exposition order.
pub const CHANGE_KINDS: [&str; 5] = ["added", "removed", "breaking", "compatible", "unknown"];

/// What happened to one item (a tool, prompt, resource or template) between two listings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    Added,
    Removed,
    Changed(Class),
}

impl ChangeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Added => "added",
            ChangeKind::Removed => "removed",
            ChangeKind::Changed(c) => c.as_str(),
        }
    }

    /// Index into [`CHANGE_KINDS`].
    pub fn index(self) -> usize {
        CHANGE_KINDS
            .iter()
            .position(|k| *k == self.as_str())
            .unwrap_or(0)
    }
}

/// One item's change, as the status page and `check` show it. Named for tools, which it first
/// described; the same type serves every list ([`ItemChange`]), the list being known to whoever
/// asked ([`changes_in`]).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolChange {
    /// The item's kept key (bounded and escaped when shown): a tool's or prompt's name, a
    /// resource's URI, a template's URI template.
    pub tool: String,
    /// `added`, `removed`, `breaking`, `compatible` or `unknown`.
    pub change: &'static str,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    /// Findings not shown.
    #[serde(skip_serializing_if = "is_zero")]
    pub more: usize,
    /// The `description` changed (the rug-pull pattern when the tool is pinned).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub description_changed: bool,
}

/// One item's change in any list: [`ToolChange`] under the name that says so.
pub type ItemChange = ToolChange;

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Every change from the tool listing `before` to `after`: [`changes_in`] for tools.
pub fn changes(before: &ItemSet, after: &ItemSet, defs: &Definitions) -> Vec<ToolChange> {
    changes_in(List::Tools, before, after, defs)
}

/// Every change from the listing `before` to `after` of `list`, classified with the
/// definitions in `defs`: added and removed by key, changed ones by [`classify_item`].
pub fn changes_in(
    list: List,
    before: &ItemSet,
    after: &ItemSet,
    defs: &Definitions,
) -> Vec<ItemChange> {
    let drift = ItemSet::diff(after, before);
    let mut out = Vec::with_capacity(drift.missing.len() + drift.extra.len() + drift.changed.len());
    let plain = |tool: &String, kind: ChangeKind| ToolChange {
        tool: tool.clone(),
        change: kind.as_str(),
        findings: Vec::new(),
        more: 0,
        description_changed: false,
    };
    out.extend(drift.missing.iter().map(|t| plain(t, ChangeKind::Added)));
    out.extend(drift.extra.iter().map(|t| plain(t, ChangeKind::Removed)));
    for name in &drift.changed {
        let old = before.fingerprint_of(name).and_then(|fp| defs.get(fp));
        let new = after.fingerprint_of(name).and_then(|fp| defs.get(fp));
        let c = match (old, new) {
            (Some(b), Some(a)) => classify_item(list, &b, &a),
            _ => Classification {
                findings: vec![Finding {
                    path: "$".into(),
                    rule: "definition_not_kept",
                    class: Class::Unknown,
                    before: None,
                    after: None,
                }],
                ..Classification::default()
            },
        };
        // Fingerprints differ only where definitions do; a difference in `_meta` alone cannot
        // reach here. An empty classification would be a bug: say unknown, not compatible.
        let class = c.class().unwrap_or(Class::Unknown);
        out.push(ToolChange {
            tool: name.clone(),
            change: ChangeKind::Changed(class).as_str(),
            findings: c.findings,
            more: c.more,
            description_changed: c.description_changed,
        });
    }
    out
}

/// Findings shown per tool on the status page and in `check`; the rest are counted.
pub const SHOWN_FINDINGS: usize = 8;

impl ToolChange {
    /// The status page's form: at most [`SHOWN_FINDINGS`] findings, the name bounded.
    pub fn shown(mut self) -> ToolChange {
        if self.findings.len() > SHOWN_FINDINGS {
            self.more += self.findings.len() - SHOWN_FINDINGS;
            self.findings.truncate(SHOWN_FINDINGS);
        }
        self.findings.shrink_to_fit();
        self.tool = crate::text::bounded(&self.tool, 160).into_owned();
        self
    }

    /// Heap bytes it owns: the name, the findings and their paths and values.
    pub fn heap_bytes(&self) -> usize {
        let text = |s: &Option<String>| s.as_ref().map_or(0, String::capacity);
        self.tool.capacity()
            + self.findings.capacity() * std::mem::size_of::<Finding>()
            + self
                .findings
                .iter()
                .map(|f| f.path.capacity() + text(&f.before) + text(&f.after))
                .sum::<usize>()
    }
}

/// A pinned item's mismatch (of any list) as a [`ToolChange`]: `removed` when it is no longer
/// listed, else its class against the pinned definition (`unknown` when the served one is not
/// kept).
pub fn pin_change(tool: &str, m: &pins::Mismatch) -> ToolChange {
    let (change, c) = match m {
        pins::Mismatch::Absent => ("removed", Classification::default()),
        pins::Mismatch::Changed { diff: Some(d), .. } => {
            (d.class().unwrap_or(Class::Unknown).as_str(), d.clone())
        }
        pins::Mismatch::Changed { diff: None, .. } => ("unknown", Classification::default()),
    };
    ToolChange {
        tool: tool.to_string(),
        change,
        findings: c.findings,
        more: c.more,
        description_changed: c.description_changed,
    }
    .shown()
}

/// Counts per [`CHANGE_KINDS`].
pub fn counts(changes: &[ToolChange]) -> [u64; 5] {
    let mut n = [0u64; 5];
    for c in changes {
        if let Some(i) = CHANGE_KINDS.iter().position(|k| *k == c.change) {
            n[i] += 1;
        }
    }
    n
}

/// The definitions a target's connections list, by fingerprint (see the module docs).
#[derive(Debug)]
pub struct Definitions {
    cap: usize,
    inner: Mutex<Store>,
}

#[derive(Debug, Default)]
struct Store {
    map: HashMap<u64, Kept>,
    /// JSON plus [`ENTRY_OVERHEAD`] of every entry in `map`.
    bytes: usize,
    /// Bumped per [`Definitions::keep`] and [`Definitions::listed`]: what happened before what.
    clock: u64,
    /// What each connection listed of each list, at `connection * 4 + list`, as
    /// [`Definitions::listed_in`] was told.
    connections: Vec<Listings>,
    /// The clock at the latest [`Definitions::listed`] of any connection.
    last_listed: u64,
    /// Entries no listing holds ([`Held::Unlisted`]).
    unlisted: usize,
}

/// One connection's listings, as sorted fingerprints.
#[derive(Debug, Default)]
struct Listings {
    /// Its last complete listing.
    current: Box<[u64]>,
    /// The listing before its last change.
    previous: Box<[u64]>,
    /// The clock at its last listing and at the one before.
    listed: u64,
    listed_before: u64,
}

/// Which listing holds a kept definition, the strongest of all the target's connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Held {
    Unlisted = 0,
    Previous = 1,
    Current = 2,
}

#[derive(Debug)]
struct Kept {
    /// Compact JSON without `_meta` (what the fingerprint covers), shared across targets.
    json: Arc<str>,
    /// The clock when a walk last read it, shifted left two bits, and which listing holds it in
    /// those two: one word, so a map slot is 32 bytes, not 40 (a target's map of a few dozen
    /// definitions is one of the largest things a connection keeps).
    seen_held: u64,
}

impl Kept {
    fn new(json: Arc<str>, seen: u64, held: Held) -> Self {
        Kept {
            json,
            seen_held: (seen << 2) | held as u64,
        }
    }

    /// The clock when a walk last read it.
    fn seen(&self) -> u64 {
        self.seen_held >> 2
    }

    fn held(&self) -> Held {
        match self.seen_held & 3 {
            0 => Held::Unlisted,
            1 => Held::Previous,
            _ => Held::Current,
        }
    }

    fn set_seen(&mut self, seen: u64) {
        self.seen_held = (seen << 2) | (self.seen_held & 3);
    }

    fn set_held(&mut self, held: Held) {
        self.seen_held = (self.seen_held & !3) | held as u64;
    }
}

/// Bytes a kept definition costs beyond its JSON: the map slot and the allocation.
const ENTRY_OVERHEAD: usize = 48;

impl Definitions {
    /// A store of at most `cap` bytes. Told no listings, it keeps what walks read, forgetting
    /// the least recently read first when over `cap` (what `check` does over its few walks).
    pub fn new(cap: usize) -> Self {
        Definitions {
            cap,
            inner: Mutex::new(Store::default()),
        }
    }

    /// The store of a target with `connections` connections, each listing at most
    /// `max_listing_bytes`: capped at the current and previous listing of each.
    pub fn for_target(max_listing_bytes: usize, connections: u16) -> Self {
        Self::new(
            max_listing_bytes
                .saturating_mul(2)
                .saturating_mul(usize::from(connections.max(1))),
        )
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remember `tool` under its `fingerprint` (already computed by the walker). A definition
    /// already kept is only marked as read now; one larger than half the cap is not kept.
    pub fn keep(&self, fingerprint: u64, tool: &Value) {
        if self.read(fingerprint) {
            return;
        }
        let json = match tool {
            Value::Object(m) if m.contains_key("_meta") => {
                let mut m = m.clone();
                m.remove("_meta");
                Value::Object(m).to_string()
            }
            other => other.to_string(),
        };
        let cost = json.len() + ENTRY_OVERHEAD;
        if cost > self.cap / 2 {
            return;
        }
        let json = super::interner::definitions().intern(&json);
        let mut s = self.lock();
        s.clock += 1;
        let seen = s.clock;
        if let Some(k) = s.map.get_mut(&fingerprint) {
            // Another connection's walk kept it meanwhile.
            k.set_seen(seen);
            return;
        }
        s.bytes += cost;
        s.unlisted += 1;
        let held = Held::Unlisted;
        s.map.insert(fingerprint, Kept::new(json, seen, held));
        if s.bytes > self.cap {
            s.make_room(self.cap, fingerprint);
        }
    }

    /// Mark the definition under `fingerprint` as read now; whether it is kept.
    fn read(&self, fingerprint: u64) -> bool {
        let mut s = self.lock();
        s.clock += 1;
        let seen = s.clock;
        s.map
            .get_mut(&fingerprint)
            .map(|k| k.set_seen(seen))
            .is_some()
    }

    /// The store of a target whose connections each walk the lists in `lists`, each listing
    /// at most `max_listing_bytes`: capped at the current and previous listing of each list of
    /// each connection. [`Definitions::for_target`] is this for the tool list alone.
    pub fn for_lists(max_listing_bytes: usize, connections: u16, lists: ListSet) -> Self {
        let lists = lists.iter().count().max(1);
        Self::new(
            max_listing_bytes
                .saturating_mul(2)
                .saturating_mul(usize::from(connections.max(1)))
                .saturating_mul(lists),
        )
    }

    /// Connection `connection` completed a walk listing `tools`: [`Definitions::listed_in`]
    /// for the tool list.
    pub fn listed(&self, connection: u16, tools: &ItemSet) {
        self.listed_in(List::Tools, connection, tools)
    }

    /// Connection `connection` completed a walk of `list` listing `items`: their definitions
    /// are kept as its current listing of that list, the one before its last change as its
    /// previous, and what no connection lists now or just before (in any list) is forgotten
    /// once no walk in flight can still need it (see the module docs). Each list of a
    /// connection has its own current and previous listing, so a prompt walk never makes the
    /// store forget the tools.
    pub fn listed_in(&self, list: List, connection: u16, items: &ItemSet) {
        let mut fps: Vec<u64> = items.entries().map(|(_, fp)| fp).collect();
        fps.sort_unstable();
        fps.dedup();
        let mut s = self.lock();
        s.clock += 1;
        let now = s.clock;
        s.last_listed = now;
        let slot = List::ALL.iter().position(|l| *l == list).unwrap_or(0);
        let i = usize::from(connection) * List::ALL.len() + slot;
        if s.connections.len() <= i {
            s.connections.resize_with(i + 1, Listings::default);
        }
        let c = &mut s.connections[i];
        let changed = *c.current != *fps;
        if changed {
            c.previous = std::mem::replace(&mut c.current, fps.into_boxed_slice());
        }
        c.listed_before = std::mem::replace(&mut c.listed, now);
        let read_before = c.listed_before;
        if changed || s.unlisted > 0 {
            s.mark_held();
            s.forget_unlisted(read_before);
        }
    }

    /// The definition kept under `fingerprint`.
    pub fn get(&self, fingerprint: u64) -> Option<Value> {
        let json = self.json(fingerprint)?;
        serde_json::from_str(&json).ok()
    }

    /// The JSON kept under `fingerprint`: the copy shared by every target that keeps it.
    pub fn json(&self, fingerprint: u64) -> Option<Arc<str>> {
        self.lock().map.get(&fingerprint).map(|k| k.json.clone())
    }

    /// Bytes this target keeps: the JSON of each definition and a per-entry overhead, whether
    /// or not other targets share the text (so one target's figure does not depend on others;
    /// summed over targets it is an upper bound). At most the cap.
    pub fn bytes(&self) -> usize {
        self.lock().bytes
    }

    pub fn len(&self) -> usize {
        self.lock().map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Store {
    /// Mark each entry with the strongest listing that holds it.
    fn mark_held(&mut self) {
        for k in self.map.values_mut() {
            k.set_held(Held::Unlisted);
        }
        for c in &self.connections {
            for (fps, held) in [(&c.previous, Held::Previous), (&c.current, Held::Current)] {
                for fp in fps.iter() {
                    if let Some(k) = self.map.get_mut(fp) {
                        k.set_held(k.held().max(held));
                    }
                }
            }
        }
        self.unlisted = self
            .map
            .values()
            .filter(|k| k.held() == Held::Unlisted)
            .count();
    }

    /// Forget what no listing holds and no walk has read since `read_before`.
    fn forget_unlisted(&mut self, read_before: u64) {
        let mut freed = 0;
        let mut forgotten = 0;
        self.map.retain(|_, k| {
            let keep = k.held() != Held::Unlisted || k.seen() >= read_before;
            if !keep {
                freed += k.json.len() + ENTRY_OVERHEAD;
                forgotten += 1;
            }
            keep
        });
        self.bytes -= freed;
        self.unlisted -= forgotten;
    }

    /// Over `cap`: forget down to 3/4 of it, in one pass, first what no listing holds and no
    /// walk has read since the last listing, then what only a previous listing holds, then the
    /// rest no listing holds, the least recently read first in each; never what a current
    /// listing holds. `just_kept` goes only if the store is still over `cap` without the rest.
    fn make_room(&mut self, cap: usize, just_kept: u64) {
        let last_listed = self.last_listed;
        let rank = |k: &Kept| match k.held() {
            Held::Unlisted if k.seen() < last_listed => 0,
            Held::Previous => 1,
            Held::Unlisted => 2,
            Held::Current => 3,
        };
        let mut order: Vec<(u8, u64, u64)> = self
            .map
            .iter()
            .filter(|(fp, k)| k.held() != Held::Current && **fp != just_kept)
            .map(|(fp, k)| (rank(k), k.seen(), *fp))
            .collect();
        order.sort_unstable();
        let target = cap / 4 * 3;
        for (_, _, fp) in order {
            if self.bytes <= target {
                break;
            }
            self.forget(fp);
        }
        if self.bytes > cap {
            self.forget(just_kept);
        }
    }

    fn forget(&mut self, fingerprint: u64) {
        if let Some(k) = self.map.remove(&fingerprint) {
            self.bytes -= k.json.len() + ENTRY_OVERHEAD;
            if k.held() == Held::Unlisted {
                self.unlisted -= 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listing::items::definition_fingerprint;
    use serde_json::json;

    fn tool(name: &str, description: &str) -> Value {
        json!({"name": name, "description": description, "inputSchema": {"type": "object"}})
    }

    /// A walk reading `tools` into `defs`, as the walker does, and the listing it completes.
    fn walk(defs: &Definitions, tools: &[Value]) -> ItemSet {
        let mut set = ItemSet::new();
        for t in tools {
            let fp = definition_fingerprint(t);
            defs.keep(fp, t);
            set.insert(t["name"].as_str().unwrap().into(), fp);
        }
        set
    }

    fn kept(defs: &Definitions, t: &Value) -> bool {
        defs.get(definition_fingerprint(t)).is_some()
    }

    #[test]
    fn a_kept_entry_packs_when_it_was_read_and_what_holds_it_in_one_word() {
        let mut k = Kept::new(Arc::from("{}"), 5, Held::Previous);
        assert_eq!((k.seen(), k.held()), (5, Held::Previous));
        k.set_seen(u64::MAX >> 2);
        k.set_held(Held::Current);
        assert_eq!((k.seen(), k.held()), (u64::MAX >> 2, Held::Current));
        k.set_held(Held::Unlisted);
        assert_eq!((k.seen(), k.held()), (u64::MAX >> 2, Held::Unlisted));
        assert_eq!(std::mem::size_of::<Kept>(), 24);
    }

    #[test]
    fn targets_with_the_same_definition_share_one_copy() {
        let a = Definitions::for_target(256 << 10, 1);
        let b = Definitions::for_target(256 << 10, 2);
        let t = tool("search", "shared across targets");
        let fp = definition_fingerprint(&t);
        a.keep(fp, &t);
        // Another server's key order and `_meta`: the same definition, the same text.
        b.keep(
            fp,
            &json!({"_meta": {"x": 1}, "inputSchema": {"type": "object"}, "description": "shared across targets", "name": "search"}),
        );
        let (ja, jb) = (a.json(fp).unwrap(), b.json(fp).unwrap());
        assert!(Arc::ptr_eq(&ja, &jb));
        // Each target counts what it references, shared or not.
        assert_eq!(a.bytes(), b.bytes());
        assert_eq!(a.get(fp), b.get(fp));
    }

    #[test]
    fn a_tool_gone_from_the_current_and_the_previous_listing_is_forgotten() {
        let defs = Definitions::for_target(256 << 10, 1);
        let (a, b, c) = (tool("a", "1"), tool("b", "1"), tool("c", "1"));
        let l1 = walk(&defs, &[a.clone(), b.clone()]);
        defs.listed(0, &l1);
        let l2 = walk(&defs, std::slice::from_ref(&a));
        defs.listed(0, &l2);
        assert!(kept(&defs, &b), "the previous listing still holds it");
        // The same listing again changes nothing: the previous listing is the one before a change.
        defs.listed(0, &walk(&defs, std::slice::from_ref(&a)));
        assert!(kept(&defs, &b));
        let l3 = walk(&defs, &[a.clone(), c.clone()]);
        defs.listed(0, &l3);
        assert!(!kept(&defs, &b));
        assert!(kept(&defs, &a) && kept(&defs, &c));
        assert_eq!(defs.len(), 2);
    }

    #[test]
    fn churn_keeps_the_current_and_the_previous_listing_and_classifies_every_change() {
        let defs = Definitions::for_target(256 << 10, 1);
        let generation = |g: usize| -> Vec<Value> {
            (0..10)
                .map(|i| tool(&format!("t{i}"), &format!("generation {g}")))
                .collect()
        };
        let mut before = walk(&defs, &generation(0));
        defs.listed(0, &before);
        let one_listing = defs.bytes();
        for g in 1..300 {
            let after = walk(&defs, &generation(g));
            // Mid-walk: the listing before last, the last and the one being read.
            assert!(defs.len() <= 30, "{}", defs.len());
            let c = changes(&before, &after, &defs);
            assert_eq!(c.len(), 10);
            assert!(c.iter().all(|c| c.change == "compatible"), "{c:?}");
            defs.listed(0, &after);
            assert_eq!(defs.len(), 20);
            // Two listings (each description at most 3 digits longer than generation 0's).
            assert!(
                defs.bytes() <= 2 * (one_listing + 10 * 3),
                "{}",
                defs.bytes()
            );
            before = after;
        }
    }

    #[test]
    fn what_any_connection_lists_is_kept() {
        let defs = Definitions::for_target(256 << 10, 2);
        let other = tool("only_on_1", "1");
        defs.listed(1, &walk(&defs, std::slice::from_ref(&other)));
        for g in 0..5 {
            let l = walk(&defs, &[tool("x", &g.to_string())]);
            defs.listed(0, &l);
        }
        assert!(kept(&defs, &other));
        assert_eq!(defs.len(), 3, "connection 1's listing and 0's last two");
    }

    #[test]
    fn a_walk_in_flight_keeps_what_it_read_while_another_connection_lists() {
        let defs = Definitions::for_target(256 << 10, 2);
        let old = tool("t", "old");
        let l0 = walk(&defs, std::slice::from_ref(&old));
        defs.listed(0, &l0);
        defs.listed(1, &l0);
        // Connection 1 reads a new definition; connection 0 completes a walk meanwhile that
        // lists the old one still (another instance).
        let new = tool("t", "new");
        let l1 = walk(&defs, std::slice::from_ref(&new));
        defs.listed(0, &walk(&defs, std::slice::from_ref(&old)));
        assert!(kept(&defs, &new));
        // Connection 1 completes: its change is classified.
        let c = changes(&l0, &l1, &defs);
        assert_eq!(c[0].change, "compatible");
        defs.listed(1, &l1);
        assert!(kept(&defs, &new) && kept(&defs, &old));
    }

    #[test]
    fn what_no_walk_completes_is_forgotten_after_two_listings() {
        let defs = Definitions::for_target(256 << 10, 2);
        let listed = tool("t", "listed");
        let l = walk(&defs, std::slice::from_ref(&listed));
        defs.listed(0, &l);
        // A walk of connection 1 that fails: what it read is listed by nobody.
        let stray = tool("t", "read by a walk that failed");
        walk(&defs, std::slice::from_ref(&stray));
        defs.listed(0, &walk(&defs, std::slice::from_ref(&listed)));
        assert!(kept(&defs, &stray), "a walk may still be in flight");
        defs.listed(0, &walk(&defs, std::slice::from_ref(&listed)));
        assert!(!kept(&defs, &stray));
        assert_eq!(defs.len(), 1);
    }

    #[test]
    fn the_cap_never_forgets_a_current_listing() {
        let max_listing = 4096;
        let defs = Definitions::for_target(max_listing, 1);
        let current: Vec<Value> = (0..8).map(|i| tool(&format!("c{i}"), "current")).collect();
        let l = walk(&defs, &current);
        defs.listed(0, &l);
        // Walks that never complete, reading ever new definitions.
        for i in 0..500 {
            walk(&defs, &[tool(&format!("junk{i}"), &"x".repeat(100))]);
            assert!(defs.bytes() <= 2 * max_listing, "{}", defs.bytes());
        }
        assert!(current.iter().all(|t| kept(&defs, t)));
        // A current listing alone over the cap: what does not fit is not kept.
        let big: Vec<Value> = (0..40)
            .map(|i| tool(&format!("b{i}"), &"y".repeat(200)))
            .collect();
        let l = walk(&defs, &big);
        defs.listed(0, &l);
        assert!(defs.bytes() <= 2 * max_listing, "{}", defs.bytes());
        assert!(big.iter().any(|t| !kept(&defs, t)));
    }

    /// A walk of `list` reading `items` into `defs`, keyed as the walker keys that list.
    fn walk_list(defs: &Definitions, list: List, items: &[Value]) -> ItemSet {
        let mut set = ItemSet::new();
        for t in items {
            let fp = definition_fingerprint(t);
            defs.keep(fp, t);
            set.insert(t[list.key_field()].as_str().unwrap().into(), fp);
        }
        set
    }

    #[test]
    fn changes_in_other_lists_are_keyed_and_judged_by_their_own_rules() {
        let defs = Definitions::for_lists(256 << 10, 1, ListSet::ALL);
        let p =
            |name: &str, args: Value| json!({"name": name, "description": "d", "arguments": args});
        let before = walk_list(
            &defs,
            List::Prompts,
            &[
                p("summarize_legacy", json!([])),
                p("ask", json!([{"name": "q", "required": true}])),
            ],
        );
        let after = walk_list(
            &defs,
            List::Prompts,
            &[
                p("summarize_v2", json!([])),
                p(
                    "ask",
                    json!([{"name": "q", "required": true}, {"name": "lang", "required": true}]),
                ),
            ],
        );
        let c = changes_in(List::Prompts, &before, &after, &defs);
        let got: Vec<(&str, &str)> = c.iter().map(|c| (c.tool.as_str(), c.change)).collect();
        assert_eq!(
            got,
            [
                ("summarize_v2", "added"),
                ("summarize_legacy", "removed"),
                ("ask", "breaking")
            ]
        );
        assert_eq!(c[2].findings[0].rule, "required_argument_added");
        assert_eq!(c[2].findings[0].path, "$.arguments.lang");

        // A resource whose URI changes is a removal and an addition; its MIME type breaks.
        let r = |uri: &str, mime: &str| json!({"uri": uri, "name": "x", "mimeType": mime});
        let b = walk_list(
            &defs,
            List::Resources,
            &[r("kb://a", "text/plain"), r("kb://b", "text/plain")],
        );
        let a = walk_list(
            &defs,
            List::Resources,
            &[r("kb://a2", "text/plain"), r("kb://b", "text/html")],
        );
        let c = changes_in(List::Resources, &b, &a, &defs);
        let got: Vec<(&str, &str)> = c.iter().map(|c| (c.tool.as_str(), c.change)).collect();
        assert_eq!(
            got,
            [
                ("kb://a2", "added"),
                ("kb://a", "removed"),
                ("kb://b", "breaking")
            ]
        );
        // The tool entry point is the tool list's.
        assert_eq!(changes(&b, &b, &defs), vec![]);
    }

    #[test]
    fn each_list_of_a_connection_is_a_listing_of_its_own() {
        let defs = Definitions::for_target(256 << 10, 1);
        let t = tool("t", "1");
        defs.listed(0, &walk(&defs, std::slice::from_ref(&t)));
        // Prompt walks of the same connection, each with new definitions, many times over.
        for g in 0..5 {
            let prompt = json!({"name": "p", "description": g.to_string()});
            defs.listed_in(List::Prompts, 0, &walk(&defs, &[prompt]));
        }
        assert!(kept(&defs, &t), "the tool listing is still current");
        assert_eq!(
            defs.len(),
            3,
            "the tool, and the prompt listing and the one before"
        );
        assert_eq!(
            Definitions::for_lists(1000, 2, ListSet::ALL).cap,
            4 * Definitions::for_target(1000, 2).cap
        );
    }

    #[test]
    fn a_change_whose_definition_is_not_kept_is_unknown() {
        let defs = Definitions::for_target(256 << 10, 1);
        let before = walk(&defs, &[tool("t", "1")]);
        let after = {
            let mut s = ItemSet::new();
            s.insert("t".into(), definition_fingerprint(&tool("t", "2")));
            s
        };
        let c = changes(&before, &after, &defs);
        assert_eq!(c[0].change, "unknown");
        assert_eq!(c[0].findings[0].rule, "definition_not_kept");
    }
}
