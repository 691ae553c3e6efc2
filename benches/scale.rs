//! Scale benchmark (not a test: it prints numbers and asserts nothing). Three phases, two more on
//! request, one run:
//!
//! 1. **Walk CPU, side by side with a floor.** A small exporter walks one lab target on 10
//!    connections every second (10 walks/s); at the same time a *floor* client, this binary
//!    re-run as its own process (`--floor`), does the same two `tools/list` POSTs per walk (same
//!    headers and `_meta`, bodies parsed as JSON) at the same rate, sleeping between walks as the
//!    exporter does. Each side's CPU over the window is divided by its walks: the exporter's from
//!    `/proc` and its metrics (everything it does counts: listen streams, timers, telemetry), the
//!    floor's from `getrusage` around its loop (its start-up is not counted). Both labs of phases
//!    1 and 2 serve tools only, as the floor walks them (whatever `--tools-only` says). With
//!    `--sse-answers` phase 1's lab answers each POST as a one-event `text/event-stream`, as the
//!    Python and TypeScript SDKs' servers do by default, and the floor takes the event's `data`.
//! 2. **Refresh latency.** The same exporter also watches a second lab; each change there sends
//!    `list_changed`, and the latency is the exporter's own
//!    `mcp_probe_cache_last_refresh_timestamp_seconds` minus the wall time of the change, so the
//!    polling of `/metrics` does not add to it.
//! 3. **Scale.** The release exporter probes `--connections` lab connections (`--targets` of them
//!    share them out) with `--audit` audits; the run waits (bounded) until every connection is
//!    up, then samples RSS, CPU, `/metrics` (time and size) and the exporter's TCP sockets over
//!    `--seconds`, and sums the request failures the exporter recorded.
//! 4. **Storm** (`--storm N`, after phase 3, same exporter). The first N targets are served by a
//!    lab of their own (the rest by a second lab), so one redeploy of that lab changes the list
//!    of exactly those N targets at one instant and sends `list_changed` on each of their
//!    connections' notification streams. Per connection, latency is its
//!    `mcp_probe_cache_last_refresh_timestamp_seconds` minus the wall time of the change; one
//!    still older than the change at the deadline (`--storm-deadline`) is missed. Also the
//!    exporter's CPU over the storm, the `tools/list` pages the lab answered, and the new TCP
//!    connections the exporter opened to the labs (socket inodes seen during the storm that were
//!    not there before it, sampled every 100 ms: a lower bound). `--storms K` repeats it, 10 s
//!    apart (past twice the pool's 4 s idle timeout, so each starts from the same steady state).
//!    With `--floor-storm`, each storm is followed by the *floor's* storm: a bare client (this
//!    binary re-run as `--floor-storm`, its own process on a runtime of as many workers as the
//!    exporter's) walks the same lists of the same connections' URLs all at once (a connection's
//!    lists one after the other, the tools first, as the exporter's connections do), with no
//!    notification to wait for, once to open its connections and once more a storm gap later
//!    (measured, its pool then as warm as the exporter's); per connection, the time from the
//!    start to its tool list walked. What a storm costs any client on this box.
//! 5. **Churn soak** (`--soak-minutes M`, after phase 4, same exporter). Every target's list
//!    changes every `--soak-change` (all labs at one instant, the first half a period in, so
//!    samples a multiple of it apart fall midway between changes; a sample due with a change is
//!    taken first); every `--soak-sample` the exporter's RSS and CPU, and from a scrape: connections
//!    up, request failures, `list_changed` received, and how many connections refreshed their
//!    cache after the latest change.
//!
//! ```sh
//! cargo bench --bench scale -- --connections 1000
//! cargo bench --bench scale -- --connections 10000 --targets 1000 --seconds 60 --audit 30s
//! cargo bench --bench scale -- --connections 200 --exporter /tmp/old/mcp_exporter  # before/after
//! cargo bench --bench scale -- --connections 1000 --storm 1000 --storms 5 --soak-minutes 10
//! cargo bench --bench scale -- --connections 1000 --tools-only  # servers without other lists
//! cargo bench --bench scale -- --connections 1000 --storm 1000 --floor-storm  # beside a bare client
//! cargo bench --bench scale -- --connections 200 --sse-answers  # phase 1 answered as SSE
//! cargo bench --bench scale -- --connections 200 --walk-url http://127.0.0.1:8000/mcp  # a real server
//! cargo bench --bench scale -- --connections 200 --walk-legacy --walk-url …  # in a 2025 session
//! ```
//!
//! The fleet's servers (the lab) list prompts, resources and resource templates beside their
//! tools, and every connection walks and audits each; `--tools-only` serves the tools alone, as
//! the figures before those lists were watched were measured.
//!
//! The labs run in this process; each exporter and the floor are processes of their own, so
//! their RSS and CPU are their own. On a shared box run before/after side by side and read
//! medians.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use mcp_client::listing::list::List;
use mcp_client::net::http_config::IdleTimeout;
use mcp_lab::{Behaviour, Lab};

mod common;
use common::{
    args_or_exit, free_port, proc_cpu, proc_sample, quantile, runtime, spawn_exporter, sum,
};

