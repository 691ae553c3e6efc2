//! The catalog's other lists: the upstream's prompts, resources and resource templates, walked in
//! the catalog session after its tools, so that `prompts/get` and `resources/read` can be judged
//! as `tools/call` is (see [`super::upstream_tools`], which owns the walk's schedule and its
//! waiting rules).
//!
//! It exists apart from the tool catalog because what is kept differs: for these lists only the
//! keys matter (no schema to compare arguments with), plus each resource template's literal
//! prefix. Each list is walked with the probe's [`walker`] and the catalog's own limits (pages,
//! bytes), one [`ListPager`] for every list, only when the upstream declares the list's
//! capability.
//!
//! **The verdict.** A use is stale when the item was *produced by the upstream's lists in the last
//! 24 h* and is not produced by its current lists: a prompt name listed before and not now; a
//! resource URI listed before (or readable through a template listed before) that is neither
//! listed now nor readable through a template listed now. A name or URI the upstream never
//! produced while the proxy watched is not judged: `resources/read` may name any URI a client
//! knows by other means (the lists are not exhaustive), so an unknown URI is no evidence of a
//! stale cache. The tool list keeps its own, older rule (any name absent from the current list).
//!
//! **The template rule.** A template produces a URI when the URI starts with the template's
//! literal prefix: its text before the first `{` (the lab's `readable()` is the same rule). It is
//! deliberately loose (it ignores what the expressions may expand to), so it errs towards "not
//! stale". A template whose prefix is empty (`{+path}`) produces every URI: while one is listed,
//! no read is judged stale.
//!
//! Bounded: the current keys are the walk's [`ItemSet`] (capped by the walker's items and bytes);
//! what was produced in the last 24 h is kept as 64-bit digests (at most [`MAX_REMEMBERED`] per
//! list) and template prefixes (at most [`MAX_PREFIXES`], each cut to [`MAX_PREFIX_BYTES`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use mcp_client::listing::items::{ItemSet, kept_name};
use mcp_client::listing::list::List;
use mcp_client::listing::walker::{self, Pager};
use mcp_client::mcp::{Client, McpError, jsonrpc};

use super::observe::cursor_digest;

/// The lists the catalog walks besides tools, in walk order.
pub const OTHER_LISTS: [List; 3] = [List::Prompts, List::Resources, List::ResourceTemplates];

/// How long an item the upstream produced stays evidence that a use of it is a stale cache.
const REMEMBERED_TTL: Duration = Duration::from_secs(24 * 3600);
/// Most item digests remembered per list (past it new ones are not remembered, so their later
/// uses are not judged: the safe side).
pub const MAX_REMEMBERED: usize = 4096;
/// Most template prefixes kept (current and remembered alike).
pub const MAX_PREFIXES: usize = 256;
/// Longest template prefix kept; a longer one is cut, which only makes it match more URIs.
pub const MAX_PREFIX_BYTES: usize = 1024;

/// The literal prefix of a URI template: its text before the first `{`, cut to
/// [`MAX_PREFIX_BYTES`] (at a character boundary).
pub fn template_prefix(uri_template: &str) -> &str {
    let literal = uri_template.split('{').next().unwrap_or_default();
    let mut end = literal.len().min(MAX_PREFIX_BYTES);
    while !literal.is_char_boundary(end) {
        end -= 1;
    }
    &literal[..end]
}

/// One list as the last complete walk left it.
#[derive(Debug, Default)]
struct Current {
    items: ItemSet,
    /// Resource templates only: each template's literal prefix.
    prefixes: Vec<Box<str>>,
}

/// What the catalog knows of the other lists.
#[derive(Debug, Default)]
pub struct Lists {
    /// The last complete walk of each list the upstream declares (absent: not declared, or its
    /// last walk failed: no verdict).
    current: HashMap<List, Current>,
    /// Digests of the keys listed in the last 24 h, by list, and when last.
    remembered: HashMap<List, HashMap<u64, Instant>>,
    /// Template prefixes listed in the last 24 h, and when last.
    remembered_prefixes: HashMap<Box<str>, Instant>,
}

/// One list's walk in the catalog session: its items, and the templates' prefixes.
pub struct Walked {
    list: List,
    /// `None`: the walk failed (its verdicts are off until a walk completes).
    items: Option<Current>,
}

impl Lists {
    /// Items of `list` in the last complete walk, if there is one.
    pub fn len(&self, list: List) -> Option<usize> {
        self.current.get(&list).map(|c| c.items.len())
    }

    /// Every list with a complete walk, and its items.
    pub fn counts(&self) -> Vec<(List, usize)> {
        OTHER_LISTS
            .into_iter()
            .filter_map(|l| self.len(l).map(|n| (l, n)))
            .collect()
    }

