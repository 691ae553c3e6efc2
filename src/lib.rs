//! mcp_exporter watches remote MCP servers the way a careful client would, and exports when a
//! client's tool cache can no longer be trusted.
//!
//! Data flows one way:
//!
//! ```text
//! config ─┬─► shard (this replica's part) ──► probe::Supervisor ──► probe::connection
//! discovery┘    (one task per target × connection)  │  mcp (the wire: JSON-RPC, Streamable HTTP)
//!                                                   │  probe::walker · probe::toolset (cache, diff)
//!                                                   ▼
//!                        telemetry (atomic series, rendered when scraped) ──► web (/metrics …)
//! ```

/// The daemon: startup, reload, signals, shutdown.
pub mod app;
/// `mcp_exporter check URL`: one pass of the probe's client against one server, as a CI verdict.
pub mod check;
/// YAML configuration: strict parsing, defaults, `${VAR}` expansion, precise errors.
pub mod config;
/// `--demo`: the lab's servers, the configuration that watches them, and a proxy in front.
pub mod demo;
/// Targets from `file_sd_configs` and `http_sd_configs`, merged with the static ones.
pub mod discovery;
/// The fault-injecting MCP server behind `--demo` and the tests.
pub mod lab;
/// Logging setup (logfmt or JSON).
pub mod logging;
/// The MCP wire client: JSON-RPC framing, Streamable HTTP, legacy-era sessions.
pub mod mcp;
/// Reaching a target over HTTP: credentials, TLS, proxy.
pub mod net;
/// OAuth 2.0 client credentials for MCP targets: discovery, token cache, step-up.
pub mod oauth;
/// The probe: long-lived connections, cursor walks, the cache and its audit.
pub mod probe;
/// Passive mode: an MCP-aware reverse proxy that sees real clients' stale tool caches.
pub mod proxy;
/// Values kept out of logs, errors and pages: `Secret`, `redact_url`.
pub mod secret;
/// Horizontal sharding: which targets this replica owns (rendezvous hashing of names).
pub mod shard;
/// Metric catalog, per-target recorders and the merged exposition.
pub mod telemetry;
/// Server-supplied text made safe to show: bounded in bytes, control and bidi characters escaped.
pub mod text;
/// The exporter's HTTP endpoints.
pub mod web;
