//! The lab: an MCP server of our own that reproduces, on demand, the failures real servers and
//! gateways produce by accident. It backs `--demo` and the end-to-end tests.

pub mod behaviour;
pub mod demo_clients;
pub mod kb;
pub mod kb_lists;
pub mod listing;
pub mod modern;
pub mod scenarios;
pub mod server;
mod state;

pub use behaviour::{Behaviour, CacheScope, Cursors, Era, Instances};
pub use server::Lab;
pub use state::ResumeCounts;
