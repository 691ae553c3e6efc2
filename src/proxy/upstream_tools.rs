//! The proxy's own view of the upstream's tools: what "current list" means when a client calls
//! a tool.
//!
//! The proxy opens its own session with the exporter's client ([`mcp_client::mcp::Client`], like
//! `check`) and walks `tools/list` with the probe's [`walker`] (page cap, repeated-cursor guard,
//! byte budget), through a [`Pager`] that also keeps each tool's `inputSchema`. It walks on start,
//! every `catalog_refresh_interval`, shortly after a `list_changed` passes through (debounced), and
//! when a call names a tool it does not know and the catalog is older than the call (so a tool
//! added a moment ago is not called stale). After a complete tool walk the same session walks the
//! prompts, resources and resource templates the upstream declares ([`super::catalog_lists`]),
//! with the same limits, so `prompts/get` and `resources/read` are judged by the same walk and
//! the same waiting rules ([`Catalog::judge_list`]).
//!
//! It also learns from the clients' own listings ([`Catalog::saw_page`], [`Catalog::saw_walk`]):
//! a server that cannot announce a change (no `listChanged`, a lossy gateway) still shows it to
//! every client that re-lists, and that listing passes through the proxy. A page holding a tool
//! whose fingerprint (the probe's [`definition_fingerprint`], under its name) the catalog does not have,
//! or a complete walk of a session with another number of tools, asks for the same debounced,
//! single-flight re-walk a `list_changed` does, so a call right after is judged against the
//! freshest list any client has seen, not one up to `catalog_refresh_interval` old. Order is not
//! compared (the product's list fingerprint is order-free too). Nothing of the page is kept: only
//! a digest of a disagreement that survived a re-walk (at most [`MAX_DISAGREEMENTS`], forgotten
//! when the catalog changes), so a client that always sees another list than the catalog (a
//! listing scoped by its credentials, another instance behind a load balancer) asks for one
//! re-walk per change, not one per page.
//!
//! The catalog session authenticates like a target: the proxy's own `headers`, `header_files`
//! and `http_config` blocks (`--header`, `--http-config`), through the target's [`TargetHttp`]
//! (static credentials re-read from files, OAuth tokens with the same trust rules). Clients'
//! credentials are never used here, and these are never added to clients' requests.
//!
//! Kept: the current schema of every tool and the previous schema of tools whose definition
//! changed (for stale-schema calls), within [`MAX_SCHEMA_BYTES`]; and the names listed in the last
//! 24 h (at most [`MAX_TOOL_LABELS`]), the only values the `tool` label may take.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::{Notify, watch};

use super::catalog_lists::Lists;
use crate::config::{Endpoint, Secret};
use crate::proxy::metrics::ProxyMetrics;
use mcp_client::listing::items::{definition_fingerprint, kept_name};
use mcp_client::listing::list::List;
use mcp_client::listing::walker::{self, Pager, WalkLimits};
use mcp_client::mcp::{Client, Era, Inbox, McpError};
use mcp_client::target_http::TargetHttp;

/// Least age of the last walk before a call of an unknown tool walks the upstream again (a
/// tool added since, without `list_changed`, is judged against a walk at most this old).
pub const UNKNOWN_TOOL_REWALK: Duration = Duration::from_secs(5);

/// Bytes of schemas (current and previous) one catalog keeps; past it a tool's schema is not
/// kept and its calls are never judged stale-schema.
pub const MAX_SCHEMA_BYTES: usize = 2 * 1024 * 1024;
/// Most distinct `tool` label values.
pub const MAX_TOOL_LABELS: usize = 500;
/// How long a listed name stays a `tool` label value.
const TOOL_LABEL_TTL: Duration = Duration::from_secs(24 * 3600);
/// Disagreements between clients' listings and the catalog remembered after a re-walk left them
/// standing (see the module docs).
pub const MAX_DISAGREEMENTS: usize = 64;
/// A `list_changed` seen starts a walk this long after (more in the meantime join it).
const DEBOUNCE: Duration = Duration::from_millis(300);
/// Wait before walking again after a failed walk or connect.
const RETRY: Duration = Duration::from_secs(5);
/// Deadline of each request of the catalog session.
pub(super) const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// Walk limits of the proxy's own walks (the catalog's, and the merged walks of flattened
/// clients): the probe's page cap, and four times its default byte budget — the proxy must
/// follow whatever listing its clients are served, and they are not held to the exporter's
/// default.
pub(super) const LIMITS: WalkLimits = WalkLimits {
    max_pages: 64,
    max_bytes: crate::config::DEFAULT_MAX_LISTING_BYTES * 4,
};

