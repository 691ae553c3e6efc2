//! The fault knobs of one lab endpoint (a "profile"). Each knob reproduces one failure mode of
//! `PRODUCT.md`; every knob off is a healthy, paginating server.

use std::time::Duration;

/// What one profile (gateway) does.
#[derive(Debug, Clone)]
pub struct Behaviour {
    /// Declare `listChanged: true` on every list capability the profile declares.
    pub list_changed_capability: bool,
    /// Serve prompts, resources and resource templates beside the tools (see
    /// [`crate::kb_lists`]): declared, listed and announced as the tools are, with the same
    /// faults where they apply (notifications lost or never declared, no stream, cursors,
    /// instances). The backend failures after a redeploy (F5), the hot-fix insertion (F11) and
    /// the schema changes (F13) are the tool list's.
    pub prompts_and_resources: bool,
    /// Forward `list_changed` notifications to clients (false: a lossy gateway drops them).
    pub deliver_list_changed: bool,
    /// Offer the GET stream (false: answer GET with 405).
    pub get_stream: bool,
    /// Tools per `tools/list` page.
    pub page_size: usize,
    /// Answer POSTed requests as `text/event-stream` instead of `application/json`.
    pub sse_responses: bool,
    /// Wait this long before answering each `tools/list` page (a slow backend).
    pub page_delay: Duration,
    /// Announce changes inside SSE answers to POSTs, before the response (as fastmcp does), once
    /// per change and session. Takes effect with `sse_responses`.
    pub list_changed_in_answers: bool,
    /// How `nextCursor` behaves.
    pub cursors: Cursors,
    /// Wait this long before answering every POSTed request (ping included): a slow server (F15).
    pub answer_delay: Duration,
    /// Send `list_changed` on the GET stream this often although nothing changed (F14).
    pub spurious_list_changed: Option<Duration>,
    /// Announce each redeploy twice, back to back, as a change made in two steps does (the
    /// TypeScript SDK's `remove()` then `enable()`): a correct client re-lists once.
    pub two_step_changes: bool,
    /// Redeploys keep every name and change one tool's `inputSchema` instead (F13).
    pub schema_drift: bool,
    /// The first redeploy changes one tool's definition under the same name, and later ones
    /// keep it (see [`crate::kb::tools_changed`]): one change to classify, or to catch
    /// against pins.
    pub definition_change: Option<DefinitionChange>,
    /// A proxy closes the GET stream after this much time (F4).
    pub stream_close_after: Option<Duration>,
    /// When the proxy closes the stream, the backend is redeployed in the gap, so the stream
    /// never carries that change's notification (F4).
    pub change_in_stream_gap: bool,
    /// After each redeploy, this many `tools/list` requests fail with HTTP 503 (F5).
    pub failing_lists_after_change: u32,
    /// What stands behind the endpoint.
    pub instances: Instances,
    /// Offset cursors under churn: a tool is inserted at the front while a walk is between pages,
    /// so the next page repeats a name (F11). The next walk's first page removes it again.
    pub insert_during_walk: bool,
    /// Tools that stay listed but whose backend is down: `tools/call` answers `isError: true`
    /// ("listed is not usable").
    pub broken_tools: Vec<&'static str>,
    /// SSE polling (2025-11-25, SEP-1699): each POSTed request, `initialize` included, is
    /// answered by a stream that carries only a priming event (an `id`, `retry`, empty data) and
    /// closes; the response waits for the GET that resumes that stream with `Last-Event-ID` (and
    /// the session's `Mcp-Session-Id`, which the `initialize` answer carries). A stream is
    /// replayed once; answers too large to keep (over 64 KiB) are sent whole instead.
    pub resumable_posts: bool,
    /// Which protocol eras the endpoint serves (`lab --era`).
    pub era: Era,
    /// `ttlMs` of modern `server/discover` and `tools/list` results: how long a client may serve
    /// them from its cache. The default outlives the scenarios' 30 s churn, so a client that
    /// trusted the TTL alone would serve a stale list; `list_changed` is what invalidates it.
    pub ttl_ms: u64,
    /// `cacheScope` of modern cacheable results (every page of one list shares it).
    pub cache_scope: CacheScope,
    /// Modern era only: the first page's `nextCursor` is the empty string, which 2026-07-28
    /// pagination calls a valid cursor a client must follow (it is not the end of the list).
    pub empty_cursor: bool,
}

