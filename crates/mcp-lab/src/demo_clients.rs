//! The demo's clients of its proxy: what passive mode exists to see, on a loop.
//!
//! `--demo` runs the proxy `kb_proxy` in front of the lab's knowledge base, which is redeployed
//! every `mcp_exporter::demo::CHURN_PERIOD` (`search_legacy` retired at the first redeploy, `search_v2`'s
//! schema revised at every later one). A proxy without clients shows nothing, so the demo drives it
//! with five, each a legacy-era session of this crate's own client ([`Session::open_as`]) under
//! its own `clientInfo.name`, which becomes the proxy's `client` label:
//!
//! | client            | what it does                                                 | what the proxy shows                 |
//! |-------------------|--------------------------------------------------------------|--------------------------------------|
//! | `demo-correct`    | follows every cursor, re-lists on each `list_changed`        | clean; re-list lag and cursor age    |
//! | `demo-first-page` | one `tools/list` without a cursor, then a call               | first-page-only sessions             |
//! | `demo-cached`     | lists once, keeps calling the search tool and getting the summarize prompt it listed | stale-tool calls on `search_legacy`, stale prompt gets of `summarize_legacy` |
//! | `demo-old-schema` | after a redeploy, calls `search_v2` with the revision it listed | stale-schema calls, no re-list    |
//! | `demo-reconnect`  | lists in its first session only, later sessions just call    | sessions without re-list (reconnect) |
//!
//! Bounded and quiet: every request has a timeout, every loop waits between rounds, and a failed
//! round (the proxy not listening yet, a restart) backs off up to [`MAX_BACKOFF`] with a debug log
//! line only: a demo's background traffic must not fill the operator's log.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use mcp_client::listing::list::List;
use mcp_client::listing::walker::{self, Pager, WalkLimits};
use mcp_client::mcp::http::NotificationStream;
use mcp_client::mcp::{HttpTransport, Inbox, Limits, McpError, ProtocolVersion, Reason, Session};

/// Every request of a demo client.
const TIMEOUT: Duration = Duration::from_secs(5);
/// Between two rounds of one client.
const ROUND: Duration = Duration::from_secs(10);
/// Longest wait for a `list_changed` (more than one churn period: one comes in between).
const CHANGE_WAIT: Duration = Duration::from_secs(45);
/// `demo-correct`'s session ends after this many waits for a change and starts over, so a session
/// the upstream forgot is replaced in bounded time.
const STEPS_PER_SESSION: usize = 30;
/// `demo-cached` keeps its session (and its stale list) for this many calls: an hour.
const CACHED_CALLS: usize = 360;
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
const WALK: WalkLimits = WalkLimits {
    max_pages: 10,
    max_bytes: 1024 * 1024,
};

/// The five clients, each with its own behaviour.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Correct,
    FirstPage,
    Cached,
    OldSchema,
    Reconnect,
}

impl Kind {
    const ALL: [Kind; 5] = [
        Kind::Correct,
        Kind::FirstPage,
        Kind::Cached,
        Kind::OldSchema,
        Kind::Reconnect,
    ];

    fn name(self) -> &'static str {
        match self {
            Kind::Correct => "demo-correct",
            Kind::FirstPage => "demo-first-page",
            Kind::Cached => "demo-cached",
            Kind::OldSchema => "demo-old-schema",
            Kind::Reconnect => "demo-reconnect",
        }
    }
}

/// Start the demo's clients of its proxy at `url` (`mcp_exporter::demo::proxy_url`); they run as long
/// as the runtime.
pub fn spawn(url: url::Url) {
    for kind in Kind::ALL {
        tokio::spawn(run(kind, url.clone()));
    }
}

