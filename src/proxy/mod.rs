//! Passive mode: an MCP-aware reverse proxy that sees every real client's cached lists (tools,
//! prompts, resources and resource templates).
//!
//! The probe proves what a *correct* client would see; only the server side of real traffic
//! shows which clients are stale: calls to tools no longer listed, cursors never followed, no
//! re-list after `list_changed` or after a reconnect. So each configured proxy listens on its own
//! port, forwards Streamable HTTP faithfully in both eras, and reads the JSON-RPC it carries.
//!
//! One job a module:
//!
//! - [`paths`]: which paths are forwarded (the MCP path, nothing else of the upstream's host);
//! - [`forward`]: one HTTP exchange upstream and back, streamed, with the proxy's own few answers
//!   and its time budgets;
//! - [`requests`]: what an exchange's requests mean for its session, once the upstream's status
//!   is known (and the stale-call judge they start);
//! - [`answers`]: what the upstream's answers mean, read with the requests they answer;
//! - [`relay`]: the answer's body on its way to the client, observed, within its time budget;
//! - [`exchange`]: the exchange as accounted (client, session key, requests, era), read by
//!   forwarding, flattening and healing alike;
//! - [`upstream`]: the client's request as it goes upstream (end-to-end headers only);
//! - [`budget`]: the descriptors the proxies may take, so the exporter's own port keeps answering;
//! - [`observe`]: decoding what passes (the wire's own `jsonrpc` and SSE line framer);
//! - [`sessions`]: per-session state, bounded in number and size, idle expiry, LRU eviction;
//! - [`labels`]: the bounded, safe `client` label;
//! - [`upstream_tools`]: the proxy's own walk of the upstream (the probe's walker), for stale
//!   calls, re-walked at once when a client's listing shows a change it does not know;
//! - [`catalog_lists`]: the same walk's prompts, resources and resource templates, and the rule
//!   that makes a `prompts/get` or `resources/read` stale;
//! - [`list_track`]: what a session did with those lists (cursors, re-lists), per list;
//! - [`unknown_tool`]: the upstream's own "no such tool" answers, in each SDK's shape;
//! - [`schema`]: whether arguments fit an `inputSchema` (stale-schema calls);
//! - [`flatten`]: `flatten_pages`, all pages merged into one for chosen clients;
//! - [`heal`]: `heal: true`, the one active part (off by default): a `list_changed` of the
//!   proxy's own to stale sessions, and calls of removed tools answered by the proxy;
//! - [`seen`]: what healing keeps of each session (two numbers);
//! - [`status`]: what the status page shows; [`page`]: `/proxy` and `/proxy.json`.
//!
//! The series are in [`crate::proxy::metrics`], rendered with the probe's at scrape time.
//! Every channel is read: a legacy session's GET stream and SSE answers, a modern client's
//! `subscriptions/listen` stream, and the deprecated HTTP+SSE transport, whose POSTs are tied to
//! their session by the message URL's `sessionId` and whose answers come on its GET stream.

mod answers;
pub mod budget;
pub mod catalog_lists;
mod exchange;
mod flatten;
mod forward;
pub mod forwarded_paths;
pub mod heal;
pub mod labels;
mod list_track;
pub mod metrics;
pub mod observe;
pub mod page;

mod relay;
mod requests;
pub mod schema;
mod seen;
pub mod sessions;
pub mod status;
pub mod unknown_tool;
mod upstream;
pub mod upstream_tools;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::McpProxyConfig;
use crate::proxy::metrics::ProxyMetrics;
use crate::telemetry::Telemetry;
use labels::ClientLabels;
use sessions::Table;
use upstream_tools::Catalog;

/// Limits of a proxy's listener: the exporter's own accept loop ([`crate::web::serve_detached`]:
/// header-read timeout, idle timeout, connection cap with eviction of the longest-waiting
/// connection), with the proxy's own idle timeout (`stream_idle_timeout`: GET and listen streams
/// may be quiet for minutes between events; never shorter than `upstream_timeout`, which a
/// request waiting for its answer may take) and its cap after the file-limit check
/// ([`budget`]). Its connections are not counted as the exporter's port's.
fn listener_limits(config: &McpProxyConfig, max_connections: usize) -> crate::web::Limits {
    crate::web::Limits {
        header_read_timeout: crate::web::DEFAULT_HEADER_READ_TIMEOUT,
        idle_timeout: config.stream_idle_timeout.max(config.upstream_timeout),
        max_connections,
    }
}

/// What the handlers of one proxy share.
pub(crate) struct Shared {
    config: McpProxyConfig,
    metrics: Arc<ProxyMetrics>,
    labels: ClientLabels,
    paths: forwarded_paths::Paths,
    sessions: Mutex<Table>,
    /// Woken when the table dropped an upstream session that is to be ended there.
    dropped: tokio::sync::Notify,
    /// Permits of the calls being judged stale or not (see `requests::MAX_JUDGING`).
    judging: Arc<tokio::sync::Semaphore>,
    catalog: Arc<Catalog>,
    /// The streams healing may write to (empty unless `heal`).
    heal: heal::Heal,
    http: reqwest::Client,
    /// Itself, for tasks spawned from a handler.
    me: Weak<Shared>,
}