/// One change of a tool definition under the same name (docs/changes.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DefinitionChange {
    /// `ticket_create` gains a required `priority`: old callers' arguments are now refused.
    Breaking,
    /// `ticket_search` gains an optional `limit`: old callers are unaffected.
    Compatible,
    /// `kb_get_document`'s description gains an instruction to the model, schema untouched:
    /// the rug-pull pattern pins catch.
    Description,
}

/// The protocol eras one endpoint serves on its URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Era {
    /// Both: `initialize` opens a legacy session, a request with per-request `_meta` is served
    /// statelessly (a dual-era server, as the Python SDK 2.x is).
    #[default]
    Dual,
    /// 2026-07-28 only: `initialize` is refused with 400 and the supported versions, GET and
    /// DELETE get 405.
    Modern,
    /// 2025-11-25 and earlier only: a modern request gets what a legacy-only server answers (400,
    /// -32600, as the Python SDK 1.x does).
    Legacy,
}

impl Era {
    pub fn parse(s: &str) -> Option<Era> {
        match s {
            "dual" => Some(Era::Dual),
            "modern" => Some(Era::Modern),
            "legacy" => Some(Era::Legacy),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Era::Dual => "dual",
            Era::Modern => "modern",
            Era::Legacy => "legacy",
        }
    }

    pub fn serves_legacy(self) -> bool {
        self != Era::Modern
    }
}

/// `cacheScope` of a cacheable modern result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CacheScope {
    /// Shareable across users: the lab has no authorization, so every user sees the same list.
    #[default]
    Public,
    /// Per authorization context.
    Private,
}

impl CacheScope {
    pub fn as_str(self) -> &'static str {
        match self {
            CacheScope::Public => "public",
            CacheScope::Private => "private",
        }
    }
}

/// The instances behind one endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Instances {
    /// One server.
    #[default]
    One,
    /// Two instances, `tools/list` requests alternate between them, and each knows only its own
    /// cursors: page 2 lands on the other instance and is rejected with -32602 (F8).
    RoundRobinLocalCursors,
    /// Two instances, sessions pinned alternately; the second serves the next deploy's list, so
    /// connections disagree (F12).
    PinnedDivergent,
}

/// Cursor behaviour of a profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Cursors {
    /// Offset cursors that end: the correct behaviour.
    #[default]
    Offset,
    /// The second page hands back the cursor of the first: a cursor that never advances (F9).
    Repeat,
    /// Every page, however far, has a new `nextCursor` (F10).
    Endless,
}

impl Default for Behaviour {
    /// A healthy, paginating server: the knowledge base of the source scenario.
    fn default() -> Self {
        Behaviour {
            list_changed_capability: true,
            prompts_and_resources: true,
            deliver_list_changed: true,
            get_stream: true,
            page_size: 8,
            sse_responses: false,
            page_delay: Duration::ZERO,
            list_changed_in_answers: false,
            cursors: Cursors::Offset,
            answer_delay: Duration::ZERO,
            spurious_list_changed: None,
            two_step_changes: false,
            schema_drift: false,
            definition_change: None,
            stream_close_after: None,
            change_in_stream_gap: false,
            failing_lists_after_change: 0,
            instances: Instances::One,
            insert_during_walk: false,
            broken_tools: Vec::new(),
            resumable_posts: false,
            era: Era::Dual,
            ttl_ms: 60_000,
            cache_scope: CacheScope::Public,
            empty_cursor: false,
        }
    }
}