/// What the catalog knows of one tool.
#[derive(Debug, Clone)]
struct ToolDef {
    fingerprint: u64,
    schema: Option<Arc<Value>>,
    /// The schema before the tool's last change, if it changed while the proxy watched.
    previous: Option<Arc<Value>>,
}

#[derive(Default)]
struct State {
    tools: HashMap<Box<str>, ToolDef>,
    /// Names listed, and when last.
    listed: HashMap<Box<str>, Instant>,
    walked_at: Option<Instant>,
    schema_bytes: usize,
    /// Start of the walk under way that a `list_changed` or a client's listing asked for.
    refreshing: Option<Instant>,
    /// Digest of a client listing's disagreement with the catalog, and when it asked for a walk.
    disagreements: HashMap<u64, Instant>,
    /// Why the last walk (or its session) failed: the reason label and the error (bounded, no
    /// secrets); `None` after a complete walk.
    failure: Option<(&'static str, String)>,
    /// The upstream's prompts, resources and resource templates (see [`super::catalog_lists`]).
    lists: Lists,
}

/// The catalog of one proxy's upstream.
pub struct Catalog {
    state: RwLock<State>,
    /// Bumped after every walk, complete or not.
    walks: watch::Sender<u64>,
    trigger: Notify,
    /// A `list_changed` passed through since the last walk started: the list may be outdated.
    pending: std::sync::atomic::AtomicBool,
    /// The current list's generation and fingerprint, bumped when a walk finds it changed
    /// (healing tells sessions that listed another one, see [`super::heal`]).
    listing: watch::Sender<Listing>,
    /// Clients' listings being compared with the catalog off their answer's way
    /// ([`Catalog::comparing`]): a call is judged once none is.
    comparing: watch::Sender<usize>,
}

/// A client's listing being compared with the catalog off the request path (the comparison
/// fingerprints every tool of the page, which the answer should not wait for): calls judged
/// meanwhile wait for it, since it may ask for a walk. Dropped when the comparison is done.
pub struct Comparing(Arc<Catalog>);

impl Drop for Comparing {
    fn drop(&mut self) {
        self.0.comparing.send_modify(|n| *n = n.saturating_sub(1));
    }
}

/// Which list the catalog holds: `generation` counts the walks that found it changed (0: no
/// walk yet), `fingerprint` is [`listing_fingerprint`] of its tools.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Listing {
    pub generation: u64,
    pub fingerprint: u64,
}

/// An order-free fingerprint of a list, from each tool's [`definition_fingerprint`] (which covers its
/// name): the catalog's walk and a client's listing of the same tools give the same value.
pub fn listing_fingerprint(tools: impl IntoIterator<Item = u64>) -> u64 {
    tools
        .into_iter()
        .fold(0u64, |sum, fp| sum.wrapping_add(fp.rotate_left(17) ^ fp))
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            state: RwLock::default(),
            walks: watch::channel(0).0,
            trigger: Notify::new(),
            pending: std::sync::atomic::AtomicBool::new(false),
            listing: watch::channel(Listing::default()).0,
            comparing: watch::channel(0).0,
        }
    }
}

/// A stale-call verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Fine,
    /// The tool is not in the upstream's current list.
    StaleTool,
    /// The arguments fit the previous schema, not the current one.
    StaleSchema,
    /// No catalog yet: nothing can be said.
    Unknown,
}