/// One client's life: rounds, with a pause after each and a growing one after a failure.
async fn run(kind: Kind, url: url::Url) {
    let mut backoff = FIRST_BACKOFF;
    let mut listed_once = false;
    loop {
        let round = async {
            let client = Client::open(&url, kind.name()).await?;
            let outcome = match kind {
                Kind::Correct => correct(&client).await,
                Kind::FirstPage => first_page(&client).await,
                Kind::Cached => cached(&client).await,
                Kind::OldSchema => old_schema(&client).await,
                Kind::Reconnect => reconnect(&client, &mut listed_once).await,
            };
            client.session.close().await;
            outcome
        };
        match round.await {
            Ok(()) => {
                backoff = FIRST_BACKOFF;
                tokio::time::sleep(ROUND).await;
            }
            Err(e) => {
                tracing::debug!(client = kind.name(), reason = %e.reason, "demo client: round failed");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

/// A session with its GET stream read into its inbox (so the proxy forwards `list_changed`).
struct Client {
    session: Session,
    inbox: Arc<Inbox>,
    stream: Option<tokio::task::AbortHandle>,
}

impl Drop for Client {
    fn drop(&mut self) {
        if let Some(s) = &self.stream {
            s.abort();
        }
    }
}

impl Client {
    async fn open(url: &url::Url, name: &str) -> Result<Client, McpError> {
        let transport = Arc::new(HttpTransport::new(url.clone(), &[], Limits::default())?);
        let inbox = Arc::new(Inbox::new().0);
        let session = Session::open_as(
            transport,
            ProtocolVersion::NEWEST_LEGACY,
            inbox.clone(),
            TIMEOUT,
            name,
        )
        .await?;
        let stream = session.open_stream().await?.map(|s| read(s, inbox.clone()));
        Ok(Client {
            session,
            inbox,
            stream,
        })
    }

    /// Every page, following cursors (the probe's own walk); `search_v2`'s definition if listed.
    async fn list_all(&self) -> Result<(Vec<String>, Option<Value>), McpError> {
        let mut pager = Listing {
            session: &self.session,
            search_v2: None,
        };
        let walked = walker::walk(&mut pager, WALK)
            .await
            .result
            .map_err(|e| McpError::new(Reason::InvalidResponse, format!("walk: {}", e.reason())))?;
        let names = walked.items.names().map(str::to_string).collect();
        Ok((names, pager.search_v2))
    }

    /// The keys of every page of `list`, following cursors.
    async fn keys(&self, list: List) -> Result<Vec<String>, McpError> {
        let mut pager = Keys {
            session: &self.session,
            list,
        };
        let walked = walker::walk(&mut pager, WALK)
            .await
            .result
            .map_err(|e| McpError::new(Reason::InvalidResponse, format!("walk: {}", e.reason())))?;
        Ok(walked.items.names().map(str::to_string).collect())
    }

    /// `tools/call`; a careless client's call may well fail, which is the point: only the
    /// transport's failure is an error here.
    async fn call(&self, tool: &str, arguments: Value) -> Result<(), McpError> {
        let params = json!({"name": tool, "arguments": arguments});
        self.careless("tools/call", params).await
    }

    /// A request whose JSON-RPC error is the point (a careless client's use of what it cached).
    async fn careless(&self, method: &str, params: Value) -> Result<(), McpError> {
        match self.session.request(method, Some(params)).await {
            Err(e) if e.rpc_code.is_none() => Err(e),
            _ => Ok(()),
        }
    }

    /// Whether a `list_changed` arrived within [`CHANGE_WAIT`].
    async fn changed(&self) -> bool {
        tokio::time::timeout(CHANGE_WAIT, self.inbox.list_changed())
            .await
            .is_ok()
    }
}

fn read(stream: NotificationStream, inbox: Arc<Inbox>) -> tokio::task::AbortHandle {
    tokio::spawn(async move { stream.run(&inbox).await }).abort_handle()
}

/// Pages through the demo client's session, keeping `search_v2`'s definition.
struct Listing<'a> {
    session: &'a Session,
    search_v2: Option<Value>,
}

impl Pager for Listing<'_> {
    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let (page, bytes) = self.session.tools_list_page(cursor, max_bytes).await?;
        let found = page["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|t| t["name"] == "search_v2");
        if let Some(t) = found {
            self.search_v2 = Some(t.clone());
        }
        Ok((page, bytes))
    }
}

/// Pages any list through the demo client's session.
struct Keys<'a> {
    session: &'a Session,
    list: List,
}

impl Pager for Keys<'_> {
    fn list(&self) -> List {
        self.list
    }

    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        self.session.list_page(self.list, cursor, max_bytes).await
    }
}

/// Follows cursors, re-lists on every `list_changed`, calls a tool it listed.
async fn correct(c: &Client) -> Result<(), McpError> {
    c.list_all().await?;
    for _ in 0..STEPS_PER_SESSION {
        if c.changed().await {
            c.list_all().await?;
        }
        c.call("kb_stats", json!({})).await?;
    }
    Ok(())
}

/// One page, no cursor, then a call: the tools on page 2 do not exist for this client.
async fn first_page(c: &Client) -> Result<(), McpError> {
    let page = c.session.request("tools/list", None).await?;
    let first = page["tools"][0]["name"].as_str().unwrap_or("kb_stats");
    c.call(first, json!({})).await
}

/// Lists tools and prompts once, then keeps calling the search tool and getting the summarize
/// prompt of those lists (`search_legacy` and `summarize_legacy` when it listed before the first
/// redeploy), ignoring every `list_changed`.
async fn cached(c: &Client) -> Result<(), McpError> {
    let (names, _) = c.list_all().await?;
    let search = names
        .iter()
        .find(|n| n.starts_with("search_"))
        .cloned()
        .unwrap_or_else(|| "search_legacy".into());
    let prompts = c.keys(List::Prompts).await?;
    let summarize = prompts.into_iter().find(|n| n.starts_with("summarize"));
    for _ in 0..CACHED_CALLS {
        tokio::time::sleep(ROUND).await;
        c.call(&search, json!({"query": "cached"})).await?;
        if let Some(prompt) = &summarize {
            let params = json!({"name": prompt, "arguments": {"document_id": "42"}});
            c.careless("prompts/get", params).await?;
        }
    }
    Ok(())
}

/// Lists `search_v2` at revision g, hears the redeploy, and calls it with revision g anyway:
/// arguments that fit the previous schema only.
async fn old_schema(c: &Client) -> Result<(), McpError> {
    let (_, search_v2) = c.list_all().await?;
    let revision = search_v2
        .as_ref()
        .and_then(|t| t.pointer("/inputSchema/properties/revision/const"))
        .cloned();
    let Some(revision) = revision else {
        return Ok(()); // still generation 0: search_v2 comes with the first redeploy
    };
    if c.changed().await {
        c.call("search_v2", json!({"query": "old", "revision": revision}))
            .await?;
    }
    Ok(())
}

/// Lists in its first session only; every later session calls without listing.
async fn reconnect(c: &Client, listed_once: &mut bool) -> Result<(), McpError> {
    if !*listed_once {
        c.list_all().await?;
        *listed_once = true;
    }
    c.call("kb_stats", json!({})).await
}
