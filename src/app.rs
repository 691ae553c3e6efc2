//! The daemon: load the configuration, run the supervisor and the web server, reload on SIGHUP
//! or `POST /-/reload` (with `--web.enable-lifecycle`), shut down cleanly on SIGTERM.
//!
//! Startup order matters: signal handlers first (a SIGHUP must never kill a starting process),
//! then the port (a bad or taken address fails before any target is dialed), then the
//! configuration. Every configuration change funnels through one loop here, so a reload from a
//! signal and one from HTTP can never race; files are read and parsed off that loop, so SIGTERM
//! is handled while a parse runs.
//!
//! What runs is the file's static targets merged with what discovery finds, cut to the targets
//! this replica's shard owns. A discovery change takes the same path as a reload of the file
//! (`Supervisor::apply`), so kept targets keep their sessions whichever of the two changed.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::net::TcpListener;
use tokio::signal::unix::{Signal, SignalKind};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::discovery::Discovery;
use crate::probe::{Applied, Supervisor};
use crate::shard::Shard;
use crate::telemetry::otlp::{self, OtlpOptions};
use crate::telemetry::{Telemetry, families};
use crate::web::{self, ReloadRequest, WebState};

/// How often histogram samples are folded into buckets between scrapes.
const UPKEEP_PERIOD: Duration = Duration::from_secs(5);
/// Target names one log line lists per kind (started, restarted, stopped), the rest counted; and
/// bytes of one name shown. A reload of 10,000 targets is one line of at most
/// 3 × 10 × (128 + 2) bytes of names (~4 KB) plus its fixed fields, not 269 KB.
const NAMES_LOGGED: usize = 10;
const NAME_BYTES_LOGGED: usize = 128;

/// Where targets come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A YAML file, re-read on reload.
    File(PathBuf),
    /// The embedded demo lab (fixed configuration).
    Demo,
    /// `mcp_exporter proxy`: one reverse proxy, no targets.
    Proxy(Box<crate::config::McpProxyConfig>),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub source: Source,
    pub listen: String,
    /// Push the measurements to an OpenTelemetry collector too.
    pub otlp: Option<OtlpOptions>,
    /// Timeouts and the connection cap of the exporter's own port.
    pub web: web::Limits,
    /// `--web.config.file`: TLS and authentication of the exporter's own port.
    pub web_config: Option<PathBuf>,
    /// `--web.enable-lifecycle`: serve `POST /-/reload`.
    pub lifecycle: bool,
    /// `--shard.*`: the part of the targets this replica probes.
    pub shard: Shard,
    /// `--metrics.exclude`: probe families left out of `/metrics`.
    pub exclusions: crate::telemetry::Exclusions,
}

/// `--web.listen-address` when not given: every interface.
pub const DEFAULT_LISTEN: &str = ":10117";

/// `--web.listen-address` of `--demo` when not given: loopback only, since the demo is for a
/// first look on one's own machine, not for the network.
pub const DEMO_LISTEN: &str = "127.0.0.1:10117";

/// The address to listen on: the one given, else the default of the mode.
pub fn listen_address(given: Option<String>, demo: bool) -> String {
    given.unwrap_or_else(|| if demo { DEMO_LISTEN } else { DEFAULT_LISTEN }.to_string())
}

/// Parse `:10117`, `0.0.0.0:10117`, `[::1]:10117` or `localhost:10117`.
pub fn parse_listen(addr: &str) -> Result<SocketAddr, String> {
    let full = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.replace("localhost:", "127.0.0.1:")
    };
    full.parse()
        .map_err(|_| format!("--web.listen-address: {addr:?} is not host:port"))
}

/// Where a configuration load reads from.
#[derive(Clone)]
enum Loader {
    File(PathBuf),
    /// The demo lab's configuration, fixed for the life of the process.
    Fixed(Box<Config>),
}

impl Loader {
    /// Read and check the configuration on a blocking thread: a slow file or parse never holds
    /// up the main loop (SIGTERM is handled while it runs).
    fn spawn(&self) -> JoinHandle<Result<Config, String>> {
        let loader = self.clone();
        tokio::task::spawn_blocking(move || match loader {
            Loader::File(p) => Config::load(&p).map_err(|e| e.to_string()),
            Loader::Fixed(c) => Ok(*c),
        })
    }
}

