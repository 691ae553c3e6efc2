//! The cursor walk: a list (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`; see [`List`]) page by page, as a correct client must, with the
//! guards a careless one lacks. One walk for every list: only the result's array and the field
//! that keys an item differ, and the tool list's own rules (the 128-character name limit, the
//! read-only hint, `x-mcp-header` annotations) apply to tools alone.
//!
//! - follows `nextCursor` until it is absent (an empty string is a cursor, not the end);
//! - stops at `max_pages` (F10) and on a cursor seen before in this walk (F9);
//! - counts keys that appear twice (F11) and keeps the first definition;
//! - an error on a request that carried a cursor is a cursor error (F8);
//! - holds the whole listing to a byte budget (`max_listing_bytes`): each page is asked for with
//!   what is left of it, so an oversized page is refused before it is parsed, and what one walk
//!   reads and keeps is bounded by bytes, not only by pages (each tool is charged at least what
//!   a connection keeps of it);
//! - keeps keys over 128 characters shortened (see [`kept_name`]), and counts the tool names
//!   among them (the spec's limit is the tools').
//!
//! The walker knows nothing about HTTP: it drives a [`Pager`], which is how the property tests
//! feed it arbitrary page sequences.

use std::collections::HashSet;

use serde_json::Value;

use super::items::{BYTES_PER_ITEM, ItemSet, definition_fingerprint, kept_name, read_only_hinted};
use super::list::List;
use crate::mcp::http::MAX_BODY_BYTES;
use crate::mcp::modern::CacheHint;
use crate::mcp::param_headers::{self, HeaderParam};
use crate::mcp::{McpError, Reason};

/// Hard cap on items in one walk, whatever `max_pages` allows: bounds memory per connection.
pub const MAX_ITEMS_PER_WALK: usize = 10_000;
/// Hard cap on the length of a cursor kept for the repeat check.
const MAX_CURSOR_BYTES: usize = 4096;

/// Fetches one page of a list.
pub trait Pager {
    /// The list it pages (tools unless said otherwise).
    fn list(&self) -> List {
        List::Tools
    }

    /// The page at `cursor`, and the bytes its answer took. An answer over `max_bytes` (what is
    /// left of the walk's listing budget) must fail with [`Reason::BodyTooLarge`] without being
    /// read whole.
    fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> impl Future<Output = Result<(Value, usize), McpError>> + Send;

    /// Whether tools with invalid `x-mcp-header` annotations are dropped from the listing, as a
    /// 2026-07-28 Streamable HTTP client must (see [`crate::mcp::param_headers`]).
    fn drops_invalid_header_annotations(&self) -> bool {
        false
    }

    /// Sees each listed item's definition with its fingerprint, before the page is dropped:
    /// where a caller keeps definitions (see [`super::changes::Definitions`]). Nothing by default.
    fn definition(&mut self, _fingerprint: u64, _tool: &Value) {}
}

/// How far one walk may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalkLimits {
    /// Most pages (`max_pages`).
    pub max_pages: u32,
    /// Most bytes of the list's answers across all pages (`max_listing_bytes`).
    pub max_bytes: usize,
}

/// A complete walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Walk {
    pub items: ItemSet,
    pub pages: u32,
    /// What the pages promised about caching (2026-07-28): the shortest `ttlMs` of any page and
    /// the scope. `None` when no page carried cache fields (legacy servers).
    pub cache: Option<ListingCache>,
    /// The `x-mcp-header` parameters of the tools that have some (modern Streamable HTTP only):
    /// what a call of such a tool must mirror into `Mcp-Param-*` headers.
    pub param_headers: ParamHeaders,
}

/// Annotated parameters by tool name.
pub type ParamHeaders = std::collections::BTreeMap<Box<str>, Box<[HeaderParam]>>;

/// The cache promise of a whole listing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ListingCache {
    /// The shortest promise: the listing as a whole is fresh no longer than its freshest page.
    pub hint: CacheHint,
    /// Pages disagreed on `cacheScope`, which the spec forbids ("All pages of one list MUST share
    /// the same cacheScope"); the scope is then the stricter, private.
    pub mixed_scope: bool,
}

