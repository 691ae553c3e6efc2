//! Tool definition changes: what changed between two listings and whether old callers break
//! ([`classify`], with JSON [`paths`]), and what was approved ([`pins`]).
//!
//! A connection keeps fingerprints, not definitions (see [`super::toolset`]). To say *how* a
//! definition changed, both definitions are needed, so each target keeps one [`Definitions`]
//! store shared by its connections: keyed by fingerprint, so N connections seeing the same
//! listing store it once, not N times. The store is bounded in bytes (twice the target's
//! `max_listing_bytes`: the listing before a change and the one after fit together) and forgets
//! the definitions seen longest ago first; a change whose old or new definition is no longer
//! kept is classified `unknown` (rule `definition_not_kept`), never guessed.

pub mod classify;
pub mod paths;
pub mod pins;

use std::collections::HashMap;
use std::sync::Mutex;

use serde_json::Value;

use super::toolset::ToolSet;
pub use classify::{Class, Classification, Finding, classify};

/// The `change` label values of `mcp_probe_tool_changes_total`, in exposition order.
pub const CHANGE_KINDS: [&str; 5] = ["added", "removed", "breaking", "compatible", "unknown"];

/// What happened to one tool between two listings.
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

/// One tool's change, as the status page and `check` show it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ToolChange {
    /// Kept name (bounded and escaped when shown).
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

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// Every change from the listing `before` to `after`, classified with the definitions in
/// `defs`: added and removed by name, changed ones by [`classify`].
pub fn changes(before: &ToolSet, after: &ToolSet, defs: &Definitions) -> Vec<ToolChange> {
    let drift = ToolSet::diff(after, before);
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
            (Some(b), Some(a)) => classify(&b, &a),
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
        self.tool = crate::text::bounded(&self.tool, 160).into_owned();
        self
    }
}

/// A pinned tool's mismatch as a [`ToolChange`]: `removed` when it is no longer listed, else
/// its class against the pinned definition (`unknown` when the served one is not kept).
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

/// The definitions a target has seen, by fingerprint, bounded in bytes (see the module docs).
#[derive(Debug)]
pub struct Definitions {
    budget: usize,
    inner: Mutex<Store>,
}

#[derive(Debug, Default)]
struct Store {
    map: HashMap<u64, Kept>,
    bytes: usize,
    /// Bumped per [`Definitions::keep`]: the recency order for eviction.
    clock: u64,
}

#[derive(Debug)]
struct Kept {
    /// Compact JSON without `_meta` (what the fingerprint covers).
    json: Box<str>,
    seen: u64,
}

/// Bytes a kept definition costs beyond its JSON: the map slot and the allocation.
const ENTRY_OVERHEAD: usize = 48;

impl Definitions {
    /// A store of at most `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Definitions {
            budget,
            inner: Mutex::new(Store::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Remember `tool` under its `fingerprint` (already computed by the walker). A definition
    /// already kept is only marked as seen now; one larger than half the budget is not kept.
    pub fn keep(&self, fingerprint: u64, tool: &Value) {
        let mut s = self.lock();
        s.clock += 1;
        let clock = s.clock;
        if let Some(k) = s.map.get_mut(&fingerprint) {
            k.seen = clock;
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
        if cost > self.budget / 2 {
            return;
        }
        s.bytes += cost;
        s.map.insert(
            fingerprint,
            Kept {
                json: json.into_boxed_str(),
                seen: clock,
            },
        );
        if s.bytes > self.budget {
            // Forget the least recently seen down to 3/4 of the budget, in one pass.
            let mut order: Vec<(u64, u64, usize)> = s
                .map
                .iter()
                .map(|(fp, k)| (k.seen, *fp, k.json.len() + ENTRY_OVERHEAD))
                .collect();
            order.sort_unstable();
            let target = self.budget / 4 * 3;
            for (_, fp, cost) in order {
                if s.bytes <= target {
                    break;
                }
                s.map.remove(&fp);
                s.bytes -= cost;
            }
        }
    }

    /// The definition kept under `fingerprint`.
    pub fn get(&self, fingerprint: u64) -> Option<Value> {
        let s = self.lock();
        s.map
            .get(&fingerprint)
            .and_then(|k| serde_json::from_str(&k.json).ok())
    }

    /// Bytes held now (JSON plus per-entry overhead); at most the budget.
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