/// Configuration loads: at most one runs at a time. Reloads asked for while one runs are served
/// by one more load after it (the file may have changed since the running one read it).
struct Reloads {
    loader: Loader,
    running: Option<Load>,
    /// Asked for while `running` was under way; `Some(vec![])` for a SIGHUP alone.
    queued: Option<Vec<ReloadRequest>>,
}

/// A load under way and the `POST /-/reload` callers waiting for its outcome.
struct Load {
    task: JoinHandle<Result<Config, String>>,
    callers: Vec<ReloadRequest>,
}

impl Reloads {
    fn new(loader: Loader) -> Self {
        Reloads {
            loader,
            running: None,
            queued: None,
        }
    }

    /// Ask for a load (`caller`: who wants its outcome, if anyone).
    fn request(&mut self, caller: Option<ReloadRequest>) {
        if self.running.is_some() {
            self.queued.get_or_insert_with(Vec::new).extend(caller);
        } else {
            self.running = Some(Load {
                task: self.loader.spawn(),
                callers: caller.into_iter().collect(),
            });
        }
    }

    /// The outcome of the running load and its callers (pending while none runs); starts the
    /// queued load, if any.
    async fn finished(&mut self) -> (Result<Config, String>, Vec<ReloadRequest>) {
        let Some(load) = &mut self.running else {
            return std::future::pending().await;
        };
        let loaded = (&mut load.task)
            .await
            .unwrap_or_else(|e| Err(format!("configuration load did not finish: {e}")));
        let callers = std::mem::take(&mut load.callers);
        self.running = None;
        if let Some(queued) = self.queued.take() {
            self.running = Some(Load {
                task: self.loader.spawn(),
                callers: queued,
            });
        }
        (loaded, callers)
    }
}

struct Daemon {
    telemetry: Arc<Telemetry>,
    supervisor: Supervisor,
    discovery: Discovery,
    shard: Shard,
    /// The configuration applied last (its static targets and discovery sources).
    config: Option<Config>,
    /// Set once a configuration was applied (`/-/ready` reads it): a failed first load has
    /// nothing to keep.
    ready: Arc<AtomicBool>,
    /// The reverse proxies (`proxies:`), applied after each configuration.
    proxies: Arc<crate::proxy::Proxies>,
    /// A configuration was applied whose proxies are not yet.
    proxies_wanted: bool,
}

impl Daemon {
    /// Start, restart and stop proxies to match the applied configuration.
    async fn apply_proxies(&mut self) {
        if !std::mem::take(&mut self.proxies_wanted) {
            return;
        }
        let configs = self
            .config
            .as_ref()
            .map(|c| c.proxies.clone())
            .unwrap_or_default();
        for e in self.proxies.apply(&configs, &self.telemetry).await {
            tracing::error!(error = %e, "proxy not started");
        }
    }
}

