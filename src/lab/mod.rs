//! The lab: an MCP server of our own that reproduces, on demand, the failures real servers and
//! gateways produce by accident. It backs `--demo` and the end-to-end tests.

pub mod demo;
pub mod kb;
pub mod server;

pub use server::{Behaviour, Cursors, Lab};
