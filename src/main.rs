//! `mcp_exporter`: flags, logging, and nothing else.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use mcp_exporter::app::{self, Options, Source};
use mcp_exporter::check;
use mcp_exporter::config::{self, CommandSpec, Config, Endpoint, Secret};
use mcp_exporter::logging::{self, Format};
use mcp_exporter::shard::{self, Shard};
use mcp_exporter::telemetry::otlp::{OtlpOptions, OtlpProtocol};
use mcp_exporter::web::Limits;
use mcp_lab::{Era, scenarios};

/// Prometheus exporter that probes MCP servers as a correct client and reports stale tool caches.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    /// Configuration file.
    #[arg(long = "config.file", default_value = "mcp_exporter.yml")]
    config_file: PathBuf,
    /// Validate the configuration file and exit (0 when valid).
    #[arg(long = "config.check")]
    config_check: bool,
    /// Address to serve /metrics and the other endpoints on [default: :10117; with --demo,
    /// 127.0.0.1:10117].
    #[arg(long = "web.listen-address", value_name = "ADDRESS")]
    listen: Option<String>,
    /// Time a client has to send a request's headers (from its first byte; from the connect,
    /// for the first request).
    #[arg(long = "web.header-read-timeout", value_name = "DURATION", default_value = "10s", value_parser = web_timeout)]
    web_header_read_timeout: Duration,
    /// Time a keep-alive connection may wait for its next request, and a response may make no
    /// progress (a client that does not read).
    #[arg(long = "web.idle-timeout", value_name = "DURATION", default_value = "2m", value_parser = web_timeout)]
    web_idle_timeout: Duration,
    /// Connections open at once to this port; at the cap, the one that has waited longest for a
    /// request is closed to make room, so a scrape still gets through.
    #[arg(long = "web.max-connections", value_name = "N", default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    web_max_connections: u32,
    /// Web configuration file (Prometheus exporter-toolkit format): TLS, client certificates,
    /// basic authentication and response headers of this port; re-read on every connection and
    /// request. See docs/security.md.
    #[arg(long = "web.config.file", value_name = "FILE")]
    web_config_file: Option<PathBuf>,
    /// Serve POST /-/reload (without it: 403). SIGHUP reloads either way.
    #[arg(long = "web.enable-lifecycle")]
    web_enable_lifecycle: bool,
    /// This replica's shard, from 0 (with --shard.count): it probes only the targets whose name
    /// hashes to it. See docs/scaling.md.
    #[arg(long = "shard.index", value_name = "N", conflicts_with = "shard_auto")]
    shard_index: Option<u32>,
    /// Number of shards (replicas sharing one configuration).
    #[arg(long = "shard.count", value_name = "M", default_value_t = 1)]
    shard_count: u32,
    /// Take the shard index from the StatefulSet pod ordinal: the trailing -N of $POD_NAME, else
    /// of the host name.
    #[arg(long = "shard.auto")]
    shard_auto: bool,
    /// Leave a probe metric family out of /metrics (repeatable, or comma-separated): trades
    /// detail for bytes on a large fleet. Alerts and dashboards that read it go blind; see
    /// docs/scaling.md for what each family costs and which are safe to drop.
    #[arg(long = "metrics.exclude", value_name = "FAMILY", value_delimiter = ',')]
    metrics_exclude: Vec<String>,
    /// Run against the embedded demo knowledge-base server instead of a configuration file.
    #[arg(long, conflicts_with_all = ["config_file", "config_check"])]
    demo: bool,
    /// Also push the measurements over OTLP to this URL (a collector's metrics endpoint, e.g.
    /// http://collector:4318/v1/metrics; an empty path gets /v1/metrics).
    #[arg(long = "otlp.endpoint", value_name = "URL")]
    otlp_endpoint: Option<url::Url>,
    /// OTLP transport.
    #[arg(long = "otlp.protocol", value_enum, default_value = "http/protobuf")]
    otlp_protocol: OtlpProtocol,
    /// Header sent with every OTLP export, 'Name: value' (repeatable); ${VAR} in the value is
    /// read from the environment. Values are never logged.
    #[arg(long = "otlp.header", value_name = "HEADER")]
    otlp_headers: Vec<String>,
    /// How often to push.
    #[arg(long = "otlp.interval", default_value = "60s", value_parser = humantime::parse_duration)]
    otlp_interval: Duration,
    /// Timeout of one export.
    #[arg(long = "otlp.timeout", default_value = "10s", value_parser = humantime::parse_duration)]
    otlp_timeout: Duration,
    /// Log level: debug, info, warn, error.
    #[arg(long = "log.level", default_value = "info", value_parser = ["debug", "info", "warn", "error"])]
    log_level: String,
    /// Log format.
    #[arg(long = "log.format", value_enum, default_value = "logfmt")]
    log_format: Format,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Serve one lab scenario: an MCP server that reproduces one failure mode on demand.
    Lab {
        /// List the scenarios, one line each, and exit.
        #[arg(long)]
        list: bool,
        /// The scenario to serve (see --list).
        #[arg(long, required_unless_present = "list")]
        scenario: Option<String>,
        /// Address to serve it on.
        #[arg(long, default_value = "127.0.0.1:10118")]
        listen: String,
        /// Protocol eras served on the URL: dual (legacy sessions and 2026-07-28), modern
        /// (2026-07-28 only) or legacy (2025-11-25 and earlier only).
        #[arg(long, default_value = "dual", value_parser = ["dual", "modern", "legacy"])]
        era: String,
        /// ttlMs of modern server/discover and tools/list results (default: the scenario's).
        #[arg(long = "ttl-ms")]
        ttl_ms: Option<u64>,
    },
    /// Check one MCP server once, as a correct client would use it, and exit 0 (fine, warnings
    /// allowed), 1 (a client would hit a problem) or 2 (could not check). See docs/check.md.
    Check(CheckArgs),
    /// List one MCP server once and print its pins file (the fingerprint and definition of every
    /// item of every list it declares) on stdout: `pin URL > kb.pins.json`. See docs/changes.md.
    Pin(ServerArgs),
    /// Run an MCP-aware reverse proxy in front of one server (passive mode, no targets): clients
    /// connect to --listen, the proxy forwards to --upstream and exports mcp_proxy_* series on
    /// --web.listen-address. --header and --http-config's credentials are the proxy's own
    /// catalog session's (its tools/list walks, which judge stale calls), as `check` takes them;
    /// they are never added to clients' requests, and clients' own Authorization is forwarded
    /// unchanged and never used by the catalog. Its tls_config and proxy_url carry the clients'
    /// requests to the upstream too. See docs/proxy.md.
    Proxy {
        /// The MCP server's endpoint URL; its path is served as-is on --listen. (A string here:
        /// checked by the configuration's URL rule, whose errors never echo it.)
        #[arg(long)]
        upstream: String,
        /// Where clients connect.
        #[arg(long, default_value = "127.0.0.1:10119")]
        listen: String,
        /// The `proxy` label.
        #[arg(long, default_value = "default")]
        name: String,
        /// Address of /metrics and the status pages (also accepted before `proxy`).
        #[arg(
            long = "web.listen-address",
            id = "proxy_web_listen",
            value_name = "ADDRESS"
        )]
        web_listen: Option<String>,
        #[command(flatten)]
        tuning: config::ProxyFlags,
    },
}

