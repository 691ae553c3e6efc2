//! The probe: one long-lived connection per (target, connection index), behaving as a correct
//! MCP client and auditing its own cache.
//!
//! - [`walker`] follows cursors with caps and guards and yields fingerprints;
//! - [`changes`] classifies definition changes (breaking, compatible, unknown) and checks
//!   listings against pinned baselines;
//! - [`items`] holds definition fingerprints, the item sets a connection keeps and their diff;
//! - [`connection`] is the per-connection state machine (session, channel, walks, audit,
//!   liveness, functional probes), sequencing small parts with one job each: [`channel`] keeps
//!   the notification channel open, `schedule` picks the next walk, [`audit`] judges whether a
//!   difference was announced, `events` records to metrics, status page and log together;
//! - [`contract`] says what the server promised a caching client in its era, and so what a
//!   stale verdict means; [`legacy_watch`] measures what a 2025-era client of a modern server
//!   hears;
//! - [`functional`] judges `tools/call` probes and guards against side effects;
//! - [`status`] keeps what the status page shows: state, drift by name, a bounded timeline;
//! - [`supervisor`] owns the connection tasks and applies config diffs.

pub mod audit;
pub mod change_watch;
pub mod connection;
pub mod contract;
mod events;
pub mod functional;
pub mod legacy_watch;
mod list_view;
pub mod metrics;
pub mod repeats;
mod schedule;
pub mod status;
pub mod supervisor;
mod trigger;

pub use supervisor::{Applied, Supervisor};
pub use trigger::Trigger;