/// What the run was asked for.
struct Args {
    connections: usize,
    targets: usize,
    seconds: u64,
    audit: Duration,
    ping: Duration,
    scrapes: usize,
    changes: usize,
    walk_seconds: u64,
    exporter: PathBuf,
    /// Targets a storm changes at once (0: no storm).
    storm: usize,
    storms: usize,
    storm_deadline: Duration,
    /// Length of the churn soak (0: none).
    soak: Duration,
    soak_change: Duration,
    soak_sample: Duration,
    /// `legacy_clients` for every target (the default, true: connection 0 of a modern target
    /// also keeps a legacy session and its GET stream).
    legacy_clients: bool,
    /// The fleet's servers list tools only (`--tools-only`); by default they also declare and
    /// list prompts, resources and resource templates, which every connection then walks.
    tools_only: bool,
    /// Phase 1's server answers every POST as a one-event `text/event-stream` (`--sse-answers`),
    /// as the Python SDK's and the TypeScript SDK's servers do by default; the floor reads them
    /// as a bare client would.
    sse_answers: bool,
    /// Phase 1 walks this server instead of the lab (`--walk-url`): a real SDK's, say.
    walk_url: Option<String>,
    /// Phase 1 in the legacy era (`--walk-legacy`): both sides open a 2025-11-25 session and
    /// walk in it, where the official SDKs' servers answer POSTs as SSE by default.
    walk_legacy: bool,
    /// Every target of the fleet is an origin of its own (`--origins`): its URL names a loopback
    /// address of its own (127.1.x.y), as a fleet of separate servers would, so each target has
    /// its own request connections instead of the whole fleet sharing one pool to the lab.
    origins: bool,
    /// `idle_connection_timeout` for every target (`--idle-connection-timeout D`; unset: the
    /// default).
    idle: Option<Duration>,
    /// After each storm, a bare client's storm of the same walks (`--floor-storm`).
    floor_storm: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        connections: 1000,
        targets: 0,
        seconds: 60,
        audit: Duration::from_secs(30),
        ping: Duration::from_secs(15),
        scrapes: 7,
        changes: 50,
        walk_seconds: 20,
        exporter: PathBuf::from(env!("CARGO_BIN_EXE_mcp_exporter")),
        storm: 0,
        storms: 3,
        storm_deadline: Duration::from_secs(10),
        soak: Duration::ZERO,
        soak_change: Duration::from_secs(30),
        soak_sample: Duration::from_secs(60),
        legacy_clients: true,
        tools_only: false,
        sse_answers: false,
        walk_url: None,
        walk_legacy: false,
        origins: false,
        idle: None,
        floor_storm: false,
    };
    let mut it = common::bench_args();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        let number = |v: String| v.parse::<usize>().map_err(|e| format!("{flag}: {e}"));
        let duration =
            |v: String| humantime::parse_duration(&v).map_err(|e| format!("{flag}: {e}"));
        match flag.as_str() {
            "--connections" => a.connections = number(value()?)?,
            "--targets" => a.targets = number(value()?)?,
            "--seconds" => a.seconds = number(value()?)? as u64,
            "--audit" => a.audit = duration(value()?)?,
            "--ping" => a.ping = duration(value()?)?,
            "--scrapes" => a.scrapes = number(value()?)?.max(1),
            "--changes" => a.changes = number(value()?)?,
            "--walk-seconds" => a.walk_seconds = number(value()?)? as u64,
            "--exporter" => a.exporter = PathBuf::from(value()?),
            "--storm" => a.storm = number(value()?)?,
            "--storms" => a.storms = number(value()?)?.max(1),
            "--storm-deadline" => a.storm_deadline = duration(value()?)?,
            "--soak-minutes" => {
                let v = value()?;
                let minutes = v.parse::<f64>().map_err(|e| format!("{flag}: {e}"))?;
                a.soak = Duration::try_from_secs_f64(minutes * 60.0)
                    .map_err(|e| format!("{flag}: {e}"))?;
            }
            "--soak-change" => a.soak_change = duration(value()?)?,
            "--soak-sample" => a.soak_sample = duration(value()?)?,
            "--no-legacy-clients" => a.legacy_clients = false,
            "--tools-only" => a.tools_only = true,
            "--sse-answers" => a.sse_answers = true,
            "--walk-url" => a.walk_url = Some(value()?),
            "--walk-legacy" => a.walk_legacy = true,
            "--origins" => a.origins = true,
            "--idle-connection-timeout" => a.idle = Some(duration(value()?)?),
            "--floor-storm" => a.floor_storm = true,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.targets == 0 {
        a.targets = a.connections;
    }
    if a.targets == 0 || !a.connections.is_multiple_of(a.targets) || a.connections / a.targets > 16
    {
        return Err(
            "--connections must be a multiple of --targets, at most 16 connections a target".into(),
        );
    }
    if a.storm > a.targets {
        return Err("--storm is a number of targets, at most --targets".into());
    }
    if a.soak_change.is_zero() || a.soak_sample.is_zero() {
        return Err("--soak-change and --soak-sample must be above zero".into());
    }
    Ok(a)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("--floor") => return floor_main(&args[2..]),
        Some("--floor-storm") => return floor_storm_main(&args[2..]),
        _ => {}
    }
    let args = args_or_exit("scale", parse_args());
    // One worker for the labs, as the soak does.
    runtime(1).block_on(run(args));
}

