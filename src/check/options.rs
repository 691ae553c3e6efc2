//! What `check` is asked to do: the options the command line fills in, and the checks of the
//! two values it parses itself (`--arguments`, `--protocol-version`). Apart from the run so the
//! CLI can build and validate options without pulling in the session code, and so neither error
//! echoes a value that may hold a secret.

use std::time::Duration;

use serde_json::Value;

use crate::config::Secret;
use mcp_client::mcp::{ProtocolVersion, truncate};

/// What to check and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The server: a URL with its HTTP transport (`--transport`; `auto`: Streamable HTTP, then
    /// HTTP+SSE when the server refuses it), or a program on stdio (`-- PROGRAM ARGS`).
    pub endpoint: crate::config::Endpoint,
    /// `--legacy-clients`: for a modern server, also check what a 2025-era client hears.
    pub legacy_clients: bool,
    /// Extra request headers ('Authorization' …); values are never printed.
    pub headers: Vec<(String, Secret)>,
    /// `--http-config FILE`: credentials, TLS and proxy, as a target's `http_config` blocks.
    pub http: crate::config::HttpClientConfig,
    /// Deadline of each request.
    pub timeout: Duration,
    /// The protocol version offered in `initialize` (default: the newest this client speaks).
    pub protocol_version: Option<ProtocolVersion>,
    /// Page cap of each walk.
    pub max_pages: u32,
    /// Byte cap of each walk's listing, across its pages.
    pub max_listing_bytes: usize,
    /// Keep the session this long waiting for `notifications/tools/list_changed`.
    pub listen_for: Option<Duration>,
    /// Call one tool, behind the side-effect guard.
    pub call: Option<Call>,
    /// `--pins FILE`, read and checked before any request: the listing must match it.
    pub pins: Option<mcp_client::listing::changes::pins::Pins>,
}

/// `--call TOOL --arguments JSON [--allow-side-effects]`.
#[derive(Debug, Clone)]
pub struct Call {
    pub tool: String,
    pub arguments: serde_json::Map<String, Value>,
    pub allow_side_effects: bool,
}

/// Parse `--arguments`: a JSON object. The error never echoes the text (it may hold secrets).
pub fn parse_arguments(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("--arguments must be a JSON object, like {} or {\"q\": \"x\"}".into()),
        Err(e) => Err(format!(
            "--arguments is not JSON (line {}, column {})",
            e.line(),
            e.column()
        )),
    }
}

/// Check a `--protocol-version` value against the versions this client speaks.
pub fn parse_protocol_version(v: &str) -> Result<ProtocolVersion, String> {
    ProtocolVersion::parse(v).ok_or_else(|| {
        format!(
            "--protocol-version {:?} is not one this client speaks ({})",
            truncate(v, 40),
            ProtocolVersion::list()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_and_versions_are_validated_without_echoing() {
        assert!(parse_arguments("{}").unwrap().is_empty());
        assert!(parse_arguments("[1]").is_err());
        let e = parse_arguments("{\"token\": secret").unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(parse_protocol_version("2025-06-18").is_ok());
        assert!(parse_protocol_version("2026-07-28").is_ok());
        assert!(parse_protocol_version("2026-13-01").is_err());
    }
}