impl Catalog {
    /// Ask for a walk soon (a `list_changed` passed through, or a client's listing differed):
    /// single-flight, as a walk already asked for and not started yet starts after now anyway.
    pub fn refresh_soon(&self) {
        if !self
            .pending
            .swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            self.trigger.notify_one();
        }
    }

    /// Why the catalog session is down (the last walk's failure), if it is.
    pub fn failure(&self) -> Option<String> {
        let s = self.state.read().expect("catalog lock");
        s.failure.as_ref().map(|(_, text)| text.clone())
    }

    /// Walks done so far, complete or not.
    pub fn walks(&self) -> u64 {
        *self.walks.borrow()
    }

    /// Tools in the current list, if a walk completed.
    pub fn tools(&self) -> Option<usize> {
        let s = self.state.read().expect("catalog lock");
        s.walked_at.map(|_| s.tools.len())
    }

    /// The `tool` label of `name`: itself when listed in the last 24 h, else `other`.
    pub fn tool_label(&self, name: &str) -> String {
        let s = self.state.read().expect("catalog lock");
        match s.listed.get(name) {
            Some(t) if t.elapsed() < TOOL_LABEL_TTL => name.to_string(),
            _ => "other".to_string(),
        }
    }

    /// Whether a call of `tool` with `arguments` made at `at` is stale; walks first when the
    /// catalog is older than the call and either a `list_changed` passed (or a client's listing
    /// differed) since the last walk or the tool is unknown and the last walk is
    /// [`UNKNOWN_TOOL_REWALK`] old; waits for the walk such evidence already started (bounded by
    /// `wait`).
    pub async fn judge(
        &self,
        tool: &str,
        arguments: &Value,
        at: Instant,
        wait: Duration,
    ) -> Verdict {
        self.judge_fresh(tool, arguments, at, wait).await.0
    }

    /// [`Catalog::judge`], and whether the verdict is no guess: the walk it waited for (if any)
    /// ended within `wait`, and the last walk did not fail (a failed walk leaves an older list).
    pub async fn judge_fresh(
        &self,
        tool: &str,
        arguments: &Value,
        at: Instant,
        wait: Duration,
    ) -> (Verdict, bool) {
        let fresh = self
            .await_walk(|s| !s.tools.contains_key(tool), at, wait)
            .await;
        let s = self.state.read().expect("catalog lock");
        if s.walked_at.is_none() {
            return (Verdict::Unknown, false);
        }
        let Some(def) = s.tools.get(tool) else {
            return (Verdict::StaleTool, fresh);
        };
        let verdict = match (&def.previous, &def.schema) {
            (Some(prev), Some(cur))
                if super::schema::fits(prev, arguments) && !super::schema::fits(cur, arguments) =>
            {
                Verdict::StaleSchema
            }
            _ => Verdict::Fine,
        };
        (verdict, fresh)
    }

    /// Whether a use of `key` from `list` (a `prompts/get` of a name, a `resources/read` of a
    /// URI) made at `at` is stale (see [`super::catalog_lists`] for the rule): `None` when
    /// nothing can be said (no complete walk of the lists it depends on). Waits for a walk as a
    /// tool call does; an item the upstream produced before and not in the last walk walks again
    /// when that walk is [`UNKNOWN_TOOL_REWALK`] old (a client that keeps using a retired item
    /// costs at most one walk per that period).
    pub async fn judge_list(
        &self,
        list: List,
        key: &str,
        at: Instant,
        wait: Duration,
    ) -> Option<bool> {
        let now = Instant::now();
        self.await_walk(|s| s.lists.stale(list, key, now) == Some(true), at, wait)
            .await;
        let s = self.state.read().expect("catalog lock");
        s.walked_at?;
        s.lists.stale(list, key, Instant::now())
    }

    /// Wait (within `wait`) for the walk a use made at `at` is to be judged by: one started at
    /// or after it when a `list_changed` passed (or a client's listing differed) since the last
    /// walk, or when `unknown` says the catalog does not know what was used and the last walk
    /// is [`UNKNOWN_TOOL_REWALK`] old; else the walk such evidence already started, if any. True
    /// when the verdict is no guess (that walk ended within `wait`, the last walk did not fail).
    async fn await_walk(
        &self,
        unknown: impl Fn(&State) -> bool,
        at: Instant,
        wait: Duration,
    ) -> bool {
        // A listing compared meanwhile may ask for the walk this call should wait for.
        let mut comparing = self.comparing.subscribe();
        let _ = tokio::time::timeout(wait, async {
            let _ = comparing.wait_for(|n| *n == 0).await;
        })
        .await;
        // The walk to wait for: one that started at or after `target`.
        let (walk, target) = {
            let s = self.state.read().expect("catalog lock");
            let outdated = self.pending.load(std::sync::atomic::Ordering::Relaxed);
            // An unknown tool walks again only when the last walk is not recent: a client that
            // keeps calling a removed tool (what this detects) must not keep the upstream busy.
            let unknown = unknown(&s)
                && s.walked_at
                    .is_some_and(|w| w.elapsed() >= UNKNOWN_TOOL_REWALK);
            let older = s.walked_at.is_some_and(|w| w < at);
            match s.refreshing {
                _ if (outdated || unknown) && older => (true, Some(at)),
                // A walk asked for by evidence is under way: its list is the freshest.
                Some(started) if older => (false, Some(started.min(at))),
                _ => (false, None),
            }
        };
        let mut fresh = true;
        if let Some(target) = target {
            let mut walks = self.walks.subscribe();
            if walk && !self.pending.load(std::sync::atomic::Ordering::Relaxed) {
                // (An asked-for walk starts after now: no second one.)
                self.trigger.notify_one();
            }
            let newer = async {
                loop {
                    if self
                        .state
                        .read()
                        .expect("catalog lock")
                        .walked_at
                        .is_some_and(|w| w >= target)
                    {
                        return;
                    }
                    if walks.changed().await.is_err() {
                        return;
                    }
                }
            };
            fresh = tokio::time::timeout(wait, newer).await.is_ok();
        }
        let s = self.state.read().expect("catalog lock");
        fresh && s.failure.is_none() && s.walked_at.is_some_and(|w| target.is_none_or(|t| w >= t))
    }

    /// Items in the catalog's other lists (their last complete walks), by list.
    pub fn list_counts(&self) -> Vec<(List, usize)> {
        self.state.read().expect("catalog lock").lists.counts()
    }

    /// Whether `name` is in the current list.
    pub fn lists(&self, name: &str) -> bool {
        self.state
            .read()
            .expect("catalog lock")
            .tools
            .contains_key(name)
    }

    /// Whether `name` was listed in the last 24 h (see [`Catalog::tool_label`]).
    pub fn listed_before(&self, name: &str) -> bool {
        let s = self.state.read().expect("catalog lock");
        s.listed
            .get(name)
            .is_some_and(|t| t.elapsed() < TOOL_LABEL_TTL)
    }

    /// The list the catalog holds now (generation 0 before its first complete walk).
    pub fn listing(&self) -> Listing {
        *self.listing.borrow()
    }

    /// Changes of [`Catalog::listing`].
    pub fn listing_changes(&self) -> watch::Receiver<Listing> {
        self.listing.subscribe()
    }

    /// Apply a complete walk's definitions.
    fn apply(&self, defs: Vec<(Box<str>, u64, Option<Value>)>, now: Instant) {
        let mut s = self.state.write().expect("catalog lock");
        let mut old = std::mem::take(&mut s.tools);
        let mut bytes = 0usize;
        let mut tools = HashMap::with_capacity(defs.len());
        let mut changed = false;
        for (name, fingerprint, schema) in defs {
            let before = old.remove(&name);
            changed |= before.as_ref().is_none_or(|b| b.fingerprint != fingerprint);
            let size = |v: &Option<Arc<Value>>| v.as_ref().map_or(0, |v| v.to_string().len());
            let schema = schema.map(Arc::new);
            let previous = match before {
                Some(b) if b.fingerprint != fingerprint => b.schema,
                Some(b) => b.previous,
                None => None,
            };
            let mut def = ToolDef {
                fingerprint,
                schema,
                previous,
            };
            let cost = size(&def.schema) + size(&def.previous);
            if bytes + cost > MAX_SCHEMA_BYTES {
                def.schema = None;
                def.previous = None;
            } else {
                bytes += cost;
            }
            tools.insert(name, def);
        }
        changed |= !old.is_empty();
        let fingerprint = listing_fingerprint(tools.values().map(|t| t.fingerprint));
        s.tools = tools;
        s.schema_bytes = bytes;
        s.walked_at = Some(now);
        if changed {
            // What clients' listings disagreed on may be what just changed: listen to them again.
            s.disagreements.clear();
            self.listing.send_modify(|l| {
                l.generation += 1;
                l.fingerprint = fingerprint;
            });
        }
        let names: Vec<Box<str>> = s.tools.keys().cloned().collect();
        s.listed
            .retain(|_, t| now.duration_since(*t) < TOOL_LABEL_TTL);
        for name in names {
            if s.listed.len() < MAX_TOOL_LABELS || s.listed.contains_key(&name) {
                s.listed.insert(name, now);
            }
        }
    }

    /// A `tools/list` page a client asked for at `asked` passed through with these `tools`: when
    /// the catalog is older than the request and lacks one of them (by name and fingerprint), it
    /// re-walks soon. True when a re-walk was asked for.
    pub fn saw_page(&self, tools: &[Value], asked: Instant) -> bool {
        self.older_than(asked) && self.page_differs(tools, asked)
    }

    /// A page of another `list` a client asked for at `asked` passed through with `items`: when
    /// the catalog is older than the request and its walk of that list lacks one of their keys,
    /// it re-walks soon (the same single-flight walk; a lasting difference asks once per
    /// change). True when a re-walk was asked for.
    pub fn saw_list_page(&self, list: List, items: &[Value], asked: Instant) -> bool {
        if !self.older_than(asked) {
            return false;
        }
        let digest = self
            .state
            .read()
            .expect("catalog lock")
            .lists
            .unknown_keys(list, items);
        digest.is_some_and(|d| self.learn(d, asked))
    }

    /// A comparison of a client's listing starts (see [`Comparing`]).
    pub fn comparing(self: &Arc<Self>) -> Comparing {
        self.comparing.send_modify(|n| *n += 1);
        Comparing(self.clone())
    }

    fn page_differs(&self, tools: &[Value], asked: Instant) -> bool {
        let listed: Vec<(Box<str>, u64)> = tools
            .iter()
            .filter_map(|t| {
                let name = t.get("name").and_then(Value::as_str)?;
                Some((kept_name(name).0, definition_fingerprint(t)))
            })
            .collect();
        let digest = {
            let s = self.state.read().expect("catalog lock");
            listed
                .iter()
                .filter(|(name, fp)| s.tools.get(name).is_none_or(|t| t.fingerprint != *fp))
                .fold(None, |d: Option<u64>, (_, fp)| {
                    Some(d.unwrap_or(0) ^ fp.rotate_left(1))
                })
        };
        digest.is_some_and(|d| self.learn(d, asked))
    }

    /// A client's complete walk (a `tools/list` without a cursor, then every cursor followed to
    /// the last page) that ended with a request at `asked` listed `tools` tools: when the catalog
    /// is older and holds another number, it re-walks soon (every page matched the catalog, so
    /// the client's list lacks some of the catalog's tools). True when a re-walk was asked for.
    pub fn saw_walk(&self, tools: usize, asked: Instant) -> bool {
        if !self.older_than(asked) {
            return false;
        }
        let differs = self.tools().is_some_and(|n| n != tools);
        differs && self.learn(u64::MAX ^ tools as u64, asked)
    }

    /// Whether the last complete walk started before `t`.
    pub fn older_than(&self, t: Instant) -> bool {
        self.state
            .read()
            .expect("catalog lock")
            .walked_at
            .is_some_and(|w| w < t)
    }

    /// A client saw another list than the catalog's (`digest` names the difference): re-walk
    /// soon, unless the same difference already outlived a re-walk (the client's list differs
    /// for another reason than a change).
    fn learn(&self, digest: u64, asked: Instant) -> bool {
        {
            let mut s = self.state.write().expect("catalog lock");
            let Some(walked) = s.walked_at.filter(|w| *w < asked) else {
                return false;
            };
            match s.disagreements.get(&digest) {
                Some(at) if walked > *at => return false,
                Some(_) => {}
                None => {
                    if s.disagreements.len() >= MAX_DISAGREEMENTS
                        && let Some(oldest) = s
                            .disagreements
                            .iter()
                            .min_by_key(|(_, t)| **t)
                            .map(|(d, _)| *d)
                    {
                        s.disagreements.remove(&oldest);
                    }
                    s.disagreements.insert(digest, Instant::now());
                }
            }
        }
        self.refresh_soon();
        true
    }

    /// Walk the upstream on start, every `interval`, and when asked, until `stop`; `net` and
    /// `headers` are the catalog session's own credentials, TLS and proxy.
    #[allow(clippy::too_many_arguments)]
    pub async fn run(
        self: Arc<Self>,
        name: String,
        upstream: url::Url,
        net: Arc<TargetHttp>,
        headers: Vec<(String, Secret)>,
        interval: Duration,
        metrics: Arc<ProxyMetrics>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut session: Option<Arc<Client>> = None;
        loop {
            let started = Instant::now();
            if self
                .pending
                .swap(false, std::sync::atomic::Ordering::Relaxed)
            {
                self.state.write().expect("catalog lock").refreshing = Some(started);
            }
            let mut failure = None;
            if session.is_none() {
                match connect(&upstream, &net, &headers).await {
                    Ok(client) => session = Some(Arc::new(client)),
                    Err(e) => failure = Some((e.reason.as_str(), e.to_string())),
                }
            }
            let ok = match &session {
                Some(client) => {
                    let mut pager = CatalogPager {
                        client: client.clone(),
                        defs: Vec::new(),
                    };
                    let report = walker::walk(&mut pager, LIMITS).await;
                    match report.result {
                        Ok(_) => {
                            // The other lists are applied first: a use judged by this walk
                            // waits for the tools' `walked_at`, set last.
                            let lists =
                                super::catalog_lists::walk(client, LIMITS, REQUEST_TIMEOUT).await;
                            self.state
                                .write()
                                .expect("catalog lock")
                                .lists
                                .apply(lists, started);
                            self.apply(pager.defs, started);
                            true
                        }
                        Err(e) => {
                            failure = Some((e.reason(), e.to_string()));
                            false
                        }
                    }
                }
                None => false,
            };
            if !ok && let Some(s) = session.take() {
                s.close().await;
            }
            self.record_failure(&name, failure);
            self.state.write().expect("catalog lock").refreshing = None;
            metrics.upstream(ok, self.tools());
            if ok {
                metrics.upstream_lists(self.list_counts());
            }
            self.walks.send_modify(|n| *n += 1);
            let wait = if ok { interval } else { RETRY.min(interval) };
            let triggered = tokio::select! {
                _ = tokio::time::sleep(wait) => false,
                _ = self.trigger.notified() => true,
                _ = stop.wait_for(|s| *s) => break,
            };
            if triggered {
                tokio::time::sleep(DEBOUNCE).await;
            }
        }
        if let Some(s) = session {
            s.close().await;
        }
    }
}

