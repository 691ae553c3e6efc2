//! The daemon: load the configuration, run the supervisor and the web server, reload on SIGHUP
//! or `POST /-/reload`, shut down cleanly on SIGTERM.
//!
//! Every configuration change funnels through one loop here, so a reload from a signal and one
//! from HTTP can never race.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use crate::config::Config;
use crate::probe::Supervisor;
use crate::telemetry::otlp::{self, OtlpOptions};
use crate::telemetry::{Telemetry, catalog};
use crate::web::{self, WebState};

/// How often histogram samples are folded into buckets between scrapes.
const UPKEEP_PERIOD: Duration = Duration::from_secs(5);

/// Where targets come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// A YAML file, re-read on reload.
    File(PathBuf),
    /// The embedded demo lab (fixed configuration).
    Demo,
}

#[derive(Debug, Clone)]
pub struct Options {
    pub source: Source,
    pub listen: String,
    /// Push the measurements to an OpenTelemetry collector too.
    pub otlp: Option<OtlpOptions>,
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

struct Daemon {
    telemetry: Arc<Telemetry>,
    supervisor: Supervisor,
    source: Source,
    demo_config: Option<Config>,
}

impl Daemon {
    fn load(&self) -> Result<Config, String> {
        match (&self.source, &self.demo_config) {
            (Source::Demo, Some(c)) => Ok(c.clone()),
            (Source::File(p), _) => Config::load(p).map_err(|e| e.to_string()),
            (Source::Demo, None) => Err("demo lab is not running".into()),
        }
    }

    fn reload(&mut self) -> Result<(), String> {
        let result = self.load();
        let ok_gauge = self.telemetry.daemon_gauge(catalog::RELOAD_OK);
        match result {
            Ok(config) => {
                let applied = self.supervisor.apply(&config);
                tracing::info!(started = ?applied.started, restarted = ?applied.restarted, stopped = ?applied.stopped, kept = applied.kept.len(), "configuration applied");
                // Valid, but no MCP server is watched: say so (alert McpExporterNoTargets).
                if config.targets.is_empty() {
                    tracing::warn!(
                        stopped = applied.stopped.len(),
                        "configuration has no targets; no MCP server is being watched"
                    );
                }
                ok_gauge.set(1.0);
                let now = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .unwrap_or_default();
                self.telemetry
                    .daemon_gauge(catalog::RELOAD_TIMESTAMP)
                    .set(now.as_secs_f64());
                self.telemetry
                    .daemon_gauge(catalog::TARGETS)
                    .set(config.targets.len() as f64);
                self.telemetry
                    .daemon_counter(catalog::RELOADS, &[("result", "success".into())])
                    .increment(1);
                Ok(())
            }
            Err(e) => {
                tracing::error!(error = %e, "configuration not applied; keeping the running one");
                ok_gauge.set(0.0);
                self.telemetry
                    .daemon_counter(catalog::RELOADS, &[("result", "failure".into())])
                    .increment(1);
                Err(e)
            }
        }
    }
}

/// Run until SIGTERM / SIGINT. Fails fast if the initial configuration is invalid or the listen
/// address cannot be bound.
pub async fn run(opts: Options) -> Result<(), String> {
    let telemetry = Telemetry::new();
    telemetry
        .daemon_counter(catalog::RELOADS, &[("result", "success".into())])
        .absolute(0);
    telemetry
        .daemon_counter(catalog::RELOADS, &[("result", "failure".into())])
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
            crate::lab::demo::start()
                .await
                .map_err(|e| format!("demo lab: {e}"))?,
        ),
        Source::File(_) => None,
    };
    let mut daemon = Daemon {
        telemetry: telemetry.clone(),
        supervisor: Supervisor::new(telemetry.clone()),
        source: opts.source.clone(),
        demo_config: lab.as_ref().map(crate::lab::demo::config),
    };
    if let Some(lab) = &lab {
        tracing::info!(address = %lab.addr(), "demo lab serving the knowledge-base MCP server");
    }
    daemon.reload()?;

    let addr = parse_listen(&opts.listen)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    tracing::info!(address = %listener.local_addr().map_err(|e| e.to_string())?, "listening");
    let (reload_tx, mut reload_rx) = mpsc::channel(4);
    let app = web::router(WebState {
        telemetry: telemetry.clone(),
        reload: reload_tx,
        status: daemon.supervisor.status(),
    });
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, app)
            .with_graceful_shutdown(async move {
                let _ = stop_rx.wait_for(|s| *s).await;
            })
            .await;
    });

    let mut hup = signal(tokio::signal::unix::SignalKind::hangup())?;
    let mut term = signal(tokio::signal::unix::SignalKind::terminate())?;
    let mut upkeep = tokio::time::interval(UPKEEP_PERIOD);
    loop {
        tokio::select! {
            _ = hup.recv() => { let _ = daemon.reload(); }
            Some(reply) = reload_rx.recv() => { let _ = reply.send(daemon.reload()); }
            _ = upkeep.tick() => telemetry.upkeep(),
            _ = term.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    tracing::info!("shutting down");
    let _ = stop_tx.send(true);
    daemon.supervisor.shutdown().await;
    let _ = tokio::time::timeout(Duration::from_secs(5), server).await;
    if let Some(push) = push {
        // The SDK bounds its own flush by the export timeout.
        let _ = tokio::task::spawn_blocking(move || push.shutdown()).await;
    }
    drop(lab);
    Ok(())
}

fn signal(kind: tokio::signal::unix::SignalKind) -> Result<tokio::signal::unix::Signal, String> {
    tokio::signal::unix::signal(kind).map_err(|e| format!("cannot install signal handler: {e}"))
}

/// `mcp_exporter lab`: serve one scenario until SIGTERM / SIGINT.
pub async fn run_lab(
    scenario: crate::lab::scenarios::Scenario,
    listen: String,
) -> Result<(), String> {
    let addr = parse_listen(&listen)?;
    let lab = crate::lab::scenarios::serve(&scenario, addr)
        .await
        .map_err(|e| format!("cannot serve on {addr}: {e}"))?;
    let url = lab.url(scenario.name);
    tracing::info!(scenario = scenario.name, failure_mode = scenario.failure_mode, url = %url, connections = scenario.connections, "lab scenario serving");
    println!("{url}");
    let mut term = signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(())
}