#[derive(Debug, clap::Args)]
struct CheckArgs {
    /// After the walks, keep the session this long waiting for notifications/tools/list_changed.
    #[arg(long = "listen-for", value_name = "DURATION", value_parser = listen_window)]
    listen_for: Option<Duration>,
    /// Call this tool with tools/call (only if annotated read-only, see --allow-side-effects).
    #[arg(long, value_name = "TOOL")]
    call: Option<String>,
    /// Arguments of --call, a JSON object.
    #[arg(long, default_value = "{}", requires = "call")]
    arguments: String,
    /// Call the --call tool even when it is not annotated readOnlyHint: true.
    #[arg(long = "allow-side-effects", requires = "call")]
    allow_side_effects: bool,
    /// Report format.
    #[arg(long, value_enum, default_value = "text")]
    format: check::report::Format,
    /// For a modern (2026-07-28) server: also open a legacy (2025) session on the same URL and
    /// say whether clients still on that era would hear tool list changes (row legacy_clients).
    /// Off by default: it makes check a second, legacy client of the server.
    #[arg(long = "legacy-clients")]
    legacy_clients: bool,
    /// Compare each listing with a pins file (`mcp_exporter pin URL > FILE`): a pinned item
    /// served with another definition, missing, or an item nobody pinned fails the check.
    #[arg(long, value_name = "FILE")]
    pins: Option<std::path::PathBuf>,
    #[command(flatten)]
    server: ServerArgs,
}