impl ListingCache {
    fn add(this: Option<ListingCache>, page: CacheHint) -> ListingCache {
        match this {
            None => ListingCache {
                hint: page,
                mixed_scope: false,
            },
            Some(c) => ListingCache {
                hint: CacheHint {
                    ttl: c.hint.ttl.min(page.ttl),
                    public: c.hint.public && page.public,
                },
                mixed_scope: c.mixed_scope || c.hint.public != page.public,
            },
        }
    }
}

/// Why a walk did not complete.
#[derive(Debug, Clone, PartialEq)]
pub enum WalkError {
    /// A request failed (on the first page, or a cursor error on a later one).
    Request { error: McpError, with_cursor: bool },
    /// The server returned a cursor it had returned before in this walk.
    RepeatedCursor,
    /// `max_pages` pages and still a `nextCursor`.
    LoopCap,
    /// More than [`MAX_ITEMS_PER_WALK`] items of `list`.
    TooManyItems { list: List },
    /// The pages together are over `max_listing_bytes` (the page that crossed it was not read
    /// whole).
    ListingTooLarge { max_bytes: usize },
}

impl WalkError {
    /// The `reason` label of walk-failure counters.
    pub fn reason(&self) -> &'static str {
        match self {
            WalkError::Request { error, .. } => error.reason.as_str(),
            WalkError::RepeatedCursor => "repeated_cursor",
            WalkError::LoopCap => "loop_cap",
            // The tool list's value since before the other lists were walked.
            WalkError::TooManyItems { list: List::Tools } => "too_many_tools",
            WalkError::TooManyItems { .. } => "too_many_items",
            WalkError::ListingTooLarge { .. } => "listing_too_large",
        }
    }

    /// Whether this is an error on a request carrying a cursor.
    pub fn is_cursor_error(&self) -> bool {
        matches!(
            self,
            WalkError::Request {
                with_cursor: true,
                ..
            }
        )
    }

    /// The wire error, if the walk ended on one.
    pub fn mcp_error(&self) -> Option<&McpError> {
        match self {
            WalkError::Request { error, .. } => Some(error),
            _ => None,
        }
    }
}

impl std::fmt::Display for WalkError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WalkError::Request { error, with_cursor } => {
                let page = if *with_cursor {
                    "a cursor page"
                } else {
                    "the first page"
                };
                write!(f, "listing failed on {page}: {error}")
            }
            WalkError::RepeatedCursor => f.write_str("server repeated a cursor; walk aborted"),
            WalkError::LoopCap => {
                f.write_str("max_pages reached and the server still sent nextCursor")
            }
            WalkError::TooManyItems { list } => {
                write!(
                    f,
                    "more than {MAX_ITEMS_PER_WALK} items in {}",
                    list.method()
                )
            }
            WalkError::ListingTooLarge { max_bytes } => write!(
                f,
                "the listing is over max_listing_bytes ({max_bytes} bytes across its pages)"
            ),
        }
    }
}

/// What one walk did, complete or not: requests sent and duplicate names met count either way.
#[derive(Debug, Clone, PartialEq)]
pub struct WalkReport {
    pub result: Result<Walk, WalkError>,
    /// Listing requests sent (one per page attempted).
    pub requests: u32,
    /// Pages the server answered with a well-formed result.
    pub answered: u32,
    /// Keys that appeared more than once.
    pub duplicates: u32,
    /// Tool names over the spec's 128 characters (kept shortened).
    pub long_names: u32,
    /// Tools dropped for invalid `x-mcp-header` annotations (2026-07-28 Streamable HTTP).
    pub rejected: u32,
    /// Bytes charged to the listing budget: each page's answer, and at least
    /// [`BYTES_PER_ITEM`] per item it listed.
    pub bytes: usize,
}