/// One running proxy.
pub struct Proxy {
    shared: Arc<Shared>,
    addr: SocketAddr,
    /// The listener's connection cap, after the file-limit check.
    max_connections: usize,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    telemetry: Arc<Telemetry>,
}

impl Proxy {
    /// Bind `config.listen` and start forwarding; the catalog walk and the sweep start too. The
    /// listener's cap is `config.max_connections`, lowered to what the open-files limit leaves
    /// (see [`budget`]; [`Proxies`] shares that among all proxies).
    pub async fn start(config: McpProxyConfig, telemetry: Arc<Telemetry>) -> Result<Proxy, String> {
        let cap = budget::caps(&[config.max_connections], budget::open_files_limit())
            .map_err(|e| format!("proxy {}: {e}", config.name))?[0];
        Self::start_capped(config, cap, telemetry).await
    }

    async fn start_capped(
        config: McpProxyConfig,
        max_connections: usize,
        telemetry: Arc<Telemetry>,
    ) -> Result<Proxy, String> {
        let listener = TcpListener::bind(config.listen).await.map_err(|e| {
            format!(
                "proxy {}: cannot listen on {}: {e}",
                config.name, config.listen
            )
        })?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        // The hop to the upstream is the proxy's own connection: its `tls_config` (roots,
        // server_name, a client certificate the upstream demands) and `proxy_url` serve the
        // clients' forwarded requests and the catalog alike, or no client could pass.
        let http = mcp_client::target_http::build_client(&config.http.tls, &config.http.proxy)
            .map_err(|e| format!("proxy {}: {e}", config.name))?;
        // The catalog session's own credentials (the target's code path); never used for
        // clients' requests, which go through `http` with their own headers.
        let catalog_net =
            mcp_client::target_http::TargetHttp::new(&config.name, &config.http, &config.upstream)
                .map_err(|e| format!("proxy {}: catalog credentials: {e}", config.name))?;
        let metrics = telemetry.add_proxy(&config.name);
        metrics.set_heal(config.heal);
        let shared = Arc::new_cyclic(|me| Shared {
            labels: ClientLabels::new(
                config.max_clients,
                config.flatten_pages.clone(),
                metrics.clone(),
                config.client_idle_timeout,
            ),
            paths: forwarded_paths::Paths::new(&config.upstream, config.forward_oauth_metadata),
            sessions: Mutex::new(Table::new(config.max_sessions, metrics.clone())),
            dropped: tokio::sync::Notify::new(),
            judging: Arc::new(tokio::sync::Semaphore::new(requests::MAX_JUDGING)),
            catalog: Arc::new(Catalog::default()),
            heal: heal::Heal::default(),
            metrics,
            http,
            config,
            me: me.clone(),
        });
        let (stop, stop_rx) = watch::channel(false);
        let app = Router::new()
            .fallback(forward::handle)
            .with_state(shared.clone());
        let mut tasks = vec![tokio::spawn(crate::web::serve_detached(
            listener,
            app,
            listener_limits(&shared.config, max_connections),
            stop_rx.clone(),
        ))];
        tasks.push(tokio::spawn(shared.catalog.clone().run(
            shared.config.name.clone(),
            shared.config.upstream.clone(),
            catalog_net,
            shared.config.headers.clone(),
            shared.config.catalog_refresh_interval,
            shared.metrics.clone(),
            stop_rx.clone(),
        )));
        if shared.config.heal {
            tasks.push(tokio::spawn(heal::run(shared.clone(), stop_rx.clone())));
        }
        tasks.push(tokio::spawn(sweep(shared.clone(), stop_rx)));
        tracing::info!(proxy = %shared.config.name, address = %addr, upstream = %crate::config::redact_url(&shared.config.upstream), max_connections, "proxy listening");
        Ok(Proxy {
            shared,
            addr,
            max_connections,
            stop,
            tasks,
            telemetry,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn config(&self) -> &McpProxyConfig {
        &self.shared.config
    }

    /// Stop listening, end the catalog session, and remove the proxy's series.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
        self.telemetry.remove_proxy(&self.shared.metrics);
    }
}

/// Settle deadlines and idle sessions every second (or the shortest grace, if shorter).
async fn sweep(sh: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    let c = &sh.config;
    let period = Duration::from_secs(1)
        .min(c.cursor_grace)
        .min(c.relist_grace)
        .max(Duration::from_millis(50));
    loop {
        // A dropped upstream session wakes this at once (not only the next tick), so a flood of
        // new sessions is met by DELETEs as it comes and the upstream's count stays near the cap.
        let tick = tokio::select! {
            _ = tokio::time::sleep(period) => true,
            _ = sh.dropped.notified() => false,
            _ = stop.wait_for(|s| *s) => return,
        };
        if tick {
            sh.labels.expire(Instant::now());
        }
        let to_close = {
            let mut table = sh.sessions.lock().expect("sessions lock");
            if tick {
                table.sweep(
                    Instant::now(),
                    c.session_idle_timeout,
                    c.cursor_grace,
                    c.relist_grace,
                );
            }
            table.take_to_close()
        };
        end_upstream(&sh, to_close).await;
    }
}

/// Most upstream sessions ended at once, and most ended per sweep: the rest are left to the
/// upstream's own idle expiry (a flood of evictions must not turn into a flood of requests).
const END_CONCURRENCY: usize = 16;
const END_PER_SWEEP: usize = 2_000;
/// Time one `DELETE` of a dropped session may take.
const END_TIMEOUT: Duration = Duration::from_secs(5);

/// End at the upstream the sessions the proxy stopped tracking (see [`sessions`]). Best effort:
/// the client's credentials are never kept, so an upstream that wants them for `DELETE` refuses
/// and expires the session itself.
async fn end_upstream(sh: &Shared, ids: Vec<Box<str>>) {
    use futures_util::StreamExt as _;
    futures_util::stream::iter(ids.into_iter().take(END_PER_SWEEP))
        .for_each_concurrent(END_CONCURRENCY, |id| async move {
            let sent = sh
                .http
                .delete(sh.config.upstream.clone())
                .header("mcp-session-id", &*id)
                .timeout(END_TIMEOUT)
                .send()
                .await;
            if let Err(e) = sent {
                tracing::debug!(proxy = %sh.config.name, error = %mcp_client::text::bounded(&e.without_url().to_string(), 200), "ending a dropped session upstream failed");
            }
        })
        .await;
}

/// The running proxies, by name: what `app` applies configurations to and the status page reads.
#[derive(Default)]
pub struct Proxies {
    running: RwLock<BTreeMap<String, Arc<Shared>>>,
    handles: tokio::sync::Mutex<BTreeMap<String, Proxy>>,
}

impl Proxies {
    pub fn new() -> Arc<Self> {
        Arc::new(Proxies::default())
    }

    /// Run exactly `configs`: new proxies start, changed ones restart, removed ones stop (their
    /// series disappear). Errors (a port taken, a file limit too low for any proxy) name the
    /// proxy; the others still apply. The connection caps are shared out under the open-files
    /// limit ([`budget`]); a proxy whose share changed restarts too.
    pub async fn apply(
        &self,
        configs: &[McpProxyConfig],
        telemetry: &Arc<Telemetry>,
    ) -> Vec<String> {
        let limit = budget::open_files_limit();
        let wanted: Vec<usize> = configs.iter().map(|c| c.max_connections).collect();
        let (configs, caps) = match budget::caps(&wanted, limit) {
            Ok(caps) => (configs, caps),
            Err(e) => {
                let errors = configs
                    .iter()
                    .map(|c| format!("proxy {}: {e}", c.name))
                    .collect();
                self.apply_capped(&[], &[], telemetry).await;
                return errors;
            }
        };
        for (c, cap) in configs.iter().zip(&caps) {
            if *cap < c.max_connections {
                tracing::warn!(proxy = %c.name, configured = c.max_connections, max_connections = cap, open_files_limit = limit.unwrap_or_default(), reserved = budget::RESERVE_FDS, "proxy max_connections lowered to fit the open-files limit ({} descriptors per connection, the reserve kept for the exporter's own port and probes)", budget::FDS_PER_CONNECTION);
            }
        }
        self.apply_capped(configs, &caps, telemetry).await
    }

    async fn apply_capped(
        &self,
        configs: &[McpProxyConfig],
        caps: &[usize],
        telemetry: &Arc<Telemetry>,
    ) -> Vec<String> {
        let mut handles = self.handles.lock().await;
        let mut errors = Vec::new();
        let names: Vec<&str> = configs.iter().map(|c| c.name.as_str()).collect();
        let stale: Vec<String> = handles
            .iter()
            .filter(|(name, p)| {
                !configs.iter().zip(caps).any(|(c, cap)| {
                    c.name == **name && c == p.config() && *cap == p.max_connections
                }) || !names.contains(&name.as_str())
            })
            .map(|(n, _)| n.clone())
            .collect();
        for name in stale {
            if let Some(p) = handles.remove(&name) {
                self.running.write().expect("proxies lock").remove(&name);
                p.stop().await;
            }
        }
        for (c, cap) in configs.iter().zip(caps) {
            if handles.contains_key(&c.name) {
                continue;
            }
            match Proxy::start_capped(c.clone(), *cap, telemetry.clone()).await {
                Ok(p) => {
                    self.running
                        .write()
                        .expect("proxies lock")
                        .insert(c.name.clone(), p.shared.clone());
                    handles.insert(c.name.clone(), p);
                }
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    /// Stop every proxy.
    pub async fn shutdown(&self) {
        self.apply(&[], &Telemetry::new()).await;
    }

    /// The address proxy `name` listens on, once it runs.
    pub async fn addr(&self, name: &str) -> Option<SocketAddr> {
        self.handles.lock().await.get(name).map(Proxy::addr)
    }

    fn snapshot(&self) -> Vec<Arc<Shared>> {
        self.running
            .read()
            .expect("proxies lock")
            .values()
            .cloned()
            .collect()
    }
}