/// How to reach one server: what `check` and `pin` share.
#[derive(Debug, clap::Args)]
struct ServerArgs {
    #[command(flatten)]
    http: config::HttpFlags,
    /// Deadline of each request.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Protocol version to pin (default: auto, the newest era the server serves).
    #[arg(long = "protocol-version", value_name = "VERSION")]
    protocol_version: Option<String>,
    /// Most tools/list pages one walk may take.
    #[arg(long = "max-pages", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    max_pages: u32,
    /// Most bytes of tools/list answers one walk may read across its pages (256KiB, 1MiB …).
    #[arg(long = "max-listing-bytes", value_name = "SIZE", default_value = "256KiB", value_parser = listing_bytes)]
    max_listing_bytes: usize,
    /// The HTTP transport: auto (Streamable HTTP, then HTTP+SSE when the server refuses it),
    /// streamable_http, or sse (the URL is the SSE endpoint of a 2024-11-05 server).
    #[arg(long, value_enum, default_value = "auto")]
    transport: mcp_exporter::config::HttpTransportKind,
    /// The MCP endpoint, e.g. https://kb.example.com/mcp (credentials in it are never printed).
    #[arg(required_unless_present = "stdio")]
    url: Option<String>,
    /// Instead of a URL: a local server to start and check over stdio, after `--`
    /// (`check -- python3 server.py`). No shell is involved.
    #[arg(last = true, value_name = "PROGRAM [ARGS]", conflicts_with = "url")]
    stdio: Vec<String>,
}

/// `--max-listing-bytes`: a size, held to the configuration's rule for `max_listing_bytes`.
fn listing_bytes(s: &str) -> Result<usize, String> {
    let n = config::parse_bytes(s)
        .ok_or_else(|| format!("{s:?} is not a size (bytes, or 256KiB, 1MiB …)"))?;
    config::listing_bytes(n)
}

/// SIGHUP does nothing until the daemon's own handler (`app`) replaces this one.
extern "C" fn ignore_sighup(_: libc::c_int) {}

/// The first thing `main` does. SIGHUP's default action ends the process, and the daemon's
/// handler is only installed once the runtime runs: a `systemctl reload` (or a HUP from a
/// supervisor) in the first milliseconds after exec used to kill it (22 of 30 tries). A no-op
/// handler closes that window down to the dynamic loader's, before `main`, which no program
/// can close (docs/reliability.md). It is a handler, not `SIG_IGN`, so children (stdio
/// targets) do not inherit an ignored SIGHUP across exec; the runtime's handler chains to it.
/// Then SIGHUP, SIGTERM and SIGINT are unblocked: a parent that left them blocked would
/// otherwise make reload and shutdown silently never happen (and a SIGHUP sent before `main`
/// is delivered here, to the no-op).
fn early_signals() {
    // SAFETY: sigaction and sigprocmask with zeroed, then filled, structures; the handler is an
    // empty extern "C" function, async-signal-safe.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = ignore_sighup as *const () as libc::sighandler_t;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGHUP, &action, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for signal in [libc::SIGHUP, libc::SIGTERM, libc::SIGINT] {
            libc::sigaddset(&mut set, signal);
        }
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
    }
}

