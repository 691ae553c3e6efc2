//! Reaching a target over HTTP: credentials, TLS and proxy, shared by all its connections.
//!
//! * `refusal`: what a 401/403 said, what to do about it, and the bounded auth failure steps.

pub mod refusal;