    /// Apply the walks of one catalog walk (`now`: when it started); a list not walked (no
    /// longer declared) is forgotten, one whose walk failed loses its current view.
    pub fn apply(&mut self, walked: Vec<Walked>, now: Instant) {
        self.current.clear();
        for w in walked {
            let Some(current) = w.items else { continue };
            let remembered = self.remembered.entry(w.list).or_default();
            remembered.retain(|_, t| now.duration_since(*t) < REMEMBERED_TTL);
            for key in current.items.names() {
                let d = cursor_digest(key);
                if remembered.len() < MAX_REMEMBERED || remembered.contains_key(&d) {
                    remembered.insert(d, now);
                }
            }
            self.remembered_prefixes
                .retain(|_, t| now.duration_since(*t) < REMEMBERED_TTL);
            for p in &current.prefixes {
                if self.remembered_prefixes.len() < MAX_PREFIXES
                    || self.remembered_prefixes.contains_key(p)
                {
                    self.remembered_prefixes.insert(p.clone(), now);
                }
            }
            self.current.insert(w.list, current);
        }
    }

    /// Whether the current lists produce `key` (a prompt name, a resource URI): `None` when
    /// the lists it depends on have no complete walk.
    pub fn produces(&self, list: List, key: &str) -> Option<bool> {
        let kept = kept_name(key).0;
        match list {
            List::Resources => {
                let listed = self.current.get(&List::Resources)?.items.contains(&kept);
                let templates = self.current.get(&List::ResourceTemplates)?;
                Some(listed || templates.prefixes.iter().any(|p| key.starts_with(&**p)))
            }
            _ => Some(self.current.get(&list)?.items.contains(&kept)),
        }
    }

    /// Whether the upstream's lists produced `key` in the last 24 h (as far as remembered).
    pub fn produced_before(&self, list: List, key: &str, now: Instant) -> bool {
        let fresh = |t: &Instant| now.saturating_duration_since(*t) < REMEMBERED_TTL;
        let listed = self
            .remembered
            .get(&list)
            .and_then(|r| r.get(&cursor_digest(&kept_name(key).0)))
            .is_some_and(fresh);
        listed
            || (list == List::Resources
                && self
                    .remembered_prefixes
                    .iter()
                    .any(|(p, t)| fresh(t) && key.starts_with(&**p)))
    }

    /// A digest of the keys of a client's page of `list` that the last walk lacks (`None`: it
    /// lacks none, or there is no walk of the list to compare with).
    pub fn unknown_keys(&self, list: List, items: &[Value]) -> Option<u64> {
        let current = self.current.get(&list)?;
        items
            .iter()
            .filter_map(|i| i.get(list.key_field()).and_then(Value::as_str))
            .map(|k| kept_name(k).0)
            .filter(|k| !current.items.contains(k))
            .fold(None, |d: Option<u64>, k| {
                Some(d.unwrap_or(list as u64) ^ cursor_digest(&k).rotate_left(3))
            })
    }

    /// The verdict on a use of `key` from `list`: `Some(true)` stale (produced before, not now),
    /// `Some(false)` fine, `None` no verdict (no complete walk of what it depends on).
    pub fn stale(&self, list: List, key: &str, now: Instant) -> Option<bool> {
        let now_produced = self.produces(list, key)?;
        Some(!now_produced && self.produced_before(list, key, now))
    }
}

/// Walk every other list `client`'s server declares, with `limits`; a templates walk the
/// server refuses as an unknown method is an empty list (resources without templates).
pub async fn walk(
    client: &Arc<Client>,
    limits: walker::WalkLimits,
    timeout: Duration,
) -> Vec<Walked> {
    let mut walked = Vec::new();
    for list in OTHER_LISTS {
        if client.info().declares(list).is_none() {
            continue;
        }
        let mut pager = ListPager {
            client: client.clone(),
            list,
            prefixes: Vec::new(),
            timeout,
        };
        let report = walker::walk(&mut pager, limits).await;
        let items = match report.result {
            Ok(w) => Some(Current {
                items: w.items,
                prefixes: pager.prefixes,
            }),
            Err(e)
                if list == List::ResourceTemplates
                    && !e.is_cursor_error()
                    && e.mcp_error()
                        .is_some_and(|m| m.rpc_code == Some(jsonrpc::METHOD_NOT_FOUND)) =>
            {
                Some(Current::default())
            }
            Err(e) => {
                tracing::debug!(list = %list, error = %e, "proxy catalog: a list walk failed; its verdicts are off until one completes");
                None
            }
        };
        walked.push(Walked { list, items });
    }
    walked
}

/// Pages of one list for the walker, in the catalog session; keeps each template's prefix.
struct ListPager {
    client: Arc<Client>,
    list: List,
    prefixes: Vec<Box<str>>,
    /// Each page's (the catalog's request timeout).
    timeout: Duration,
}

impl Pager for ListPager {
    fn list(&self) -> List {
        self.list
    }