impl Catalog {
    /// Keep why the catalog is down (`None`: it is up) and log a change of state or reason once,
    /// not every retry.
    fn record_failure(&self, proxy: &str, failure: Option<(&'static str, String)>) {
        let before = std::mem::replace(
            &mut self.state.write().expect("catalog lock").failure,
            failure.clone(),
        );
        match (before, failure) {
            (None, None) => {}
            (Some(_), None) => tracing::info!(proxy, "proxy catalog session to the upstream is up"),
            (Some((was, _)), Some((reason, text))) if was == reason => {
                tracing::debug!(proxy, reason, error = %text, "proxy catalog walk failed again");
            }
            (_, Some((reason, text))) => {
                tracing::warn!(proxy, reason, error = %text, "proxy catalog session to the upstream is down: stale-call verdicts are off until it is back (its credentials are the proxy's own headers and http_config, see docs/proxy.md)");
            }
        }
    }
}

async fn connect(
    upstream: &url::Url,
    net: &Arc<TargetHttp>,
    headers: &[(String, Secret)],
) -> Result<Client, McpError> {
    let dialer = crate::probe::connection::dialer(&Endpoint::http(upstream.clone()), headers, net)?;
    let (inbox, _requests) = Inbox::new();
    let observe = |_: &'static str, _, _| {};
    Client::connect(&dialer, None, Arc::new(inbox), REQUEST_TIMEOUT, &observe).await
}

/// Pages for the walker, keeping each tool's fingerprint and `inputSchema`.
struct CatalogPager {
    client: Arc<Client>,
    defs: Vec<(Box<str>, u64, Option<Value>)>,
}

impl Pager for CatalogPager {
    fn drops_invalid_header_annotations(&self) -> bool {
        self.client.era() == Era::Modern
    }

