//! The probe: one long-lived connection per (target, connection index), behaving as a correct
//! MCP client and auditing its own cache.
//!
//! - [`walker`] follows cursors with caps and guards and yields fingerprints;
//! - [`toolset`] holds tool fingerprints, the tool sets a connection keeps and their diff;
//! - [`connection`] is the per-connection state machine (session, stream, walks, audit, ping,
//!   functional probes);
//! - [`functional`] judges `tools/call` probes and guards against side effects;
//! - [`status`] keeps what the status page shows: state, drift by name, a bounded timeline;
//! - [`supervisor`] owns the connection tasks and applies config diffs.

pub mod backoff;
pub mod connection;
pub mod functional;
pub mod repeats;
pub mod status;
pub mod supervisor;
pub mod toolset;
mod trigger;
pub mod walker;

pub use supervisor::{Applied, Supervisor};
pub use trigger::Trigger;
