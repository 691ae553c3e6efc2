//! The HTTP ground both `oauth` and `target_http` stand on: option types, TLS, egress proxy,
//! bounded reading, and the rules for what a server may hand over.
//!
//! * `http_config`: the `http_config` blocks' types (credentials, TLS, proxy), validated by the
//!   exporter's configuration.
//! * `tls`: `tls_config` → rustls, and the checks of key material shared with config loading.
//! * `egress_proxy`: `proxy_url`, `no_proxy`, `proxy_from_environment`.
//! * `body`: reading an answer up to a byte cap, and its media type.
//! * `files`: reading credentials files, bounded, and noticing that they changed.
//! * `origin`: the one rule for a URL a server hands over (same origin, or one the
//!   configuration names).
//! * `refusal`: what a 401/403 said, what to do about it, and the bounded auth failure steps.
//! * `stream_socket`: a long-lived response (a notification stream) on a socket of its own,
//!   without the pooled client's per-connection machinery.

pub mod body;
pub mod egress_proxy;
pub mod files;
pub mod http_config;
pub mod origin;
pub mod refusal;
pub mod stream_socket;
pub mod tls;

/// Kernel keepalive on every socket to a target (pooled or a stream's own), so a half-open
/// notification stream is noticed.
pub const TCP_KEEPALIVE: std::time::Duration = std::time::Duration::from_secs(30);
