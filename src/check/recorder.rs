//! Recording walks of any list and comparing them.
//!
//! The walk itself is the exporter's own [`walker`]; the [`Recorder`] only keeps, per page, the
//! (key, fingerprint) pairs served, bounded, so that rows can name duplicates, invalid names
//! and what changed between two walks. The list is a value: tools, prompts, resources and
//! resource templates are recorded, compared and worded by the same code, keyed by the list's
//! key field. The wording of those rows lives here too, so every row that quotes names quotes
//! them the same bounded way.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::Value;

use super::{Checker, Status, WalkSummary};
use crate::config::valid_tool_name;
use mcp_client::listing::changes::{self, Definitions, ItemChange};
use mcp_client::listing::items::{ItemSet, definition_fingerprint, kept_name};
use mcp_client::listing::list::List;
use mcp_client::listing::walker::{self, Pager, WalkError, WalkReport};
use mcp_client::mcp::{Client, McpError, truncate};

/// At most this many names are quoted in one row; the rest are counted.
const MAX_NAMES_SHOWN: usize = 10;

impl Checker<'_> {
    /// One walk of `tools/list`, recorded and summarised in the report as `which`.
    pub(super) async fn walk(&mut self, which: &'static str) -> Recorded {
        let recorded = self.walk_list(List::Tools).await;
        self.report.walks.push(recorded.summary(which));
        recorded
    }

    /// One walk of `list`, recorded (the caller summarises it where its list is reported).
    pub(super) async fn walk_list(&mut self, list: List) -> Recorded {
        let mut pager = Recorder {
            list,
            session: self.session,
            definitions: &self.definitions,
            pages: Vec::new(),
            kept: 0,
        };
        let limits = walker::WalkLimits {
            max_pages: self.opts.max_pages,
            max_bytes: self.opts.max_listing_bytes,
        };
        let report = walker::walk(&mut pager, limits).await;
        Recorded {
            list,
            report,
            pages: pager.pages,
        }
    }
}

/// A pager that lets the walker drive the session and keeps, per page, what was served.
struct Recorder<'a> {
    list: List,
    session: &'a Client,
    /// Where each listed definition is kept, to classify changes between walks.
    definitions: &'a Definitions,
    pages: Vec<Page>,
    /// Entries kept so far over all pages, at most [`MAX_KEPT`].
    kept: usize,
}

/// At most this many (name, fingerprint) entries are kept per walk, duplicates included: the
/// walker bounds distinct tools, this bounds a server that repeats one name a million times.
const MAX_KEPT: usize = 2 * walker::MAX_ITEMS_PER_WALK;

/// What one page served.
struct Page {
    /// Keyed items on the page.
    served: usize,
    /// (key, fingerprint) of each, in the order served, while under [`MAX_KEPT`].
    tools: Vec<(String, u64)>,
}

impl Pager for Recorder<'_> {
    fn list(&self) -> List {
        self.list
    }

    fn drops_invalid_header_annotations(&self) -> bool {
        self.session.era() == mcp_client::mcp::Era::Modern
    }

    fn definition(&mut self, fingerprint: u64, tool: &Value) {
        self.definitions.keep(fingerprint, tool);
    }

    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let (page, bytes) = self.session.list_page(self.list, cursor, max_bytes).await?;
        let key = self.list.key_field();
        let named = page
            .get(self.list.result_key())
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| Some((t.get(key)?.as_str()?, t)));
        let mut served = 0;
        let mut tools = Vec::new();
        for (name, t) in named {
            served += 1;
            if self.kept < MAX_KEPT {
                self.kept += 1;
                tools.push((kept_name(name).0.into(), definition_fingerprint(t)));
            }
        }
        self.pages.push(Page { served, tools });
        Ok((page, bytes))
    }
}

/// A walk and what each page served.
pub(super) struct Recorded {
    pub(super) list: List,
    pub(super) report: WalkReport,
    pages: Vec<Page>,
}

impl Recorded {
    fn served(&self) -> impl Iterator<Item = &(String, u64)> {
        self.pages.iter().flat_map(|p| &p.tools)
    }

    pub(super) fn summary(&self, which: &'static str) -> WalkSummary {
        WalkSummary {
            walk: which,
            pages: self.pages.iter().map(|p| p.served as u32).collect(),
            tools: self.items() as u32,
            complete: self.report.result.is_ok(),
        }
    }

    /// Distinct items (a complete walk) or items served before the walk stopped.
    pub(super) fn items(&self) -> usize {
        match &self.report.result {
            Ok(w) => w.items.len(),
            Err(_) => self.pages.iter().map(|p| p.served).sum(),
        }
    }

    /// Items served on each page.
    pub(super) fn page_sizes(&self) -> Vec<u32> {
        self.pages.iter().map(|p| p.served as u32).collect()
    }

    fn page_counts(&self) -> String {
        let counts: Vec<String> = self.pages.iter().map(|p| p.served.to_string()).collect();
        if counts.len() > 16 {
            format!("{} + … ({} pages)", counts[..16].join(" + "), counts.len())
        } else {
            counts.join(" + ")
        }
    }