impl WalkReport {
    /// A complete walk of one page that listed `items`: what tests and benches record without
    /// a server.
    pub fn listed(items: ItemSet) -> WalkReport {
        let walk = Walk {
            items,
            pages: 1,
            cache: None,
            param_headers: ParamHeaders::new(),
        };
        WalkReport {
            result: Ok(walk),
            requests: 1,
            answered: 1,
            duplicates: 0,
            long_names: 0,
            rejected: 0,
            bytes: 0,
        }
    }
}

/// Walk the whole list.
pub async fn walk<P: Pager>(pager: &mut P, limits: WalkLimits) -> WalkReport {
    let list = pager.list();
    let mut items = ItemSet::new();
    let mut seen_cursors: HashSet<String> = HashSet::new();
    let mut cursor: Option<String> = None;
    let mut cache: Option<ListingCache> = None;
    let mut param_headers = ParamHeaders::new();
    let mut report = WalkReport {
        result: Err(WalkError::LoopCap),
        requests: 0,
        answered: 0,
        duplicates: 0,
        long_names: 0,
        rejected: 0,
        bytes: 0,
    };
    let drop_invalid = pager.drops_invalid_header_annotations();
    let max_pages = limits.max_pages.max(1);
    let done = |mut report: WalkReport, result| {
        report.result = result;
        report
    };
    loop {
        if report.requests >= max_pages {
            return done(report, Err(WalkError::LoopCap));
        }
        report.requests += 1;
        let with_cursor = cursor.is_some();
        let request_error = |error| Err(WalkError::Request { error, with_cursor });
        let budget = limits.max_bytes.saturating_sub(report.bytes);
        let (page, bytes) = match pager.page(cursor.as_deref(), budget).await {
            Ok(answer) => answer,
            // The budget, not the transport's own cap, stopped this page: the listing is too
            // large, whatever this one page would have weighed.
            Err(e) if e.reason == Reason::BodyTooLarge && budget < MAX_BODY_BYTES => {
                let max_bytes = limits.max_bytes;
                return done(report, Err(WalkError::ListingTooLarge { max_bytes }));
            }
            Err(error) => return done(report, request_error(error)),
        };
        let room = MAX_ITEMS_PER_WALK - items.len();
        let parsed = match parse_page(list, &page, room, drop_invalid, &mut |fp, t| {
            pager.definition(fp, t)
        }) {
            Ok(p) => p,
            Err(PageFault::Invalid(error)) => return done(report, request_error(error)),
            Err(PageFault::TooManyItems) => {
                return done(report, Err(WalkError::TooManyItems { list }));
            }
        };
        drop(page);
        // An item costs what the connection keeps of it even when its JSON is tiny, so the
        // budget bounds memory, not only the wire: many one-letter tools cannot slip past it.
        report.bytes += bytes.max(parsed.items.len() * BYTES_PER_ITEM);
        if report.bytes > limits.max_bytes {
            let max_bytes = limits.max_bytes;
            return done(report, Err(WalkError::ListingTooLarge { max_bytes }));
        }
        report.answered += 1;
        report.rejected += parsed.rejected;
        if let Some(hint) = parsed.cache {
            cache = Some(ListingCache::add(cache, hint));
        }
        for item in parsed.items {
            report.long_names += u32::from(item.shortened && list == List::Tools);
            if !item.param_headers.is_empty() && !items.contains(&item.key) {
                param_headers.insert(item.key.clone(), item.param_headers.into());
            }
            if !items.insert_tool(item.key, item.fingerprint, item.read_only) {
                report.duplicates += 1;
            }
        }
        match parsed.next_cursor {
            None => {
                let pages = report.requests;
                items.shrink_to_fit();
                let walk = Walk {
                    items,
                    pages,
                    cache,
                    param_headers,
                };
                return done(report, Ok(walk));
            }
            Some(next) => {
                if next.len() > MAX_CURSOR_BYTES {
                    let error = McpError::new(Reason::InvalidResponse, "nextCursor over 4 KiB");
                    return done(report, request_error(error));
                }
                if !seen_cursors.insert(next.clone()) {
                    return done(report, Err(WalkError::RepeatedCursor));
                }
                cursor = Some(next);
            }
        }
    }
}