/// One-shot commands (`check`, `pin`, `--config.check`) end on a hangup like any command.
fn default_sighup() {
    // SAFETY: restoring the default action of one signal.
    unsafe {
        libc::signal(libc::SIGHUP, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    early_signals();
    mcp_exporter::allocator::tune();
    let cli = Cli::parse();
    if cli.config_check || matches!(cli.command, Some(Command::Check(_) | Command::Pin(_))) {
        default_sighup();
    }
    if cli.config_check {
        return match Config::load(&cli.config_file) {
            Ok(c) => {
                println!(
                    "{}: OK, {} target(s)",
                    cli.config_file.display(),
                    c.targets.len()
                );
                for t in &c.targets {
                    println!("  {}: {}", t.name, t.endpoint);
                }
                for f in &c.file_sd {
                    println!("  file_sd {}: {} file pattern(s)", f.name, f.files.len());
                }
                for h in &c.http_sd {
                    println!("  http_sd {}: {}", h.name, config::redact_url(&h.url));
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::FAILURE
            }
        };
    }
    logging::init(&cli.log_level, cli.log_format);
    if let Some(Command::Check(args)) = cli.command {
        return run_check(args);
    }
    if let Some(Command::Pin(args)) = cli.command {
        return run_pin(args);
    }
    if let Some(Command::Lab {
        list,
        scenario,
        listen,
        era,
        ttl_ms,
    }) = cli.command
    {
        if list {
            print!("{}", scenarios::listing());
            return ExitCode::SUCCESS;
        }
        let name = scenario.unwrap_or_default();
        let Some(mut scenario) = scenarios::find(&name) else {
            eprintln!("unknown scenario {name:?}; `mcp_exporter lab --list` names them");
            return ExitCode::from(2);
        };
        scenario.behaviour.era = Era::parse(&era).expect("clap checked the era");
        if let Some(ttl_ms) = ttl_ms {
            scenario.behaviour.ttl_ms = ttl_ms;
        }
        return run(app::run_lab(scenario, listen));
    }
    let mut web_listen = cli.listen;
    let source = match cli.command {
        Some(Command::Proxy {
            upstream,
            listen,
            name,
            web_listen: given,
            tuning,
        }) => {
            web_listen = given.or(web_listen);
            let Some(addr) = config::parse_proxy_listen(&listen) else {
                eprintln!("mcp_exporter proxy: --listen {listen:?} is not host:port");
                return ExitCode::from(2);
            };
            match config::proxy_from_flags(&name, addr, &upstream, tuning) {
                Ok(c) => Source::Proxy(Box::new(c)),
                Err(e) => {
                    eprintln!("mcp_exporter proxy: {e}");
                    return ExitCode::from(2);
                }
            }
        }
        _ if cli.demo => Source::Demo,
        _ => Source::File(cli.config_file),
    };
    let otlp = match cli.otlp_endpoint {
        None => None,
        Some(endpoint) => match headers("--otlp.header", &cli.otlp_headers) {
            Ok(headers) => Some(OtlpOptions {
                endpoint,
                protocol: cli.otlp_protocol,
                headers,
                interval: cli.otlp_interval,
                timeout: cli.otlp_timeout,
            }),
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(2);
            }
        },
    };
    let shard = match shard(cli.shard_index, cli.shard_count, cli.shard_auto) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("mcp_exporter: {e}");
            return ExitCode::from(2);
        }
    };
    let exclusions = match mcp_exporter::telemetry::parse_exclusions(&cli.metrics_exclude) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("mcp_exporter: {e}");
            return ExitCode::from(2);
        }
    };
    let web = Limits {
        header_read_timeout: cli.web_header_read_timeout,
        idle_timeout: cli.web_idle_timeout,
        max_connections: cli.web_max_connections as usize,
    };
    run(app::run(Options {
        listen: app::listen_address(web_listen, cli.demo),
        source,
        otlp,
        web,
        web_config: cli.web_config_file,
        lifecycle: cli.web_enable_lifecycle,
        shard,
        exclusions,
    }))
}

/// `--shard.index`, `--shard.count`, `--shard.auto`: this replica's shard.
fn shard(index: Option<u32>, count: u32, auto: bool) -> Result<Shard, String> {
    match (index, auto) {
        (Some(i), _) => Shard::new(i, count),
        (None, true) => Shard::from_ordinal(&shard::pod_name()?, count),
        (None, false) if count > 1 => Err(format!(
            "--shard.count {count} needs --shard.index or --shard.auto (which shard is this one?)"
        )),
        (None, false) => Shard::new(0, count),
    }
}