    pub(super) fn verdict(&self, max_pages: u32) -> (Status, String) {
        let n = self.report.requests;
        let (one, many) = nouns(self.list);
        match &self.report.result {
            Ok(w) => (
                Status::Pass,
                format!(
                    "{} page(s) ({}), {} {many}; cursors followed to the end",
                    w.pages,
                    self.page_counts(),
                    w.items.len()
                ),
            ),
            Err(WalkError::RepeatedCursor) => (
                Status::Fail,
                format!(
                    "repeated cursor: page {n} returned a nextCursor this walk had already \
                     followed; a client without a guard loops forever (F9)"
                ),
            ),
            Err(WalkError::LoopCap) => (
                Status::Fail,
                format!(
                    "loop cap: still a nextCursor after {max_pages} pages (--max-pages); the \
                     cursors never end (F10)"
                ),
            ),
            Err(WalkError::Request {
                error,
                with_cursor: true,
            }) => (
                Status::Fail,
                format!(
                    "cursor error on page {n}: {error}; the server rejected a cursor it issued, \
                     so a client cannot see every {one} (F8)"
                ),
            ),
            Err(e) => (Status::Fail, e.to_string()),
        }
    }

    pub(super) fn distinct_names(&self) -> usize {
        let names: HashSet<&str> = self.served().map(|(n, _)| n.as_str()).collect();
        names.len()
    }

    pub(super) fn duplicate_names(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        let dups = self
            .served()
            .filter(|(name, _)| !seen.insert(name.as_str()));
        first_of_each(dups.map(|(name, _)| name.as_str()))
    }

    pub(super) fn invalid_names(&self) -> Vec<String> {
        let bad = self.served().filter(|(name, _)| !valid_tool_name(name));
        first_of_each(bad.map(|(name, _)| name.as_str()))
    }
}

/// Each distinct name once, in the order first seen.
fn first_of_each<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .filter(|n| seen.insert(*n))
        .map(str::to_string)
        .collect()
}

/// "tool" and "tools", "resource template" and "resource templates": how rows name a list's
/// items.
pub(super) fn nouns(list: List) -> (&'static str, &'static str) {
    match list {
        List::Tools => ("tool", "tools"),
        List::Prompts => ("prompt", "prompts"),
        List::Resources => ("resource", "resources"),
        List::ResourceTemplates => ("resource template", "resource templates"),
    }
}

/// The second walk against the first: same names in the same order with the same definitions.
pub(super) fn compare(
    first: &Recorded,
    second: &Recorded,
    notified: bool,
    definitions: &Definitions,
) -> (Status, String) {
    let a: Vec<&(String, u64)> = first.served().collect();
    let b: Vec<&(String, u64)> = second.served().collect();
    let (Ok(w1), Ok(w2)) = (&first.report.result, &second.report.result) else {
        unreachable!("compared walks are complete")
    };
    let list = first.list;
    let (_, many) = nouns(list);
    if a == b {
        return (
            Status::Pass,
            format!(
                "second walk: the same {} {many} in the same order with the same definitions",
                w1.items.len()
            ),
        );
    }
    let drift = ItemSet::diff(&w2.items, &w1.items);
    if drift.is_empty() {
        let at = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(0);
        let name = |s: &[&(String, u64)]| {
            s.get(at)
                .map(|(n, _)| format!("{:?}", truncate(n, 64)))
                .unwrap_or_else(|| "nothing".into())
        };
        return (
            Status::Warn,
            format!(
                "same {many} and definitions, another order (position {}: {} then {}); clients \
                 that compare lists or cache by position see a change that is not one",
                at + 1,
                name(&a),
                name(&b)
            ),
        );
    }
    if notified {
        (
            Status::Info,
            format!(
                "the list changed between the walks, and list_changed was received: {}",
                classified_in(list, &w1.items, &w2.items, definitions)
            ),
        )
    } else {
        (
            Status::Fail,
            format!(
                "two walks a moment apart differ and no list_changed arrived: {}; a client's \
                 cache is stale as soon as it is filled",
                classified_in(list, &w1.items, &w2.items, definitions)
            ),
        )
    }
}

/// What changed from `before` to `after`, each changed definition with its class and the first
/// paths that changed: "added a; removed b; changed c (breaking: required_added at
/// $.inputSchema.required)".
pub(super) fn classified(before: &ItemSet, after: &ItemSet, definitions: &Definitions) -> String {
    classified_in(List::Tools, before, after, definitions)
}