impl Daemon {
    /// Whether a configuration was ever applied.
    fn applied(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    fn reload(&mut self, loaded: Result<Config, String>) -> Result<(), String> {
        let ok_gauge = self.telemetry.daemon_gauge(families::RELOAD_OK);
        match loaded {
            Ok(config) => {
                self.discovery.configure(&config);
                let nothing = config.targets.is_empty()
                    && config.file_sd.is_empty()
                    && config.http_sd.is_empty();
                self.config = Some(config);
                let applied = self.apply("configuration applied");
                // Valid, but no MCP server is watched: say so (alert McpExporterNoTargets).
                if nothing {
                    tracing::warn!(
                        stopped = applied.stopped.len(),
                        "configuration has no targets; no MCP server is being watched"
                    );
                }
                self.ready.store(true, Ordering::Relaxed);
                ok_gauge.set(1.0);
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                self.telemetry
                    .daemon_gauge(families::RELOAD_TIMESTAMP)
                    .set(now.as_secs_f64());
                self.telemetry
                    .daemon_counter(families::RELOADS, &[("result", "success".into())])
                    .increment(1);
                Ok(())
            }
            Err(e) => {
                if self.applied() {
                    tracing::error!(error = %e, "configuration not applied; keeping the running one");
                } else {
                    tracing::error!(error = %e, "configuration not loaded; there is none to run");
                }
                ok_gauge.set(0.0);
                self.telemetry
                    .daemon_counter(families::RELOADS, &[("result", "failure".into())])
                    .increment(1);
                Err(e)
            }
        }
    }

    /// Run the static and discovered targets this shard owns (`what`: the log message).
    fn apply(&mut self, what: &str) -> Applied {
        let Some(config) = &self.config else {
            return Applied::default(); // no configuration yet: nothing to merge with
        };
        let shard = self.shard;
        let merged = self
            .discovery
            .merge(&config.targets, |name| shard.owns(name));
        let owned = Config {
            global: config.global.clone(),
            targets: merged.owned,
            ..Config::default()
        };
        let applied = self.supervisor.apply(&owned);
        self.proxies_wanted = true;
        tracing::info!(
            started = applied.started.len(),
            restarted = applied.restarted.len(),
            stopped = applied.stopped.len(),
            kept = applied.kept.len(),
            owned = owned.targets.len(),
            configured = merged.configured,
            started_names = %names_logged(&applied.started),
            restarted_names = %names_logged(&applied.restarted),
            stopped_names = %names_logged(&applied.stopped),
            "{what}"
        );
        self.telemetry
            .daemon_gauge(families::TARGETS)
            .set(owned.targets.len() as f64);
        self.telemetry
            .daemon_gauge(families::TARGETS_CONFIGURED)
            .set(merged.configured as f64);
        applied
    }
}

/// Target names for a log line: bounded in count and bytes (see [`NAMES_LOGGED`]).
fn names_logged(names: &[String]) -> String {
    mcp_client::text::bounded_list(names, NAMES_LOGGED, NAME_BYTES_LOGGED)
}

/// SIGHUP, SIGTERM and SIGINT. Installed before anything else: until then each of them kills
/// the process (a SIGHUP during startup used to end it with status 129).
struct Signals {
    hup: Signal,
    term: Signal,
    int: Signal,
}

impl Signals {
    fn install() -> Result<Self, String> {
        Ok(Signals {
            hup: signal(SignalKind::hangup())?,
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
        })
    }
}

/// Bind the exporter's port. First thing after the signal handlers: a bad or taken address
/// fails in milliseconds, before any target is dialed.
async fn bind(listen: &str) -> Result<TcpListener, String> {
    let addr = parse_listen(listen)?;
    let listener = TcpListener::bind(addr)
        .await
        .map_err(|e| format!("--web.listen-address: cannot listen on {addr}: {e}"))?;
    tracing::info!(address = %listener.local_addr().map_err(|e| e.to_string())?, "listening");
    Ok(listener)
}

/// Run until SIGTERM / SIGINT. Fails fast if the listen address cannot be bound or the initial
/// configuration is invalid.
pub async fn run(opts: Options) -> Result<(), String> {
    let Signals {
        mut hup,
        mut term,
        mut int,
    } = Signals::install()?;
    let web_config = match opts.web_config.filter(|p| !p.as_os_str().is_empty()) {
        Some(path) => {
            let file = web::WebConfigFile::open(path).map_err(|e| e.to_string())?;
            tracing::info!(file = %file.path().display(), tls = file.tls(), "web configuration file loaded");
            Some(Arc::new(file))
        }
        None => None,
    };
    let listener = bind(&opts.listen).await?;
    let excluded = opts.exclusions.names(&crate::telemetry::families::CATALOG);
    if !excluded.is_empty() {
        tracing::info!(families = ?excluded, "metric families left out of /metrics (--metrics.exclude)");
    }
    let telemetry = Telemetry::excluding(opts.exclusions.clone());
    telemetry
        .daemon_counter(families::RELOADS, &[("result", "success".into())])
        .absolute(0);
    telemetry
        .daemon_counter(families::RELOADS, &[("result", "failure".into())])
        .absolute(0);
    // Before any target exists, so that every target's histograms are mirrored.
    let push = match opts.otlp.clone() {
        Some(o) => {
            let t = telemetry.clone();
            let started = tokio::task::spawn_blocking(move || otlp::start(&t, &o))
                .await
                .map_err(|e| format!("OTLP push: {e}"))??;
            Some(started)
        }
        None => None,
    };
    let lab = match opts.source {
        Source::Demo => Some(
            crate::demo::start()
                .await
                .map_err(|e| format!("demo lab: {e}"))?,
        ),
        Source::File(_) | Source::Proxy(_) => None,
    };
    let loader = match (&opts.source, &lab) {
        (Source::File(p), _) => Loader::File(p.clone()),
        (Source::Demo, Some(lab)) => {
            tracing::info!(address = %lab.addr(), "demo lab serving the knowledge-base MCP server");
            Loader::Fixed(Box::new(crate::demo::config(lab)))
        }
        (Source::Demo, None) => return Err("demo lab is not running".into()),
        (Source::Proxy(p), _) => Loader::Fixed(Box::new(Config {
            proxies: vec![(**p).clone()],
            ..Config::default()
        })),
    };
    telemetry
        .daemon_gauge_with(
            families::SHARD_INFO,
            &[
                ("index", opts.shard.index().to_string()),
                ("count", opts.shard.count().to_string()),
            ],
        )
        .set(1.0);
    if opts.shard.count() > 1 {
        tracing::info!(
            index = opts.shard.index(),
            count = opts.shard.count(),
            "sharded: probing only the targets this shard owns"
        );
    }
    let mut daemon = Daemon {
        telemetry: telemetry.clone(),
        supervisor: Supervisor::new(telemetry.clone()),
        discovery: Discovery::new(telemetry.clone()),
        shard: opts.shard,
        config: None,
        ready: Arc::new(AtomicBool::new(false)),
        proxies: crate::proxy::Proxies::new(),
        proxies_wanted: false,
    };

    let (reload_tx, mut reload_rx) = mpsc::channel(4);
    let app = web::router(WebState {
        telemetry: telemetry.clone(),
        reload: reload_tx,
        status: daemon.supervisor.status(),
        ready: daemon.ready.clone(),
        lifecycle: opts.lifecycle,
        scrape_batch_bytes: crate::telemetry::SCRAPE_BATCH_BYTES,
    })
    .merge(crate::proxy::page::routes(daemon.proxies.clone()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(web::serve(
        listener,
        app,
        opts.web,
        web_config,
        telemetry.clone(),
        stop_rx,
    ));

    let mut reloads = Reloads::new(loader);
    reloads.request(None); // the initial load
    let mut upkeep = tokio::time::interval(UPKEEP_PERIOD);
    let outcome = loop {
        tokio::select! {
            _ = hup.recv() => reloads.request(None),
            Some(reply) = reload_rx.recv() => reloads.request(Some(reply)),
            (loaded, callers) = reloads.finished() => {
                let had_one = daemon.applied();
                let result = daemon.reload(loaded);
                daemon.apply_proxies().await;
                if let (false, Err(e)) = (had_one, &result) {
                    break Err(e.clone());
                }
                for caller in callers {
                    let _ = caller.send(result.clone());
                }
            }
            changed = daemon.discovery.next() => if changed {
                daemon.apply("discovered targets changed");
            },
            _ = upkeep.tick() => telemetry.upkeep(),
            _ = term.recv() => break Ok(()),
            _ = int.recv() => break Ok(()),
        }
    };
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    daemon.supervisor.shutdown().await;
    daemon.proxies.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    if let Some(push) = push {
        // The SDK bounds its own flush by the export timeout.
        let _ = tokio::task::spawn_blocking(move || push.shutdown()).await;
    }
    drop(lab);
    outcome
}

fn signal(kind: SignalKind) -> Result<Signal, String> {
    tokio::signal::unix::signal(kind).map_err(|e| format!("cannot install signal handler: {e}"))
}

/// `mcp_exporter lab`: serve one scenario until SIGTERM / SIGINT.
pub async fn run_lab(scenario: mcp_lab::scenarios::Scenario, listen: String) -> Result<(), String> {
    let addr = parse_listen(&listen)?;
    let lab = mcp_lab::scenarios::serve(&scenario, addr)
        .await
        .map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    let url = lab.url(scenario.name);
    tracing::info!(scenario = scenario.name, failure_mode = scenario.failure_mode, url = %url, connections = scenario.connections, era = scenario.behaviour.era.as_str(), "lab scenario serving");
    println!("{url}");
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
