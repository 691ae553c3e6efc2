//! mcp_exporter watches remote MCP servers the way a careful client would, and exports when a
//! client's tool cache can no longer be trusted.
//!
//! The top floor of the workspace (see `docs/design.md` and each crate's README): it may import
//! `mcp-client` (the MCP client core), `exposition` (the metrics writer) and `mcp-lab` (the demo's
//! servers); none of them imports it. Data flows one way:
//!
//! ```text
//! config ─┬─► shard (this replica's part) ──► probe::Supervisor ──► probe::connection
//! discovery┘    (one task per target × connection)  │  mcp_client: the wire, sessions, walker,
//!                                                   │  tool sets and their changes
//!                                                   ▼
//!     probe::metrics · proxy::metrics (atomic series) ──► telemetry (registry) ──► web (/metrics …)
//! ```
//!
//! Each capability owns its metrics beside it (`probe::metrics`, `proxy::metrics`); `telemetry`
//! holds them only as `Series` and knows no MCP type.

/// A fixed mmap threshold for glibc's allocator, so large freed buffers go back to the kernel.
pub mod allocator;
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
/// Logging setup (logfmt or JSON).
pub mod logging;
/// The probe: long-lived connections, the cache's audit, verdicts, status and series.
pub mod probe;
/// Passive mode: an MCP-aware reverse proxy that sees real clients' stale tool caches.
pub mod proxy;
/// Horizontal sharding: which targets this replica owns (rendezvous hashing of names).
pub mod shard;
/// The registry a scrape reads, the catalog of families, the daemon's own series, OTLP push.
pub mod telemetry;
/// The exporter's HTTP endpoints.
pub mod web;