/// [`classified`] for the items of `list`, keyed by its key field.
pub(super) fn classified_in(
    list: List,
    before: &ItemSet,
    after: &ItemSet,
    definitions: &Definitions,
) -> String {
    let all = changes::changes_in(list, before, after, definitions);
    if all.is_empty() {
        return "no change".into();
    }
    let mut parts = Vec::new();
    for what in ["added", "removed"] {
        let list: Vec<String> = all
            .iter()
            .filter(|c| c.change == what)
            .map(|c| c.tool.clone())
            .collect();
        if !list.is_empty() {
            parts.push(format!("{what} {}", names(&list)));
        }
    }
    let changed: Vec<&ItemChange> = all
        .iter()
        .filter(|c| !matches!(c.change, "added" | "removed"))
        .collect();
    if !changed.is_empty() {
        let shown: Vec<String> = changed
            .iter()
            .take(MAX_NAMES_SHOWN)
            .map(|c| one_change(c))
            .collect();
        let mut text = format!("changed {}", shown.join(", "));
        if changed.len() > MAX_NAMES_SHOWN {
            text.push_str(&format!(", and {} more", changed.len() - MAX_NAMES_SHOWN));
        }
        parts.push(text);
    }
    parts.join("; ")
}

/// "search (breaking: required_added at $.inputSchema.required, +2 more)".
pub(super) fn one_change(c: &ItemChange) -> String {
    let name = names(std::slice::from_ref(&c.tool));
    let mut rules: Vec<String> = c
        .findings
        .iter()
        .filter(|f| f.class.as_str() == c.change)
        .take(2)
        .map(|f| format!("{} at {}", f.rule, f.path))
        .collect();
    let rest = c.findings.len() + c.more - rules.len();
    if rest > 0 {
        rules.push(format!("+{rest} more"));
    }
    format!("{name} ({}: {})", c.change, rules.join(", "))
}

/// Up to [`MAX_NAMES_SHOWN`] names, quoted when they are not plain, then a count of the rest.
pub(super) fn names(list: &[String]) -> String {
    let mut shown: Vec<String> = list
        .iter()
        .take(MAX_NAMES_SHOWN)
        .map(|n| {
            if valid_tool_name(n) {
                n.clone()
            } else {
                format!("{:?}", truncate(n, 64))
            }
        })
        .collect();
    if list.len() > MAX_NAMES_SHOWN {
        shown.push(format!("and {} more", list.len() - MAX_NAMES_SHOWN));
    }
    shown.join(", ")
}

/// "2.3 ms" below a second, "29.2 s" above.
pub(super) fn elapsed(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_client::listing::walker::Walk;

    fn recorded(pages: &[&[(&str, u64)]], complete: bool) -> Recorded {
        let pages: Vec<Vec<(String, u64)>> = pages
            .iter()
            .map(|p| p.iter().map(|(n, f)| (n.to_string(), *f)).collect())
            .collect();
        let mut tools = ItemSet::new();
        let mut duplicates = 0;
        for (n, f) in pages.iter().flatten() {
            if !tools.insert(n.as_str().into(), *f) {
                duplicates += 1;
            }
        }
        let result = if complete {
            Ok(Walk {
                items: tools,
                pages: pages.len() as u32,
                cache: None,
                param_headers: Default::default(),
            })
        } else {
            Err(WalkError::RepeatedCursor)
        };
        Recorded {
            list: List::Tools,
            report: WalkReport {
                result,
                requests: pages.len() as u32,
                answered: pages.len() as u32,
                duplicates,
                long_names: 0,
                rejected: 0,
                bytes: 0,
            },
            pages: pages
                .into_iter()
                .map(|tools| Page {
                    served: tools.len(),
                    tools,
                })
                .collect(),
        }
    }

    #[test]
    fn identical_walks_pass_and_order_changes_warn() {
        let a = recorded(&[&[("a", 1), ("b", 2)], &[("c", 3)]], true);
        let same = recorded(&[&[("a", 1)], &[("b", 2), ("c", 3)]], true);
        assert_eq!(
            compare(&a, &same, false, &Definitions::new(1 << 20)).0,
            Status::Pass
        );
        let swapped = recorded(&[&[("b", 2), ("a", 1)], &[("c", 3)]], true);
        let (s, d) = compare(&a, &swapped, false, &Definitions::new(1 << 20));
        assert_eq!(s, Status::Warn);
        assert!(d.contains("position 1: \"a\" then \"b\""), "{d}");
    }

    #[test]
    fn changed_walks_fail_unless_announced() {
        let a = recorded(&[&[("a", 1), ("b", 2)]], true);
        let b = recorded(&[&[("a", 9), ("c", 3)]], true);
        let (s, d) = compare(&a, &b, false, &Definitions::new(1 << 20));
        assert_eq!(s, Status::Fail);
        assert!(d.contains("added c; removed b; changed a"), "{d}");
        assert_eq!(
            compare(&a, &b, true, &Definitions::new(1 << 20)).0,
            Status::Info
        );
    }

    #[test]
    fn duplicates_and_invalid_names_are_named_once() {
        let r = recorded(
            &[&[("a", 1), ("bad name", 2)], &[("a", 1), ("bad name", 2)]],
            false,
        );
        assert_eq!(r.duplicate_names(), vec!["a", "bad name"]);
        assert_eq!(r.invalid_names(), vec!["bad name"]);
        assert_eq!(
            r.summary("first"),
            WalkSummary {
                walk: "first",
                pages: vec![2, 2],
                tools: 4,
                complete: false
            }
        );
        let many: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
        assert!(names(&many).ends_with("t9, and 2 more"));
    }
}
