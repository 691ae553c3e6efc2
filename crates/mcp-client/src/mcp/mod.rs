//! The MCP wire client: the product's own core, because the probe must see and count every
//! request, page, cursor and notification that a real client would meet.
//!
//! Layers, bottom up: [`jsonrpc`] framing, [`http`] (Streamable HTTP: POST answers as JSON or SSE,
//! the GET stream, size caps), [`session`] (the legacy-era handshake and headers), [`version`]
//! (the one table of protocol versions and eras). Server-initiated
//! messages from any stream land in one [`inbox::Inbox`]. Every failure is an [`McpError`] with a
//! [`Reason`] from a fixed set. The modern (2026-07-28) era is [`modern::ModernClient`] beside the
//! legacy [`session::Session`]; [`client::Client`] is the one face of both that the probe and
//! `check` use.

pub mod client;
/// One ordered two-way channel with responses matched by id (stdio, HTTP+SSE).
pub mod duplex;
pub mod error;
pub mod http;
pub mod inbox;
pub mod jsonrpc;
/// The deprecated HTTP+SSE transport of 2024-11-05: one GET stream in, a POST per message out.
pub mod legacy_sse;
pub mod modern;
/// `x-mcp-header` annotations: which tool definitions a Streamable HTTP client must drop.
pub mod param_headers;
pub mod responder;
pub mod session;
pub mod sse_lines;
/// The stdio transport: a server process spoken to in newline-delimited JSON-RPC.
pub mod stdio;
pub mod version;

pub use client::{Channel, ChannelStream, Client, Dialer, SseEndpoint};
pub use error::{McpError, Reason, truncate};
pub use http::{HttpTransport, Limits};
pub use inbox::{Inbox, Requests};
pub use responder::Responder;
pub use session::{ServerInfo, Session};
pub use version::{Era, ProtocolVersion};