    /// The walker's own parse of each listed tool: its fingerprint and `inputSchema` are kept
    /// (the walker caps tools per walk, so `defs` is bounded too).
    fn definition(&mut self, fingerprint: u64, tool: &Value) {
        let Some(name) = tool.get("name").and_then(Value::as_str) else {
            return;
        };
        self.defs.push((
            kept_name(name).0,
            fingerprint,
            tool.get("inputSchema").cloned(),
        ));
    }

    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let (page, bytes) = tokio::time::timeout(
            REQUEST_TIMEOUT,
            self.client.tools_list_page(cursor, max_bytes),
        )
        .await
        .map_err(|_| McpError::new(mcp_client::mcp::Reason::Timeout, "tools/list timed out"))??;
        Ok((page, bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[tokio::test]
    async fn changed_tools_keep_their_previous_schema_and_labels_are_bounded() {
        let c = Catalog::default();
        let t0 = Instant::now();
        let schema =
            |rev: u64| json!({"type": "object", "properties": {"revision": {"const": rev}}});
        c.apply(
            vec![
                ("search".into(), 1, Some(schema(1))),
                ("gone".into(), 5, None),
            ],
            t0,
        );
        c.apply(vec![("search".into(), 2, Some(schema(2)))], t0);
        let args = json!({"revision": 1});
        let now = Instant::now();
        assert_eq!(
            c.judge("search", &args, t0, Duration::ZERO).await,
            Verdict::StaleSchema
        );
        assert_eq!(
            c.judge("search", &json!({"revision": 2}), t0, Duration::ZERO)
                .await,
            Verdict::Fine
        );
        assert_eq!(
            c.judge("gone", &args, t0, Duration::ZERO).await,
            Verdict::StaleTool
        );
        // A call newer than the catalog waits (here: not at all) for a walk, then judges.
        assert_eq!(
            c.judge("new", &args, now, Duration::ZERO).await,
            Verdict::StaleTool
        );
        assert_eq!(c.tool_label("gone"), "gone", "listed within 24 h");
        assert_eq!(c.tool_label("never"), "other");
        let many: Vec<_> = (0..600)
            .map(|i| (format!("t{i}").into(), i, None))
            .collect();
        c.apply(many, t0);
        assert!(c.state.read().unwrap().listed.len() <= MAX_TOOL_LABELS);
    }

    fn defs(tools: &[Value]) -> Vec<(Box<str>, u64, Option<Value>)> {
        tools
            .iter()
            .map(|t| {
                (
                    t["name"].as_str().unwrap().into(),
                    definition_fingerprint(t),
                    None,
                )
            })
            .collect()
    }

    #[test]
    fn a_listing_that_differs_asks_for_one_walk_and_a_lasting_difference_no_more() {
        let c = Catalog::default();
        let tool = |name: &str, rev: u64| json!({"name": name, "inputSchema": {"const": rev}});
        let (a, b, legacy, v2) = (tool("a", 1), tool("b", 1), tool("legacy", 1), tool("v2", 1));
        let t0 = Instant::now();
        let later = |s: u64| t0 + Duration::from_secs(s);
        c.apply(defs(&[a.clone(), b.clone(), legacy.clone()]), t0);
        assert!(
            !c.saw_page(&[a.clone(), b.clone()], later(1)),
            "the same tools"
        );
        assert!(
            !c.saw_page(std::slice::from_ref(&v2), t0),
            "a listing asked before the catalog's walk teaches nothing"
        );
        assert!(!c.saw_walk(3, later(1)), "a complete walk of as many tools");
        // The swap: a new tool on a page, a changed definition, or fewer tools in a walk.
        assert!(c.saw_page(&[a.clone(), v2.clone()], later(1)));
        assert!(c.pending.load(std::sync::atomic::Ordering::Relaxed));
        assert!(c.saw_page(&[tool("a", 2)], later(1)));
        assert!(c.saw_walk(2, later(1)));
        // A walk that finds the catalog unchanged: the same differences are no evidence.
        c.pending.store(false, std::sync::atomic::Ordering::Relaxed);
        c.apply(defs(&[a.clone(), b.clone(), legacy.clone()]), later(2));
        assert!(!c.saw_page(&[a.clone(), v2.clone()], later(3)));
        assert!(!c.saw_walk(2, later(3)));
        assert!(!c.pending.load(std::sync::atomic::Ordering::Relaxed));
        // Once the catalog changes, clients are listened to again.
        c.apply(defs(&[a.clone(), b.clone()]), later(4));
        assert!(c.saw_page(&[a, v2], later(5)));
        assert!(c.state.read().unwrap().disagreements.len() <= MAX_DISAGREEMENTS);
    }

    #[tokio::test]
    async fn a_verdict_is_fresh_only_when_the_walk_it_waited_for_ended_and_did_not_fail() {
        let c = Catalog::default();
        let t0 = Instant::now();
        c.apply(defs(&[json!({"name": "v2"})]), t0);
        assert_eq!(c.listing().generation, 1);
        let args = json!({});
        assert_eq!(
            c.judge_fresh("legacy", &args, t0, Duration::ZERO).await,
            (Verdict::StaleTool, true),
            "nothing to wait for"
        );
        let call = t0 + Duration::from_millis(1);
        c.state.write().unwrap().refreshing = Some(call);
        assert_eq!(
            c.judge_fresh("legacy", &args, call, Duration::ZERO).await,
            (Verdict::StaleTool, false),
            "the walk under way did not end within the wait"
        );
        c.state.write().unwrap().refreshing = None;
        c.record_failure("kb", Some(("timeout", "tools/list timed out".into())));
        assert_eq!(
            c.judge_fresh("legacy", &args, t0, Duration::ZERO).await,
            (Verdict::StaleTool, false),
            "the last walk failed: the list may be old"
        );
        c.apply(defs(&[json!({"name": "v2"})]), t0);
        assert_eq!(c.listing().generation, 1, "the same list is no change");
    }

    #[tokio::test]
    async fn a_call_of_a_listed_tool_waits_for_the_walk_a_listing_started() {
        let c = Arc::new(Catalog::default());
        let t0 = Instant::now();
        let legacy = json!({"name": "legacy"});
        c.apply(defs(std::slice::from_ref(&legacy)), t0);
        let call = t0 + Duration::from_millis(1);
        // A walk under way, asked for by a listing: the call is judged by its result.
        c.state.write().unwrap().refreshing = Some(call);
        let judged = tokio::spawn({
            let c = c.clone();
            async move {
                c.judge("legacy", &json!({}), call, Duration::from_secs(30))
                    .await
            }
        });
        // (One thread: the judge runs up to its wait before the walk below ends.)
        tokio::task::yield_now().await;
        assert!(!judged.is_finished(), "judged before the walk under way");
        let mut walks = c.walks.subscribe();
        c.apply(defs(&[json!({"name": "v2"})]), call);
        c.state.write().unwrap().refreshing = None;
        c.walks.send_modify(|n| *n += 1);
        let _ = walks.changed().await;
        assert_eq!(judged.await.unwrap(), Verdict::StaleTool);
    }
}