/// `--web.*-timeout`: between 100ms and 24h, like the durations of the configuration file.
fn web_timeout(text: &str) -> Result<Duration, String> {
    const MIN: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(24 * 3600);
    match humantime::parse_duration(text) {
        Ok(d) if (MIN..=MAX).contains(&d) => Ok(d),
        Ok(_) => Err("between 100ms and 24h".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

/// Parse `'Name: value'` header flags. Parsed here rather than by clap, whose error message
/// would echo the whole argument, secret value included.
fn headers(flag: &str, raw: &[String]) -> Result<Vec<(String, Secret)>, String> {
    raw.iter()
        .map(|h| config::header_flag(h).map_err(|why| format!("{flag}: {why}")))
        .collect()
}

/// A one-shot command's options and runtime: arguments that cannot be used exit 2 before any
/// request is sent.
fn one_shot(
    command: &str,
    options: Result<check::Options, String>,
) -> Result<(tokio::runtime::Runtime, check::Options), ExitCode> {
    let options = options.map_err(|e| {
        eprintln!("mcp_exporter {command}: {e}");
        ExitCode::from(2)
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            eprintln!("cannot start runtime: {e}");
            ExitCode::from(2)
        })?;
    Ok((runtime, options))
}

/// `mcp_exporter check`.
fn run_check(args: CheckArgs) -> ExitCode {
    let (runtime, options) = match one_shot("check", check_options(&args)) {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    let report = runtime.block_on(check::run(&options));
    print!("{}", check::report::render(&report, args.format));
    ExitCode::from(report.exit_code())
}

/// `--listen-for`: a duration of at most a day (a check is a CI step, not a daemon).
fn listen_window(text: &str) -> Result<Duration, String> {
    const DAY: Duration = Duration::from_secs(24 * 3600);
    match humantime::parse_duration(text) {
        Ok(d) if d <= DAY => Ok(d),
        Ok(_) => Err("at most 24h".to_string()),
        Err(e) => Err(e.to_string()),
    }
}

fn check_options(args: &CheckArgs) -> Result<check::Options, String> {
    let mut options = server_options(&args.server)?;
    options.call = match &args.call {
        None => None,
        Some(tool) => Some(check::Call {
            tool: tool.clone(),
            arguments: check::parse_arguments(&args.arguments)?,
            allow_side_effects: args.allow_side_effects,
        }),
    };
    options.legacy_clients = args.legacy_clients;
    options.listen_for = args.listen_for;
    options.pins = args
        .pins
        .as_deref()
        .map(check::pin::load_pins)
        .transpose()?;
    Ok(options)
}

/// `mcp_exporter pin`: the pins file on stdout, exit 0; 2 when no listing could be taken.
fn run_pin(args: ServerArgs) -> ExitCode {
    let (runtime, options) = match one_shot("pin", server_options(&args)) {
        Ok(ready) => ready,
        Err(code) => return code,
    };
    match runtime.block_on(check::pin::pin(&options)) {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("mcp_exporter pin: {e}");
            ExitCode::from(2)
        }
    }
}

fn server_options(args: &ServerArgs) -> Result<check::Options, String> {
    let endpoint = match (&args.url, args.stdio.split_first()) {
        (_, Some((program, rest))) => {
            if args.http.is_set() {
                return Err(
                    "--header and --http-config apply to a URL, not to a stdio server".into(),
                );
            }
            Endpoint::Command(CommandSpec {
                command: program.into(),
                args: rest.to_vec(),
                env: vec![],
                cwd: None,
            })
        }
        (Some(url), None) => {
            // Parsed here, not by clap: clap's error would echo the URL, credentials included.
            let url = config::parse_target_url(url.trim()).map_err(|why| format!("URL: {why}"))?;
            Endpoint::Http {
                url,
                transport: args.transport,
            }
        }
        (None, None) => return Err("a URL or `-- PROGRAM [ARGS]` is required".into()),
    };
    Ok(check::Options {
        endpoint,
        legacy_clients: false,
        headers: args
            .http
            .headers()
            .map_err(|why| format!("--header: {why}"))?,
        http: args.http.http_config().map_err(|e| e.to_string())?,
        timeout: args.timeout,
        protocol_version: args
            .protocol_version
            .as_deref()
            .map(check::parse_protocol_version)
            .transpose()?,
        max_pages: args.max_pages,
        max_listing_bytes: args.max_listing_bytes,
        listen_for: None,
        call: None,
        pins: None,
    })
}

/// Run a daemon future on a multi-threaded runtime; its error is logged and printed.
fn run(fut: impl Future<Output = Result<(), String>>) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("cannot start runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.spawn(mcp_exporter::allocator::trim_periodically());
    let outcome = runtime.block_on(fut);
    // Everything was shut down in order; a configuration parse still running on a blocking
    // thread (a huge or stuck file) must not hold the exit.
    runtime.shutdown_background();
    // Stdio servers' trees whose guards the background shutdown has not run yet end here,
    // before the process does.
    mcp_client::mcp::stdio::end_every_tree();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "exiting");
            eprintln!("mcp_exporter: {e}");
            ExitCode::FAILURE
        }
    }
}