/// One item as a page lists it, reduced to what a connection keeps.
struct PageItem {
    key: Box<str>,
    /// A tool's `x-mcp-header` parameters (modern Streamable HTTP only).
    param_headers: Vec<HeaderParam>,
    shortened: bool,
    fingerprint: u64,
    read_only: bool,
}

struct Page {
    items: Vec<PageItem>,
    /// Tools left out for invalid `x-mcp-header` annotations.
    rejected: u32,
    next_cursor: Option<String>,
    cache: Option<CacheHint>,
}

enum PageFault {
    Invalid(McpError),
    /// More tools than the walk has room left for.
    TooManyItems,
}

/// Read one page of `list` holding at most `room` items; with `drop_invalid`, tools with
/// invalid `x-mcp-header` annotations are left out (and counted).
fn parse_page(
    list: List,
    result: &Value,
    room: usize,
    drop_invalid: bool,
    keep: &mut dyn FnMut(u64, &Value),
) -> Result<Page, PageFault> {
    let bad = |what: &str| {
        PageFault::Invalid(McpError::new(
            Reason::InvalidResponse,
            format!("{} result: {what}", list.method()),
        ))
    };
    let (array, key_field) = (list.result_key(), list.key_field());
    let listed = result
        .get(array)
        .and_then(Value::as_array)
        .ok_or_else(|| bad(&format!("no {array} array")))?;
    let mut items = Vec::with_capacity(listed.len().min(room));
    let mut rejected = 0u32;
    let tools = list == List::Tools;
    for item in listed {
        let key = item
            .get(key_field)
            .and_then(Value::as_str)
            .ok_or_else(|| bad(&format!("an item without a string {key_field}")))?;
        if items.len() == room {
            // Past the cap the walk fails anyway; reading on would only cost memory.
            return Err(PageFault::TooManyItems);
        }
        let annotated = if drop_invalid && tools {
            match param_headers::annotations(item) {
                Ok(annotated) => annotated,
                Err(why) => {
                    tracing::debug!(tool = %crate::text::bounded(key, 160), why, "tool dropped from the listing: invalid x-mcp-header annotation");
                    rejected += 1;
                    continue;
                }
            }
        } else {
            Vec::new()
        };
        let (key, shortened) = kept_name(key);
        let fingerprint = definition_fingerprint(item);
        keep(fingerprint, item);
        items.push(PageItem {
            param_headers: annotated,
            key,
            shortened,
            fingerprint,
            read_only: tools && read_only_hinted(item),
        });
    }
    let next_cursor = match result.get("nextCursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.clone()),
        Some(_) => return Err(bad("nextCursor is not a string")),
    };
    let cached = result.get("ttlMs").is_some() || result.get("cacheScope").is_some();
    Ok(Page {
        items,
        rejected,
        next_cursor,
        cache: cached.then(|| CacheHint::of(result)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::VecDeque;

    /// Serves scripted pages and records the cursors it was asked for.
    struct Script {
        pages: VecDeque<Result<Value, McpError>>,
        asked: Vec<Option<String>>,
        /// Speaks as a 2026-07-28 Streamable HTTP client (drops invalid header annotations).
        modern: bool,
        list: List,
    }

    impl Pager for Script {
        fn list(&self) -> List {
            self.list
        }

        fn drops_invalid_header_annotations(&self) -> bool {
            self.modern
        }

        async fn page(
            &mut self,
            cursor: Option<&str>,
            max_bytes: usize,
        ) -> Result<(Value, usize), McpError> {
            self.asked.push(cursor.map(str::to_string));
            let page = self
                .pages
                .pop_front()
                .unwrap_or_else(|| Ok(json!({"tools": [], "nextCursor": "again"})))?;
            // As the transport does: an answer over the budget is refused, not returned.
            let bytes = page.to_string().len();
            if bytes > max_bytes {
                return Err(McpError::new(Reason::BodyTooLarge, "over the cap"));
            }
            Ok((page, bytes))
        }
    }

    /// Limits with `pages` pages and room for any test listing.
    fn pages(pages: u32) -> WalkLimits {
        WalkLimits {
            max_pages: pages,
            max_bytes: 1 << 20,
        }
    }

    fn tools(names: &[&str]) -> Vec<Value> {
        names
            .iter()
            .map(|n| json!({"name": n, "inputSchema": {"type": "object"}}))
            .collect()
    }

    fn script(pages: Vec<Result<Value, McpError>>) -> Script {
        Script {
            pages: pages.into(),
            asked: vec![],
            modern: false,
            list: List::Tools,
        }
    }

    /// Every list is walked by its own array and key; the tool list's own rules (the read-only
    /// hint, the 128-character limit, header annotations) stay the tools'.
    #[tokio::test]
    async fn other_lists_are_walked_by_their_array_and_key() {
        let long = format!("kb://docs/{}", "x".repeat(200));
        let annotated = json!({"type": "number", "x-mcp-header": "N"});
        let cases = [
            (
                List::Prompts,
                json!({"prompts": [
                {"name": "summarize", "arguments": [{"name": "document_id", "required": true}]},
                {"name": "triage", "annotations": {"readOnlyHint": true},
                 "inputSchema": {"properties": {"n": annotated}}}],
                "nextCursor": "2"}),
                json!({"prompts": [{"name": "summarize", "arguments": []}]}),
            ),
            (
                List::Resources,
                json!({"resources": [
                {"uri": "kb://a", "name": "a", "mimeType": "text/plain"},
                {"uri": long, "name": "long"}], "nextCursor": "2"}),
                json!({"resources": [{"uri": "kb://a", "name": "again"}]}),
            ),
            (
                List::ResourceTemplates,
                json!({"resourceTemplates": [
                {"uriTemplate": "kb://search/{q}", "name": "search"},
                {"uriTemplate": "kb://doc/{id}", "name": "doc"}], "nextCursor": "2"}),
                json!({"resourceTemplates": [{"uriTemplate": "kb://doc/{id}", "name": "doc"}]}),
            ),
        ];
        for (list, first, second) in cases {
            let mut s = script(vec![Ok(first), Ok(second)]);
            s.list = list;
            s.modern = true;
            let r = walk(&mut s, pages(8)).await;
            assert_eq!(
                (r.requests, r.duplicates, r.long_names, r.rejected),
                (2, 1, 0, 0),
                "{list}"
            );
            let w = r.result.unwrap();
            assert_eq!(w.items.len(), 2, "{list}");
            assert!(w.param_headers.is_empty(), "{list}");
            assert!(w.items.names().all(|n| !w.items.is_read_only(n)), "{list}");
        }
        // A page of another list is no page of this one.
        let mut s = script(vec![Ok(json!({"tools": []}))]);
        s.list = List::Prompts;
        let e = walk(&mut s, pages(8)).await.result.unwrap_err();
        assert!(
            e.to_string()
                .contains("prompts/list result: no prompts array"),
            "{e}"
        );
        let mut s = script(vec![Ok(json!({"resources": [{"name": "no uri"}]}))]);
        s.list = List::Resources;
        let e = walk(&mut s, pages(8)).await.result.unwrap_err();
        assert!(e.to_string().contains("without a string uri"), "{e}");
    }

    #[tokio::test]
    async fn a_modern_client_drops_tools_with_invalid_header_annotations_and_counts_them() {
        let bad = json!({"name": "bad", "inputSchema": {"type": "object", "properties": {
            "n": {"type": "number", "x-mcp-header": "N"}}}});
        let good = json!({"name": "good", "inputSchema": {"type": "object", "properties": {
            "r": {"type": "string", "x-mcp-header": "Region"}}}});
        let page = || Ok(json!({"tools": [bad.clone(), good.clone()]}));
        let mut modern = script(vec![page()]);
        modern.modern = true;
        let r = walk(&mut modern, pages(8)).await;
        assert_eq!(r.rejected, 1);
        let w = r.result.unwrap();
        assert_eq!(w.items.len(), 1);
        assert!(w.items.contains("good") && !w.items.contains("bad"));
        // The valid annotation is kept for calls to mirror into `Mcp-Param-Region`.
        let kept: Vec<&str> = w.param_headers["good"].iter().map(|p| &*p.name).collect();
        assert_eq!(kept, ["Region"]);
        // The annotation means nothing to a legacy client: both kept.
        let r = walk(&mut script(vec![page()]), pages(8)).await;
        let w = r.result.unwrap();
        assert_eq!((r.rejected, w.items.len()), (0, 2));
        assert!(w.param_headers.is_empty());
    }

    #[tokio::test]
    async fn follows_cursors_to_the_end() {
        let mut s = script(vec![
            Ok(json!({"tools": tools(&["a", "b"]), "nextCursor": "p2"})),
            Ok(json!({"tools": tools(&["c"]), "nextCursor": ""})),
            Ok(json!({"tools": tools(&["d"])})),
        ]);
        let r = walk(&mut s, pages(64)).await;
        let w = r.result.unwrap();
        assert_eq!(w.pages, 3);
        assert_eq!(w.items.len(), 4);
        assert_eq!(r.requests, 3);
        // An empty cursor is a cursor, and is sent back verbatim.
        assert_eq!(s.asked, vec![None, Some("p2".into()), Some("".into())]);
    }

    #[tokio::test]
    async fn repeated_cursor_aborts() {
        let mut s = script(vec![
            Ok(json!({"tools": tools(&["a"]), "nextCursor": "x"})),
            Ok(json!({"tools": tools(&["b"]), "nextCursor": "x"})),
        ]);
        let r = walk(&mut s, pages(64)).await;
        assert_eq!(r.result, Err(WalkError::RepeatedCursor));
        assert_eq!(r.requests, 2);
    }

    #[tokio::test]
    async fn endless_cursors_hit_the_loop_cap() {
        let mut n = 0;
        let script_pages = std::iter::from_fn(|| {
            n += 1;
            Some(Ok(json!({"tools": [], "nextCursor": format!("c{n}")})))
        })
        .take(100)
        .collect();
        let mut s = script(script_pages);
        let r = walk(&mut s, pages(5)).await;
        assert_eq!(r.result, Err(WalkError::LoopCap));
        assert_eq!(r.requests, 5);
    }

    #[tokio::test]
    async fn duplicates_are_counted_and_the_walk_completes() {
        let mut s = script(vec![
            Ok(json!({"tools": tools(&["a", "b"]), "nextCursor": "2"})),
            Ok(json!({"tools": tools(&["b", "c"])})),
        ]);
        let r = walk(&mut s, pages(64)).await;
        assert_eq!(r.duplicates, 1);
        assert_eq!(r.result.unwrap().items.len(), 3);
    }

    #[tokio::test]
    async fn errors_are_cursor_errors_only_after_the_first_page() {
        let err = || McpError::rpc(-32602, "Invalid cursor");
        let mut first = script(vec![Err(err())]);
        let r = walk(&mut first, pages(64)).await.result.unwrap_err();
        assert!(!r.is_cursor_error());
        assert_eq!(r.reason(), "jsonrpc_error");

        let mut later = script(vec![
            Ok(json!({"tools": tools(&["a"]), "nextCursor": "2"})),
            Err(err()),
        ]);
        let r = walk(&mut later, pages(64)).await.result.unwrap_err();
        assert!(r.is_cursor_error());
    }

    #[tokio::test]
    async fn the_listing_is_held_to_its_byte_budget_across_pages() {
        let page = |names: &[&str], next: Option<&str>| {
            let mut p = json!({"tools": tools(names)});
            if let Some(c) = next {
                p["nextCursor"] = json!(c);
            }
            p
        };
        let first = page(&["a", "b"], Some("2"));
        let second = page(&["c", "d"], None);
        // Each page is charged its bytes, and at least what the connection keeps of its tools.
        let charge = |p: &Value| p.to_string().len().max(2 * BYTES_PER_ITEM);
        let (b1, b2) = (charge(&first), charge(&second));
        let within = |max_bytes| WalkLimits {
            max_pages: 64,
            max_bytes,
        };
        // Exactly enough: the walk completes and reports what it read.
        let mut s = script(vec![Ok(first.clone()), Ok(second.clone())]);
        let r = walk(&mut s, within(b1 + b2)).await;
        assert_eq!(r.bytes, b1 + b2);
        assert_eq!(r.answered, 2);
        assert_eq!(r.result.unwrap().items.len(), 4);
        // One byte short: the second page is refused, the walk fails as listing_too_large.
        let mut s = script(vec![Ok(first), Ok(second)]);
        let r = walk(&mut s, within(b1 + b2 - 1)).await;
        assert_eq!(
            r.result,
            Err(WalkError::ListingTooLarge {
                max_bytes: b1 + b2 - 1
            })
        );
        assert_eq!(r.result.as_ref().unwrap_err().reason(), "listing_too_large");
        assert_eq!((r.requests, r.answered), (2, 1));
    }

    #[tokio::test]
    async fn many_tiny_tools_are_charged_what_they_cost_to_keep() {
        let names: Vec<String> = (0..100).map(|i| format!("{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let page = json!({"tools": names.iter().map(|n| json!({"name": n})).collect::<Vec<_>>()});
        let wire = page.to_string().len();
        assert!(wire < 100 * BYTES_PER_ITEM, "the wire alone would pass");
        let mut s = script(vec![Ok(page)]);
        let limits = WalkLimits {
            max_pages: 64,
            max_bytes: 100 * BYTES_PER_ITEM - 1,
        };
        let r = walk(&mut s, limits).await;
        assert_eq!(r.result.unwrap_err().reason(), "listing_too_large");
    }

    #[tokio::test]
    async fn over_long_names_are_kept_short_distinct_and_counted() {
        let long_a = format!("a{}", "x".repeat(50_000));
        let long_b = format!("a{}y", "x".repeat(50_000));
        let ok = "n".repeat(128);
        let mut s = script(vec![Ok(
            json!({"tools": tools(&[&long_a, &long_b, &ok, "short"])}),
        )]);
        let r = walk(&mut s, pages(64)).await;
        assert_eq!(r.long_names, 2);
        let w = r.result.unwrap();
        assert_eq!(w.items.len(), 4, "distinct long names stay distinct");
        assert!(w.items.contains(&ok) && w.items.contains("short"));
        assert!(
            w.items.names().all(|n| n.len() <= 128 + 30),
            "{:?}",
            w.items
        );
    }

    #[tokio::test]
    async fn a_page_past_the_tool_cap_fails_without_keeping_it() {
        let names: Vec<String> = (0..=MAX_ITEMS_PER_WALK).map(|i| format!("t{i}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut s = script(vec![Ok(json!({"tools": tools(&names)}))]);
        let limits = WalkLimits {
            max_pages: 64,
            max_bytes: 64 << 20,
        };
        let r = walk(&mut s, limits).await;
        assert_eq!(r.result, Err(WalkError::TooManyItems { list: List::Tools }));
    }

    #[tokio::test]
    async fn malformed_pages_are_invalid_responses() {
        for bad in [
            json!({}),
            json!({"tools": [{"description": "no name"}]}),
            json!({"tools": [], "nextCursor": 3}),
        ] {
            let mut s = script(vec![Ok(bad)]);
            let r = walk(&mut s, pages(64)).await.result.unwrap_err();
            assert_eq!(r.reason(), "invalid_response");
        }
    }
}
