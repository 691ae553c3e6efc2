//! Reaching a target over HTTP: credentials, TLS and proxy, shared by all its connections.
//!
//! * `client`: [`TargetHttp`], one per target: the reqwest clients (one pool per connection of
//!   a target with several; the process-wide client for a default single-connection target;
//!   rebuilt when TLS files change) and the credentials; every request of every transport is
//!   sent through it.
//! * `auth`: what goes in `Authorization` (static credentials, re-read from files; OAuth 2.0
//!   tokens from `crate::oauth`).
//! * `tls`: `tls_config` → rustls, and the checks of key material shared with config loading.
//! * `proxy`: `proxy_url`, `no_proxy`, `proxy_from_environment`.
//! * `body`: reading an answer up to a byte cap, and its media type.
//! * `files`: reading credentials files, bounded, and noticing that they changed.
//! * `origin`: the one rule for a URL a server hands over (same origin, or one the
//!   configuration names).
//! * `refusal`: what a 401/403 said, what to do about it, and the bounded auth failure steps.
//!
//! Contract (lead, 2026-12-03), as built:
//! * `TargetHttp::new(target: &str, cfg: &HttpClientConfig, resource: &url::Url) -> Result<Arc<TargetHttp>, AuthError>`
//! * `TargetHttp::client(&self) -> reqwest::Client`
//! * `TargetHttp::authorization(&self) -> impl Future<Output = Result<Option<HeaderValue>, AuthError>>`
//! * `TargetHttp::refused(&self, refusal: &Refusal) -> impl Future<Output = Result<Retry, AuthError>>`

pub mod auth;
pub mod body;
mod client;
mod egress_proxy;
pub mod files;
pub mod http_config;
pub mod origin;
pub mod refusal;
pub mod tls;

/// An HTTP client with the exporter's TLS roots and no redirects (the proxy forwards through it).
pub use client::build_client;
pub use client::{FailureSink, SendError, TargetHttp};