async fn run(args: Args) {
    let dir = std::env::temp_dir().join(format!("mcp_exporter_scale_{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let http = reqwest::Client::new();
    println!(
        "# scale: {} connections ({} targets x {}), audit {:?}, ping {:?}, storm {} targets x {}, soak {:?} (a change every {:?}), legacy_clients {}, tools_only {}, exporter {}\n",
        args.connections,
        args.targets,
        args.connections / args.targets,
        args.audit,
        args.ping,
        args.storm,
        if args.storm > 0 { args.storms } else { 0 },
        args.soak,
        args.soak_change,
        args.legacy_clients,
        args.tools_only,
        args.exporter.display()
    );
    let side = side_by_side(&args, &dir, &http).await;
    let fleet = Fleet::start(&args, &dir, &http).await;
    let scale = scale(&args, &fleet, &http).await;
    let mut storms = Vec::new();
    let mut floor_storms = Vec::new();
    for k in 0..if args.storm > 0 { args.storms } else { 0 } {
        if k > 0 {
            tokio::time::sleep(STORM_GAP).await;
        }
        storms.push(storm(&args, &fleet, &http).await);
        if args.floor_storm {
            floor_storms.push(floor_storm(&args, &fleet).await);
        }
    }
    let soak = if args.soak.is_zero() {
        Vec::new()
    } else {
        soak(&args, &fleet, &http).await
    };
    drop(fleet);
    print_report(&args, &side, &scale);
    print_storms(&args, &storms);
    print_floor_storms(&storms, &floor_storms);
    print_soak(&args, &soak);
    let _ = std::fs::remove_dir_all(&dir);
}

fn loopback() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// An exporter process, killed when dropped.
struct Exporter {
    child: Child,
    metrics: String,
    port: u16,
}

impl Exporter {
    fn start(binary: &Path, config: &Path) -> Exporter {
        let port = free_port();
        let child = spawn_exporter(binary, config, port);
        Exporter {
            child,
            metrics: format!("http://127.0.0.1:{port}/metrics"),
            port,
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// One scrape: its text and how long it took (`None`: failed or over 60 s).
    async fn scrape(&self, http: &reqwest::Client) -> Option<(String, Duration)> {
        let t = Instant::now();
        let resp = http
            .get(&self.metrics)
            .timeout(Duration::from_secs(60))
            .send()
            .await
            .ok()?;
        let text = resp.text().await.ok()?;
        Some((text, t.elapsed()))
    }

    /// Scrape until `sum(mcp_probe_connection_up) >= want`, for at most `limit`. Returns when.
    async fn wait_up(
        &self,
        http: &reqwest::Client,
        want: usize,
        limit: Duration,
    ) -> Option<Duration> {
        let start = Instant::now();
        while start.elapsed() < limit {
            if let Some((text, took)) = self.scrape(http).await {
                if sum(&text, "mcp_probe_connection_up", "") >= want as f64 {
                    return Some(start.elapsed());
                }
                tokio::time::sleep(took.max(Duration::from_millis(200))).await;
            } else {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        None
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Largest sample of `family` whose labels contain `labels`.
fn max(text: &str, family: &str, labels: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(family) && l[family.len()..].starts_with('{'))
        .filter(|l| l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .reduce(f64::max)
}

fn wall_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Phases 1 and 2.
struct SideBySide {
    exporter_walks: f64,
    exporter_cpu: f64,
    floor_walks: f64,
    floor_cpu: f64,
    window: Duration,
    refresh_ms: Vec<f64>,
    refresh_missed: usize,
}

/// Walks per second on both sides of phase 1 (one audit per connection per second).
const WALK_RATE: u32 = 10;

async fn side_by_side(args: &Args, dir: &Path, http: &reqwest::Client) -> SideBySide {
    // Tools only: the floor walks `tools/list`, so the exporter's side must walk nothing else
    // (a server with other lists costs one walk of each per audit, measured in phase 2).
    let tools_only = || Behaviour {
        prompts_and_resources: false,
        ..Behaviour::default()
    };
    let walked = Behaviour {
        sse_responses: args.sse_answers,
        ..tools_only()
    };
    // A server named with `--walk-url` is walked instead of a lab of its own; the lab, when
    // started, lives to the end of the phase.
    let walk_lab;
    let walk_url = match &args.walk_url {
        Some(url) => url.clone(),
        None => {
            walk_lab = Lab::start(loopback(), vec![("walk".into(), walked)])
                .await
                .expect("lab starts");
            walk_lab.url("walk").to_string()
        }
    };
    let refresh_lab = Lab::start(loopback(), vec![("refresh".into(), tools_only())])
        .await
        .expect("lab starts");
    let (era, version) = if args.walk_legacy {
        ("legacy", "2025-11-25")
    } else {
        ("modern", "auto")
    };
    let config = dir.join("side.yml");
    let yml = format!(
        "global:\n  ping_interval: 1h\ntargets:\n  - name: walk\n    url: {walk_url}\n    connections: {WALK_RATE}\n    audit_interval: 1s\n    lists: [tools]\n    protocol_version: {version}\n  - name: refresh\n    url: {}\n    audit_interval: 1h\n",
        refresh_lab.url("refresh"),
    );
    std::fs::write(&config, yml).expect("config written");
    let exporter = Exporter::start(&args.exporter, &config);
    let pid = exporter.pid();
    if exporter
        .wait_up(http, WALK_RATE as usize + 1, Duration::from_secs(30))
        .await
        .is_none()
    {
        eprintln!("scale: the side-by-side exporter did not come up within 30 s");
    }
    // Let the opening walks and start-up settle.
    tokio::time::sleep(Duration::from_secs(3)).await;

    // Phase 1: both sides for the same window.
    let walks = |text: &str| sum(text, "mcp_probe_tools_list_walks_total", "target=\"walk\"");
    let before = exporter.scrape(http).await.map(|(t, _)| walks(&t));
    let cpu_before = proc_cpu(pid);
    let t0 = Instant::now();
    let report = run_self([
        "--floor".to_string(),
        walk_url.clone(),
        WALK_RATE.to_string(),
        args.walk_seconds.to_string(),
        era.to_string(),
    ])
    .await;
    let window = t0.elapsed();
    let cpu_after = proc_cpu(pid);
    let after = exporter.scrape(http).await.map(|(t, _)| walks(&t));
    let (floor_walks, floor_cpu) = (report_field(&report, "walks"), report_field(&report, "cpu"));
    let exporter_walks = match (before, after) {
        (Some(b), Some(a)) => a - b,
        _ => f64::NAN,
    };
    let exporter_cpu = match (cpu_before, cpu_after) {
        (Some(b), Some(a)) => a - b,
        _ => f64::NAN,
    };

    // Phase 2: refresh latency on the same exporter.
    let refreshed = |text: &str| {
        max(
            text,
            "mcp_probe_cache_last_refresh_timestamp_seconds",
            "target=\"refresh\"",
        )
        .unwrap_or(0.0)
    };
    let mut last = match exporter.scrape(http).await {
        Some((t, _)) => refreshed(&t),
        None => 0.0,
    };
    let mut refresh_ms = Vec::new();
    let mut refresh_missed = 0;
    for i in 0..args.changes {
        let changed_at = wall_now();
        refresh_lab.churn();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut seen = None;
        while Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
            if let Some((text, _)) = exporter.scrape(http).await {
                let at = refreshed(&text);
                if at > last {
                    last = at;
                    seen = Some(at);
                    break;
                }
            }
        }
        match seen {
            Some(at) => refresh_ms.push((at - changed_at) * 1000.0),
            None => refresh_missed += 1,
        }
        // Changes a little apart, never in step with a timer.
        tokio::time::sleep(Duration::from_millis(150 + (i as u64 * 37) % 100)).await;
    }
    drop(exporter);
    SideBySide {
        exporter_walks,
        exporter_cpu,
        floor_walks,
        floor_cpu,
        window,
        refresh_ms,
        refresh_missed,
    }
}

/// What phases 3 to 5 share: the exporter probing `--connections` lab connections. The first
/// `--storm` targets are served by a lab of their own, `labs[0]`, so that redeploying it changes
/// their lists and no other (a lab redeploys all its profiles at once); the rest by `labs[1]`.
/// Without a storm, or when it takes every target, there is one lab.
struct Fleet {
    exporter: Exporter,
    labs: Vec<Lab>,
    /// Names of the targets on `labs[0]` when there is a storm.
    stormed: HashSet<String>,
    /// A file of the URL of each connection of those targets, a line each (a target's URL once
    /// per connection): what the floor's storm walks.
    stormed_urls: PathBuf,
    up_after: Option<Duration>,
}

impl Fleet {
    async fn start(args: &Args, dir: &Path, http: &reqwest::Client) -> Fleet {
        let per_target = args.connections / args.targets;
        let names: Vec<String> = (0..args.targets).map(|i| format!("t{i:05}")).collect();
        let (stormed, quiet) = names.split_at(args.storm);
        let mut labs = Vec::new();
        for group in [stormed, quiet] {
            if group.is_empty() {
                continue;
            }
            let served = Behaviour {
                prompts_and_resources: !args.tools_only,
                ..Behaviour::default()
            };
            let profiles = group.iter().map(|n| (n.clone(), served.clone())).collect();
            // Listening on every address takes the whole 127.0.0.0/8 that `--origins` names.
            let bind = if args.origins {
                SocketAddr::from(([0, 0, 0, 0], 0))
            } else {
                loopback()
            };
            labs.push(Lab::start(bind, profiles).await.expect("lab starts"));
        }
        let config = dir.join("scale.yml");
        let mut yml = format!(
            "global:\n  audit_interval: {}\n  ping_interval: {}\n  legacy_clients: {}\n",
            humantime::format_duration(args.audit),
            humantime::format_duration(args.ping),
            args.legacy_clients
        );
        if let Some(idle) = args.idle {
            let idle = humantime::format_duration(idle);
            yml.push_str(&format!("  idle_connection_timeout: {idle}\n"));
        }
        yml.push_str("targets:\n");
        let mut stormed_urls = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let lab = &labs[usize::from(i >= args.storm && args.storm > 0)];
            let url = if args.origins {
                let (port, (a, b)) = (lab.addr().port(), (i / 250, i % 250 + 1));
                format!("http://127.1.{a}.{b}:{port}/{name}/mcp")
            } else {
                lab.url(name).to_string()
            };
            yml.push_str(&format!(
                "  - name: {name}\n    url: {url}\n    connections: {per_target}\n"
            ));
            if i < args.storm {
                stormed_urls.extend(std::iter::repeat_n(url, per_target));
            }
        }
        std::fs::write(&config, yml).expect("config written");
        let urls_file = dir.join("stormed_urls.txt");
        std::fs::write(&urls_file, stormed_urls.join("\n")).expect("URLs written");
        let exporter = Exporter::start(&args.exporter, &config);
        let limit = args.audit + Duration::from_secs(120);
        let up_after = exporter.wait_up(http, args.connections, limit).await;
        if up_after.is_none() {
            eprintln!("scale: not every connection was up after {limit:?}; sampling anyway");
        }
        Fleet {
            exporter,
            labs,
            stormed: stormed.iter().cloned().collect(),
            stormed_urls: urls_file,
            up_after,
        }
    }

    /// TCP connections the labs have accepted so far.
    fn accepted(&self) -> u64 {
        self.labs.iter().map(Lab::connections_accepted).sum()
    }

    fn lab_ports(&self) -> Vec<u16> {
        self.labs.iter().map(|l| l.addr().port()).collect()
    }
}

/// Phase 3.
struct Scale {
    up_after: Option<Duration>,
    rss_max: u64,
    cpu_cores: f64,
    scrape_ms: Vec<f64>,
    scrape_bytes: Vec<f64>,
    sockets: Vec<Sockets>,
    failures: BTreeMap<String, f64>,
    session_failures: f64,
    connections_up: f64,
    /// From the first scrape to the last: TCP connections the labs accepted, the requests the
    /// exporter counted (`mcp_probe_requests_total`), and how long.
    accepted: u64,
    requests: f64,
    counted_over: Duration,
}

async fn scale(args: &Args, fleet: &Fleet, http: &reqwest::Client) -> Scale {
    let exporter = &fleet.exporter;
    let pid = exporter.pid();
    let lab_ports = fleet.lab_ports();
    let start = Instant::now();
    let first = proc_sample(pid).unwrap_or_default();
    let mut rss_max = first.0;
    // (requests counted, connections accepted, when) at the first scrape and at the latest.
    let mut counts: Option<[(f64, u64, Instant); 2]> = None;
    let mut scrape_ms = Vec::new();
    let mut scrape_bytes = Vec::new();
    let mut sockets = Vec::new();
    let mut last_text = String::new();
    let window = Duration::from_secs(args.seconds);
    for k in 0..args.scrapes {
        let at = window.mul_f64((k as f64 + 0.5) / args.scrapes as f64);
        tokio::time::sleep_until(tokio::time::Instant::from_std(start + at)).await;
        if let Some((text, took)) = exporter.scrape(http).await {
            scrape_ms.push(took.as_secs_f64() * 1000.0);
            scrape_bytes.push(text.len() as f64);
            let now = (
                sum(&text, "mcp_probe_requests_total", ""),
                fleet.accepted(),
                Instant::now(),
            );
            counts = Some([counts.map_or(now, |[first, _]| first), now]);
            last_text = text;
        }
        sockets.push(count_sockets(pid, &lab_ports, exporter.port));
        if let Some((rss, _)) = proc_sample(pid) {
            rss_max = rss_max.max(rss);
        }
    }
    tokio::time::sleep_until(tokio::time::Instant::from_std(start + window)).await;
    let last = proc_sample(pid).unwrap_or_default();
    rss_max = rss_max.max(last.0);
    let cpu_cores = (last.1 - first.1) / start.elapsed().as_secs_f64();
    let mut failures = BTreeMap::new();
    for line in last_text
        .lines()
        .filter(|l| l.starts_with("mcp_probe_request_failures_total{"))
    {
        let reason = line
            .split("reason=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("?")
            .to_string();
        let n: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *failures.entry(reason).or_insert(0.0) += n;
    }
    failures.retain(|_, n| *n > 0.0);
    let session_failures = sum(&last_text, "mcp_probe_session_failures_total", "");
    let connections_up = sum(&last_text, "mcp_probe_connection_up", "");
    Scale {
        up_after: fleet.up_after,
        rss_max,
        cpu_cores,
        scrape_ms,
        scrape_bytes,
        sockets,
        failures,
        session_failures,
        connections_up,
        accepted: counts.map_or(0, |[a, b]| b.1 - a.1),
        requests: counts.map_or(0.0, |[a, b]| b.0 - a.0),
        counted_over: counts.map_or(Duration::ZERO, |[a, b]| b.2 - a.2),
    }
}

/// Between two storms: past twice the 4 s idle timeout of pooled request connections (the pool
/// reaps idle connections on a timer of that period, so one may outlive it by up to a period),
/// so each storm starts from the same steady state.
const STORM_GAP: Duration = Duration::from_secs(10);

/// How often the sockets to the labs are sampled during a storm.
const SOCKET_SAMPLE: Duration = Duration::from_millis(100);

/// Phase 4: one storm.
struct Storm {
    /// Connections notified (of the stormed targets).
    notified: usize,
    /// Per refreshed connection: its refresh timestamp minus the wall time of the change.
    latency_ms: Vec<f64>,
    /// Connections whose cache was still older than the change at the deadline.
    missed: usize,
    /// Exporter CPU from the change until the scrape that found every connection refreshed (or
    /// the deadline): from schedstat (ns) and from `/proc/PID/stat` (10 ms ticks).
    cpu: f64,
    cpu_ticks: f64,
    cpu_window: Duration,
    /// `tools/list` requests the stormed lab answered in that window.
    pages: u64,
    /// Sockets to the labs seen during the storm that were not open before it.
    new_sockets: usize,
    /// Sockets to the labs before it.
    sockets_before: usize,
    /// TCP connections the labs accepted in the window (exact).
    accepted: u64,
    /// Scrapes it took to see every connection refreshed.
    scrapes: usize,
}

/// Latencies (ms) of the connections of `targets` whose cache was refreshed at or after
/// `changed_at`, from one scrape, and how many connections of `targets` the scrape has.
fn refreshed_since(text: &str, targets: &HashSet<String>, changed_at: f64) -> (Vec<f64>, usize) {
    let family = "mcp_probe_cache_last_refresh_timestamp_seconds{";
    let mut latencies = Vec::new();
    let mut series = 0;
    for line in text.lines().filter(|l| l.starts_with(family)) {
        let target = line
            .split("target=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or("");
        if !targets.contains(target) {
            continue;
        }
        series += 1;
        if let Some(at) = line.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok())
            && at >= changed_at
        {
            latencies.push((at - changed_at) * 1000.0);
        }
    }
    (latencies, series)
}

/// One storm: the stormed lab redeploys, every connection of its targets gets `list_changed` at
/// once. Waits (bounded by `--storm-deadline`) until the lab has answered a whole walk per
/// notified connection, then scrapes until every one of them shows a refresh after the change.
async fn storm(args: &Args, fleet: &Fleet, http: &reqwest::Client) -> Storm {
    let lab = &fleet.labs[0];
    let pid = fleet.exporter.pid();
    let ports = fleet.lab_ports();
    let notified = args.storm * (args.connections / args.targets);
    let pages_per_walk = mcp_lab::kb::tools(1)
        .len()
        .div_ceil(Behaviour::default().page_size.max(1)) as u64;

    let before = lab_sockets(pid, &ports);
    let mut seen = before.clone();
    let pages0 = lab.tools_list_calls();
    let accepted0 = fleet.accepted();
    let cpu0 = proc_cpu(pid);
    let ticks0 = proc_sample(pid).map(|s| s.1);
    let t0 = Instant::now();
    let changed_at = wall_now();
    lab.churn();
    let deadline = t0 + args.storm_deadline;

    // Scraping a large exporter costs it CPU and competes with the refreshes, so the first
    // scrape waits for the lab to have answered the pages the refreshes need.
    let want = notified as u64 * pages_per_walk;
    let mut next_sample = t0 + SOCKET_SAMPLE;
    while Instant::now() < deadline && lab.tools_list_calls() - pages0 < want {
        if Instant::now() >= next_sample {
            seen.extend(lab_sockets(pid, &ports));
            next_sample += SOCKET_SAMPLE;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let mut scrapes = 0;
    let mut latency_ms = Vec::new();
    let (mut cpu1, mut ticks1, mut t1);
    loop {
        seen.extend(lab_sockets(pid, &ports));
        cpu1 = proc_cpu(pid);
        ticks1 = proc_sample(pid).map(|s| s.1);
        t1 = t0.elapsed();
        scrapes += 1;
        if let Some((text, _)) = fleet.exporter.scrape(http).await {
            let (l, series) = refreshed_since(&text, &fleet.stormed, changed_at);
            latency_ms = l;
            if series >= notified && latency_ms.len() >= notified {
                break;
            }
        }
        if Instant::now() + SOCKET_SAMPLE >= deadline {
            break;
        }
        tokio::time::sleep(SOCKET_SAMPLE).await;
    }
    // The last scrape may come after the deadline: a refresh later than it is missed too.
    let deadline_ms = args.storm_deadline.as_secs_f64() * 1000.0;
    latency_ms.retain(|&ms| ms <= deadline_ms);
    let delta = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => b - a,
        _ => f64::NAN,
    };
    Storm {
        notified,
        missed: notified.saturating_sub(latency_ms.len()),
        latency_ms,
        cpu: delta(cpu0, cpu1),
        cpu_ticks: delta(ticks0, ticks1),
        cpu_window: t1,
        pages: lab.tools_list_calls() - pages0,
        new_sockets: seen.difference(&before).count(),
        sockets_before: before.len(),
        accepted: fleet.accepted() - accepted0,
        scrapes,
    }
}

/// The floor's storm after one of the exporter's (`--floor-storm`).
struct FloorStorm {
    /// Per connection: the time from the start to its tool list walked.
    latency_ms: Vec<f64>,
    /// Walks (of any list) that failed.
    failed: usize,
    /// The floor's CPU over its measured storm.
    cpu: f64,
}

/// Runs the floor's storm on the stormed connections' URLs and reads its report.
async fn floor_storm(args: &Args, fleet: &Fleet) -> FloorStorm {
    let lists = if args.tools_only { 1 } else { List::ALL.len() };
    let idle = args.idle.unwrap_or(IdleTimeout::DEFAULT.get());
    let report = run_self([
        "--floor-storm".to_string(),
        fleet.stormed_urls.display().to_string(),
        lists.to_string(),
        idle.as_millis().to_string(),
        STORM_GAP.as_millis().to_string(),
    ])
    .await;
    let latency_ms = report
        .split_whitespace()
        .find_map(|kv| kv.strip_prefix("latencies="))
        .map(|v| v.split(',').filter_map(|ms| ms.parse().ok()).collect())
        .unwrap_or_default();
    FloorStorm {
        latency_ms,
        failed: report_field(&report, "failed") as usize,
        cpu: report_field(&report, "cpu"),
    }
}

/// Re-runs this binary with `args` (a floor: its CPU its own) and returns what it printed.
async fn run_self<const N: usize>(args: [String; N]) -> String {
    let child = Command::new(std::env::current_exe().expect("own path"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the floor starts");
    let out = tokio::task::spawn_blocking(move || child.wait_with_output())
        .await
        .expect("join")
        .expect("the floor ran");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The number after `name=` in a child's one-line report (NaN when missing).
fn report_field(report: &str, name: &str) -> f64 {
    report
        .split_whitespace()
        .find_map(|kv| {
            kv.strip_prefix(name)?
                .strip_prefix('=')?
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(f64::NAN)
}

/// Phase 5: one sample of the churn soak.
struct SoakSample {
    at: Duration,
    rss: u64,
    /// Exporter CPU (cores) since the previous sample (none for the first).
    cpu_cores: Option<f64>,
    changes: u64,
    up: f64,
    failures: f64,
    list_changed: f64,
    /// Connections whose cache was refreshed after the latest change (all of them before any).
    refreshed: usize,
    /// From the latest change to this sample (none before the first change).
    since_change: Option<Duration>,
}

/// The churn soak: every target's list changes every `--soak-change` (all labs at one instant,
/// the first change half a period in, so samples a multiple of it apart fall midway between
/// changes); a sample every `--soak-sample`, at the start and at the end.
async fn soak(args: &Args, fleet: &Fleet, http: &reqwest::Client) -> Vec<SoakSample> {
    let pid = fleet.exporter.pid();
    let all: HashSet<String> = (0..args.targets).map(|i| format!("t{i:05}")).collect();
    let start = Instant::now();
    let end = start + args.soak;
    let mut next_change = start + args.soak_change / 2;
    let mut next_sample = start;
    let mut changes = 0u64;
    let mut changed_at: Option<(f64, Instant)> = None;
    let mut last_cpu: Option<(f64, Instant)> = None;
    let mut samples = Vec::new();
    eprintln!(
        "scale: soak for {:?}, a change every {:?}",
        args.soak, args.soak_change
    );
    loop {
        let now = Instant::now();
        // A sample due with a change is taken first: it reads the previous change settled.
        if now >= next_sample || now >= end {
            let rss = proc_sample(pid).map_or(0, |s| s.0);
            let cpu = proc_cpu(pid).unwrap_or(f64::NAN);
            let cpu_cores =
                last_cpu.map(|(c, at)| (cpu - c) / at.elapsed().as_secs_f64().max(1e-3));
            last_cpu = Some((cpu, Instant::now()));
            let text = fleet
                .exporter
                .scrape(http)
                .await
                .map(|(t, _)| t)
                .unwrap_or_default();
            let (refreshed, _) = refreshed_since(&text, &all, changed_at.map_or(0.0, |c| c.0));
            let sample = SoakSample {
                at: now - start,
                rss,
                cpu_cores,
                changes,
                // + 0.0: an empty sum is -0.0.
                up: sum(&text, "mcp_probe_connection_up", "") + 0.0,
                failures: sum(&text, "mcp_probe_request_failures_total", "") + 0.0,
                list_changed: sum(&text, "mcp_probe_list_changed_notifications_total", "") + 0.0,
                refreshed: refreshed.len(),
                since_change: changed_at.map(|c| now.saturating_duration_since(c.1)),
            };
            eprintln!(
                "scale: soak {:.0} s: RSS {:.1} MiB, {} changes, {} of {} refreshed since the last",
                sample.at.as_secs_f64(),
                sample.rss as f64 / 1048576.0,
                sample.changes,
                sample.refreshed,
                args.connections
            );
            samples.push(sample);
            if now >= end {
                return samples;
            }
            while next_sample <= Instant::now() {
                next_sample += args.soak_sample;
            }
            continue;
        }
        if now >= next_change && next_change < end {
            for lab in &fleet.labs {
                lab.churn();
            }
            changes += 1;
            changed_at = Some((wall_now(), Instant::now()));
            next_change += args.soak_change;
            continue;
        }
        let wake = next_change.min(next_sample).min(end);
        tokio::time::sleep_until(tokio::time::Instant::from_std(wake)).await;
    }
}

/// The exporter's TCP sockets by what they are.
#[derive(Debug, Default, Clone, Copy)]
struct Sockets {
    /// Established, to the lab (listen streams and request connections).
    to_targets: usize,
    /// Of the web server (listener and scrape connections).
    web: usize,
    other: usize,
}

/// `pid`'s TCP sockets as (inode, local port, remote port): its fds that are sockets, matched by
/// inode against the kernel's TCP tables.
fn tcp_sockets(pid: u32) -> Vec<(u64, u16, u16)> {
    let mut inodes = HashSet::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            if let Ok(link) = std::fs::read_link(fd.path()) {
                let link = link.to_string_lossy().into_owned();
                if let Some(inode) = link
                    .strip_prefix("socket:[")
                    .and_then(|s| s.strip_suffix(']'))
                    .and_then(|s| s.parse::<u64>().ok())
                {
                    inodes.insert(inode);
                }
            }
        }
    }
    let mut out = Vec::new();
    for table in ["tcp", "tcp6"] {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/net/{table}")) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let f: Vec<&str> = line.split_whitespace().collect();
            let Some(inode) = f.get(9).and_then(|i| i.parse::<u64>().ok()) else {
                continue;
            };
            if !inodes.contains(&inode) {
                continue;
            }
            let port = |addr: &str| {
                addr.rsplit(':')
                    .next()
                    .and_then(|p| u16::from_str_radix(p, 16).ok())
                    .unwrap_or(0)
            };
            out.push((inode, port(f[1]), port(f[2])));
        }
    }
    out
}

/// Count `pid`'s TCP sockets by what they are.
fn count_sockets(pid: u32, lab_ports: &[u16], web_port: u16) -> Sockets {
    let mut out = Sockets::default();
    for (_, local, remote) in tcp_sockets(pid) {
        if lab_ports.contains(&remote) {
            out.to_targets += 1;
        } else if local == web_port {
            out.web += 1;
        } else {
            out.other += 1;
        }
    }
    out
}

/// Inodes of `pid`'s TCP sockets to the labs.
fn lab_sockets(pid: u32, lab_ports: &[u16]) -> HashSet<u64> {
    tcp_sockets(pid)
        .into_iter()
        .filter(|(_, _, remote)| lab_ports.contains(remote))
        .map(|(inode, _, _)| inode)
        .collect()
}

fn print_report(args: &Args, side: &SideBySide, s: &Scale) {
    let n = args.connections as f64;
    let mib = |b: f64| b / 1048576.0;
    let bytes = quantile(&s.scrape_bytes, 0.5);
    let socket_median = |f: fn(&Sockets) -> usize| {
        quantile(
            &s.sockets.iter().map(|x| f(x) as f64).collect::<Vec<_>>(),
            0.5,
        )
    };
    let to_targets = socket_median(|x| x.to_targets);
    println!("## Scale\n");
    println!(
        "| connections | targets × conns | up after (s) | RSS (MiB) | CPU (cores) | `/metrics` median (ms) | p90 (ms) | size (MiB) | bytes / conn | sockets to targets / conn | web sockets | other sockets | request failures | session failures |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let failures: f64 = s.failures.values().sum::<f64>() + 0.0;
    println!(
        "| {} | {}×{} | {} | {:.0} | {:.3} | {:.1} | {:.1} | {:.2} | {:.0} | {:.2} | {:.0} | {:.0} | {:.0} | {:.0} |",
        args.connections,
        args.targets,
        args.connections / args.targets,
        s.up_after
            .map(|d| format!("{:.1}", d.as_secs_f64()))
            .unwrap_or_else(|| format!("not all ({:.0} up)", s.connections_up)),
        mib(s.rss_max as f64),
        s.cpu_cores,
        quantile(&s.scrape_ms, 0.5),
        quantile(&s.scrape_ms, 0.9),
        mib(bytes),
        bytes / n,
        to_targets / n,
        socket_median(|x| x.web),
        socket_median(|x| x.other),
        failures,
        s.session_failures,
    );
    if !s.failures.is_empty() {
        println!("\nrequest failures by reason: {:?}", s.failures);
    }
    let minutes = s.counted_over.as_secs_f64() / 60.0;
    println!(
        "\nnew TCP connections to the targets: {} in {:.0} s for {:.0} requests: {:.3} a request, {:.2} a connection a minute ({})",
        s.accepted,
        s.counted_over.as_secs_f64(),
        s.requests,
        s.accepted as f64 / s.requests.max(1.0),
        s.accepted as f64 / n / minutes.max(f64::MIN_POSITIVE),
        if args.origins {
            "every target an origin of its own"
        } else {
            "one origin for the fleet: one pool"
        }
    );
    // The lab speaks both eras, so the exporter speaks 2026-07-28 and, with `legacy_clients`,
    // connection 0 of each target also holds a legacy session's GET stream.
    let legacy = if args.legacy_clients { args.targets } else { 0 };
    println!(
        "\nsockets to targets: one listen stream per connection ({}), one legacy GET stream per target ({legacy}, `legacy_clients`), the rest ({:.0}) pooled request connections",
        args.connections,
        (to_targets - n - legacy as f64).max(0.0)
    );
    println!("\n## Walk CPU, side by side ({WALK_RATE} walks/s each, two pages per walk)\n");
    println!("| side | walks | CPU (s) | CPU per walk (ms) |");
    println!("|---|---:|---:|---:|");
    let per = |cpu: f64, walks: f64| 1000.0 * cpu / walks;
    let e = per(side.exporter_cpu, side.exporter_walks);
    let f = per(side.floor_cpu, side.floor_walks);
    println!(
        "| exporter | {:.0} | {:.3} | {e:.3} |",
        side.exporter_walks, side.exporter_cpu
    );
    println!(
        "| floor | {:.0} | {:.3} | {f:.3} |",
        side.floor_walks, side.floor_cpu
    );
    println!(
        "\nwalk CPU ratio {:.2}× over {:.1} s",
        e / f,
        side.window.as_secs_f64()
    );
    println!("\n## Refresh latency (change with list_changed → cache refreshed, loopback)\n");
    println!(
        "| changes | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | missed (> 5 s) |\n|---:|---:|---:|---:|---:|---:|"
    );
    println!(
        "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {} |",
        side.refresh_ms.len(),
        quantile(&side.refresh_ms, 0.5),
        quantile(&side.refresh_ms, 0.9),
        quantile(&side.refresh_ms, 0.99),
        quantile(&side.refresh_ms, 1.0),
        side.refresh_missed
    );
    std::io::stdout().flush().ok();
}

fn print_storms(args: &Args, storms: &[Storm]) {
    if storms.is_empty() {
        return;
    }
    println!(
        "\n## Storm ({} targets × {} changed at one instant, list_changed on every connection, loopback)\n",
        args.storm,
        args.connections / args.targets
    );
    println!(
        "| storm | notified | refreshed | missed (> {:?}) | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | exporter CPU (s) | CPU, stat ticks (s) | over (s) | tools/list answered | new sockets to the labs | connections the labs accepted | sockets to the labs before | scrapes |",
        args.storm_deadline
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (k, s) in storms.iter().enumerate() {
        let q = |x: f64| quantile(&s.latency_ms, x);
        println!(
            "| {} | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.2} | {:.2} | {} | {} | {} | {} | {} |",
            k + 1,
            s.notified,
            s.latency_ms.len(),
            s.missed,
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0),
            s.cpu,
            s.cpu_ticks,
            s.cpu_window.as_secs_f64(),
            s.pages,
            s.new_sockets,
            s.accepted,
            s.sockets_before,
            s.scrapes,
        );
    }
    let all: Vec<f64> = storms.iter().flat_map(|s| s.latency_ms.clone()).collect();
    let notified: usize = storms.iter().map(|s| s.notified).sum();
    let missed: usize = storms.iter().map(|s| s.missed).sum();
    println!(
        "\nall storms: {} of {notified} refreshed, {missed} missed; p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms; exporter CPU {:.3} s a storm (median)",
        all.len(),
        quantile(&all, 0.5),
        quantile(&all, 0.9),
        quantile(&all, 0.99),
        quantile(&all, 1.0),
        quantile(&storms.iter().map(|s| s.cpu).collect::<Vec<_>>(), 0.5),
    );
    println!(
        "\nlatency: each connection's cache refresh timestamp minus the wall time of the change; CPU: from the change to the scrape that saw every connection refreshed (that scrape excluded), idle work included; new sockets: to the labs, seen in samples every {SOCKET_SAMPLE:?} and not open before (a lower bound); accepted: counted by the labs"
    );
    std::io::stdout().flush().ok();
}

/// The floor's storms beside the exporter's, storm by storm.
fn print_floor_storms(storms: &[Storm], floors: &[FloorStorm]) {
    if floors.is_empty() {
        return;
    }
    println!(
        "\n## The floor's storm (a bare client walking the same lists of the same connections at once, no notification)\n"
    );
    println!(
        "| storm | walked | failed walks | p50 (ms) | p90 (ms) | p99 (ms) | max (ms) | floor CPU (s) | exporter p99 / floor p99 | exporter CPU / floor CPU |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (k, (f, s)) in floors.iter().zip(storms).enumerate() {
        let q = |x: f64| quantile(&f.latency_ms, x);
        println!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.3} | {:.2} | {:.2} |",
            k + 1,
            f.latency_ms.len(),
            f.failed,
            q(0.5),
            q(0.9),
            q(0.99),
            q(1.0),
            f.cpu,
            quantile(&s.latency_ms, 0.99) / q(0.99),
            s.cpu / f.cpu,
        );
    }
    let all: Vec<f64> = floors.iter().flat_map(|f| f.latency_ms.clone()).collect();
    println!(
        "\nall floor storms: p50 {:.1} ms, p99 {:.1} ms; floor CPU {:.3} s a storm (median)",
        quantile(&all, 0.5),
        quantile(&all, 0.99),
        quantile(&floors.iter().map(|f| f.cpu).collect::<Vec<_>>(), 0.5),
    );
    std::io::stdout().flush().ok();
}

fn print_soak(args: &Args, samples: &[SoakSample]) {
    let (Some(first), Some(last)) = (samples.first(), samples.last()) else {
        return;
    };
    let mib = |b: u64| b as f64 / 1048576.0;
    println!(
        "\n## Churn soak ({} targets × {}, every list changed every {:?}, {:?})\n",
        args.targets,
        args.connections / args.targets,
        args.soak_change,
        args.soak
    );
    println!(
        "| t (s) | RSS (MiB) | CPU (cores) | changes | connections up | request failures | list_changed received | refreshed since the last change | s since it |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for s in samples {
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "–".into());
        println!(
            "| {:.0} | {:.1} | {} | {} | {:.0} | {:.0} | {:.0} | {} | {} |",
            s.at.as_secs_f64(),
            mib(s.rss),
            or_dash(s.cpu_cores.map(|c| format!("{c:.3}"))),
            s.changes,
            s.up,
            s.failures,
            s.list_changed,
            s.refreshed,
            or_dash(s.since_change.map(|d| format!("{:.1}", d.as_secs_f64()))),
        );
    }
    let rss: Vec<f64> = samples.iter().map(|s| mib(s.rss)).collect();
    println!(
        "\nRSS {:.1} → {:.1} MiB ({:+.1}), min {:.1}, max {:.1} over {:.0} s and {} changes",
        mib(first.rss),
        mib(last.rss),
        mib(last.rss) - mib(first.rss),
        quantile(&rss, 0.0),
        quantile(&rss, 1.0),
        last.at.as_secs_f64(),
        last.changes
    );
    std::io::stdout().flush().ok();
}

/// The floor: `--floor URL RATE SECONDS [legacy]`. What a walk costs at the least: the
/// `tools/list` POSTs as the exporter sends them (same headers, same `_meta` in the modern era;
/// in a 2025-11-25 session of its own with `legacy`), each answer parsed as JSON (an SSE
/// answer's event data) and the cursor followed, at `RATE` walks a second, sleeping between.
/// Prints `walks=N cpu=SECONDS` for its loop (start-up and the session's opening excluded).
fn floor_main(args: &[String]) {
    let url = args.first().expect("--floor URL RATE SECONDS").clone();
    let rate: u32 = args.get(1).and_then(|r| r.parse().ok()).unwrap_or(10);
    let seconds: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(20);
    let legacy = args.get(3).map(String::as_str) == Some("legacy");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (walks, cpu) = rt.block_on(async move {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("client");
        let mut floor = Floor::new(client, url, legacy);
        if legacy {
            floor.open_legacy_session().await;
        }
        floor.walk().await; // warm the connection
        let cpu0 = own_cpu();
        let period = Duration::from_secs(1) / rate;
        let mut tick = tokio::time::interval(period);
        let end = Instant::now() + Duration::from_secs(seconds);
        let mut walks = 0u64;
        while Instant::now() < end {
            tick.tick().await;
            if floor.walk().await {
                walks += 1;
            }
        }
        (walks, own_cpu() - cpu0)
    });
    println!("walks={walks} cpu={cpu}");
}

/// The floor's storm: `--floor-storm URLS LISTS IDLE_MS GAP_MS`. Every URL of the file `URLS`
/// (one a connection, a task each) walks its first `LISTS` lists of [`List::ALL`] at once, in
/// the modern era, on one pool whose idle connections close after `IDLE_MS`.
/// Twice, `GAP_MS` apart: the first opens the connections, the second is measured, so the pool
/// is as warm as the exporter's after the same gap. Prints `cpu=SECONDS failed=N latencies=MS,…`:
/// per URL, from the start to its tool list walked.
fn floor_storm_main(args: &[String]) {
    let arg = |i: usize| -> u64 {
        args.get(i)
            .and_then(|v| v.parse().ok())
            .expect("--floor-storm URLS LISTS IDLE_MS GAP_MS")
    };
    let urls: Vec<String> = std::fs::read_to_string(&args[0])
        .expect("the URLs file")
        .lines()
        .map(str::to_string)
        .collect();
    let lists = (arg(1) as usize).clamp(1, List::ALL.len());
    let (idle, gap) = (Duration::from_millis(arg(2)), Duration::from_millis(arg(3)));
    // As many workers as the exporter's runtime has: one a core.
    let workers = std::thread::available_parallelism().map_or(2, usize::from);
    let (cpu, failed, latencies) = runtime(workers).block_on(async move {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .pool_idle_timeout(idle)
            .build()
            .expect("client");
        floor_storm_once(&client, &urls, lists).await;
        tokio::time::sleep(gap).await;
        let cpu0 = own_cpu();
        let (failed, latencies) = floor_storm_once(&client, &urls, lists).await;
        (own_cpu() - cpu0, failed, latencies)
    });
    let latencies: Vec<String> = latencies.iter().map(|ms| format!("{ms:.3}")).collect();
    println!(
        "cpu={cpu} failed={failed} latencies={}",
        latencies.join(",")
    );
}

/// One storm of the floor: the walks that failed, and each URL's tool list's time in ms. Each
/// URL walks its lists one after the other, the tool list first, as a connection of the
/// exporter does.
async fn floor_storm_once(
    client: &reqwest::Client,
    urls: &[String],
    lists: usize,
) -> (usize, Vec<f64>) {
    let t0 = Instant::now();
    let mut connections = tokio::task::JoinSet::new();
    for url in urls {
        let mut floor = Floor::new(client.clone(), url.clone(), false);
        connections.spawn(async move {
            let (mut failed, mut tools_at) = (0, None);
            for list in List::ALL.into_iter().take(lists) {
                if !floor.walk_list(list).await {
                    failed += 1;
                } else if list == List::Tools {
                    tools_at = Some(t0.elapsed());
                }
            }
            (failed, tools_at)
        });
    }
    let (mut failed, mut latencies) = (0, Vec::new());
    while let Some(done) = connections.join_next().await {
        let (f, tools_at) = done.expect("a connection's task");
        failed += f;
        latencies.extend(tools_at.map(|at| at.as_secs_f64() * 1000.0));
    }
    (failed, latencies)
}

/// A bare client: one pool, and in the legacy era the session it opened.
struct Floor {
    client: reqwest::Client,
    url: String,
    /// Speaks 2025-11-25 (in a session, when the server gives one), not 2026-07-28.
    legacy: bool,
    id: u64,
    /// `Mcp-Session-Id` of its 2025-11-25 session, when the server gave one.
    session: Option<String>,
}

impl Floor {
    /// A floor on `client`'s pool, before any request (and any session).
    fn new(client: reqwest::Client, url: String, legacy: bool) -> Floor {
        Floor {
            client,
            url,
            legacy,
            id: 0,
            session: None,
        }
    }

    /// `initialize` and `notifications/initialized`, as a 2025-11-25 client opens a session.
    async fn open_legacy_session(&mut self) {
        let init = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "floor", "version": "0"}}});
        let resp = self
            .post(&init, "initialize")
            .send()
            .await
            .expect("the floor's initialize is answered");
        let session = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        drop(resp.bytes().await);
        self.session = session;
        let done = serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let resp = self.post(&done, "notifications/initialized").send().await;
        drop(
            resp.expect("the floor's initialized is accepted")
                .bytes()
                .await,
        );
    }

    /// A POST with the era's headers: the legacy era's version (after `initialize`) and session
    /// id, or the modern era's version and `Mcp-Method`.
    fn post(&self, body: &serde_json::Value, method: &str) -> reqwest::RequestBuilder {
        let mut req = self
            .client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json");
        if !self.legacy {
            req = req
                .header("mcp-protocol-version", "2026-07-28")
                .header("mcp-method", method);
        } else if method != "initialize" {
            req = req.header("mcp-protocol-version", "2025-11-25");
        }
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        req.body(serde_json::to_vec(body).expect("JSON"))
    }

    /// One walk of the tool list; whether every page was answered.
    async fn walk(&mut self) -> bool {
        self.walk_list(List::Tools).await
    }

    /// One walk of `list`; whether every page was answered.
    async fn walk_list(&mut self, list: List) -> bool {
        let mut cursor: Option<String> = None;
        for _ in 0..16 {
            self.id += 1;
            let mut params = if self.legacy {
                serde_json::json!({})
            } else {
                serde_json::json!({"_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "floor", "version": "0"},
                }})
            };
            if let Some(c) = &cursor {
                params["cursor"] = serde_json::Value::String(c.clone());
            }
            let body = serde_json::json!({"jsonrpc": "2.0", "id": self.id, "method": list.method(), "params": params});
            let Ok(resp) = self.post(&body, list.method()).send().await else {
                return false;
            };
            let sse = resp
                .headers()
                .get("content-type")
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream"));
            let Ok(bytes) = resp.bytes().await else {
                return false;
            };
            let json = if sse {
                sse_answer(&bytes)
            } else {
                Some(&bytes[..])
            };
            let Some(Ok(answer)) = json.map(serde_json::from_slice::<serde_json::Value>) else {
                return false;
            };
            match answer["result"]["nextCursor"].as_str() {
                Some(c) => cursor = Some(c.to_string()),
                None => return answer["result"][list.result_key()].is_array(),
            }
        }
        false
    }
}

/// The first non-empty `data` line of an SSE answer (the answer to the one request sent; a
/// priming event's data is empty): what a bare client reads of `event: message\ndata: {...}`.
fn sse_answer(body: &[u8]) -> Option<&[u8]> {
    body.split(|b| *b == b'\n').find_map(|line| {
        let data = line.strip_prefix(b"data:")?;
        let data = data.strip_prefix(b" ").unwrap_or(data);
        (!data.trim_ascii().is_empty()).then_some(data)
    })
}

/// CPU seconds (user + system) of this process so far.
fn own_cpu() -> f64 {
    // SAFETY: getrusage writes into the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) };
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    secs(usage.ru_utime) + secs(usage.ru_stime)
}