    fn definition(&mut self, _fingerprint: u64, item: &Value) {
        if self.list != List::ResourceTemplates || self.prefixes.len() >= MAX_PREFIXES {
            return;
        }
        if let Some(t) = item.get("uriTemplate").and_then(Value::as_str) {
            self.prefixes.push(template_prefix(t).into());
        }
    }

    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let method = self.list.method();
        tokio::time::timeout(
            self.timeout,
            self.client.list_page(self.list, cursor, max_bytes),
        )
        .await
        .map_err(|_| {
            McpError::new(
                mcp_client::mcp::Reason::Timeout,
                format!("{method} timed out"),
            )
        })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(keys: &[&str]) -> ItemSet {
        let mut s = ItemSet::new();
        for k in keys {
            s.insert(kept_name(k).0, 1);
        }
        s
    }

    fn walked(list: List, keys: &[&str], templates: &[&str]) -> Walked {
        Walked {
            list,
            items: Some(Current {
                items: set(keys),
                prefixes: templates
                    .iter()
                    .map(|t| template_prefix(t).into())
                    .collect(),
            }),
        }
    }

    #[test]
    fn a_use_is_stale_when_produced_before_and_not_now_and_templates_produce_by_prefix() {
        let mut l = Lists::default();
        let t0 = Instant::now();
        assert_eq!(l.stale(List::Prompts, "p", t0), None, "no walk yet");
        l.apply(
            vec![
                walked(List::Prompts, &["summarize_legacy", "digest"], &[]),
                walked(List::Resources, &["kb://collections/legacy-index"], &[]),
                walked(
                    List::ResourceTemplates,
                    &["kb://search/legacy{?q}", "kb://documents/{id}"],
                    &["kb://search/legacy{?q}", "kb://documents/{id}"],
                ),
            ],
            t0,
        );
        let (p, r) = (List::Prompts, List::Resources);
        assert_eq!(l.stale(p, "summarize_legacy", t0), Some(false));
        assert_eq!(l.stale(r, "kb://search/legacy?q=x", t0), Some(false));
        // The redeploy retires one item of each list.
        l.apply(
            vec![
                walked(p, &["summarize_v2", "digest"], &[]),
                walked(r, &["kb://collections/index-v1"], &[]),
                walked(
                    List::ResourceTemplates,
                    &["kb://search/v1{?q}", "kb://documents/{id}"],
                    &["kb://search/v1{?q}", "kb://documents/{id}"],
                ),
            ],
            t0,
        );
        assert_eq!(l.stale(p, "summarize_legacy", t0), Some(true));
        assert_eq!(
            l.stale(p, "never_listed", t0),
            Some(false),
            "never produced"
        );
        assert_eq!(l.stale(r, "kb://collections/legacy-index", t0), Some(true));
        assert_eq!(
            l.stale(r, "kb://search/legacy?q=x", t0),
            Some(true),
            "its template retired"
        );
        assert_eq!(l.stale(r, "kb://documents/42", t0), Some(false));
        assert_eq!(l.stale(r, "file:///etc/hosts", t0), Some(false));
        // A day later the retired items are no evidence any more.
        let later = t0 + REMEMBERED_TTL + Duration::from_secs(1);
        assert_eq!(l.stale(p, "summarize_legacy", later), Some(false));
        // A template with an empty prefix produces everything.
        l.apply(
            vec![
                walked(p, &[], &[]),
                walked(r, &[], &[]),
                walked(List::ResourceTemplates, &["{+path}"], &["{+path}"]),
            ],
            t0,
        );
        assert_eq!(l.stale(r, "kb://collections/legacy-index", t0), Some(false));
        // A failed or missing templates walk: resources get no verdict.
        l.apply(vec![walked(r, &[], &[])], t0);
        assert_eq!(l.stale(r, "kb://collections/legacy-index", t0), None);
        assert_eq!(l.stale(p, "summarize_legacy", t0), None, "not declared");
    }

    #[test]
    fn what_is_remembered_is_bounded() {
        let mut l = Lists::default();
        let t0 = Instant::now();
        let keys: Vec<String> = (0..MAX_REMEMBERED + 100).map(|i| format!("p{i}")).collect();
        let refs: Vec<&str> = keys.iter().map(String::as_str).collect();
        let templates: Vec<String> = (0..MAX_PREFIXES + 10)
            .map(|i| format!("kb://t{i}/{{x}}"))
            .collect();
        let trefs: Vec<&str> = templates.iter().map(String::as_str).collect();
        l.apply(
            vec![
                walked(List::Prompts, &refs, &[]),
                walked(List::ResourceTemplates, &trefs, &trefs),
            ],
            t0,
        );
        assert!(l.remembered[&List::Prompts].len() <= MAX_REMEMBERED);
        assert!(l.remembered_prefixes.len() <= MAX_PREFIXES);
        let long = format!("kb://{}{{x}}", "é".repeat(MAX_PREFIX_BYTES));
        assert!(template_prefix(&long).len() <= MAX_PREFIX_BYTES);
        assert_eq!(template_prefix("kb://documents/{id}"), "kb://documents/");
    }
}
