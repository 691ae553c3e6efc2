//! The MCP client core: what a correct client of a remote MCP server does, and nothing of the
//! exporter that watches with it.
//!
//! The bottom floor of the workspace (see `docs/design.md`). It may import only third-party
//! crates: never `exposition`, `mcp-lab` or `mcp_exporter`. What the floors above need to see of
//! it — token requests, auth failures — it reports through traits and callbacks it declares
//! itself ([`oauth::TokenEvents`], [`target_http::FailureSink`]).
//!
//! - [`mcp`]: the wire — JSON-RPC framing, Streamable HTTP, HTTP+SSE and stdio transports, the
//!   sessions of both protocol eras, server requests answered;
//! - [`net`]: the HTTP ground — option types ([`net::http_config`]), TLS, egress proxy, bounded
//!   reading, the one rule for a URL a server hands over;
//! - [`oauth`]: OAuth 2.0 client credentials — discovery, token cache, step-up;
//! - [`target_http`]: one target's HTTP clients and credentials, every request's
//!   `Authorization` and a refusal's second chance;
//! - [`listing`]: the tool list walked, fingerprinted, diffed, classified and pinned;
//! - [`channel`]: the notification channel kept open, re-opened with [`backoff`];
//! - [`task`]: the pieces an event loop is made of;
//! - [`secret`], [`text`]: values kept out of logs, and server text made safe to show.

pub mod backoff;
pub mod channel;
pub mod listing;
pub mod mcp;
pub mod net;
pub mod oauth;
pub mod secret;
pub mod target_http;
pub mod task;
pub mod text;
