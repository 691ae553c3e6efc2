//! Which request paths a proxy forwards: its MCP path and nothing else of the upstream's host.
//!
//! A proxy is configured for one MCP endpoint (`upstream: http://host/ok/mcp`), but the host
//! behind it may serve much more: other MCP servers (`/gb/mcp`), admin or stats pages, metrics.
//! Forwarding every path would publish all of that on the proxy's port, to whoever can reach it.
//! So a request is forwarded only when its path is
//!
//! - the upstream URL's path, as written (one trailing `/` more or less is the same path: SDKs and
//!   routers differ on it), byte for byte otherwise: no decoding, no `..` resolution, so no
//!   spelling of another path can pass;
//! - a message path the upstream itself named in an `endpoint` event (HTTP+SSE, 2024-11-05) on a
//!   stream answered for the MCP path, resolved with the probe's own rule
//!   ([`mcp_client::mcp::legacy_sse::message_endpoint`]: same origin only), at most
//!   [`MAX_MESSAGE_PATHS`] of them, the oldest forgotten first;
//! - with `forward_oauth_metadata`, the OAuth Protected Resource Metadata paths of the MCP path
//!   (RFC 9728 § 3.1: `/.well-known/oauth-protected-resource` followed by the path, and the
//!   host's root document).
//!
//! Anything else is answered 404 by the proxy, without asking the upstream, and counted as
//! `mcp_proxy_rejected_requests_total{reason="unknown_path"}`.

use std::collections::VecDeque;
use std::sync::Mutex;

/// Most message paths learnt from `endpoint` events: the SDKs use one path for every session
/// (the session is in the query), so a handful is plenty, and the list cannot grow with
/// sessions whatever the upstream sends.
pub const MAX_MESSAGE_PATHS: usize = 8;

/// The RFC 9728 well-known prefix.
const PROTECTED_RESOURCE: &str = "/.well-known/oauth-protected-resource";

/// The paths one proxy forwards.
pub struct Paths {
    upstream: url::Url,
    /// Fixed at start: the MCP path and, when configured, the metadata paths.
    fixed: Vec<String>,
    learnt: Mutex<VecDeque<String>>,
}

impl Paths {
    pub fn new(upstream: &url::Url, forward_oauth_metadata: bool) -> Self {
        let mcp = upstream.path().to_string();
        let mut fixed = vec![mcp.clone()];
        if forward_oauth_metadata {
            fixed.push(PROTECTED_RESOURCE.to_string());
            if mcp != "/" {
                fixed.push(format!("{PROTECTED_RESOURCE}{mcp}"));
            }
        }
        Paths {
            upstream: upstream.clone(),
            fixed,
            learnt: Mutex::new(VecDeque::new()),
        }
    }

    /// Whether a request for `path` (the raw path of its target) is forwarded.
    pub fn allows(&self, path: &str) -> bool {
        let same = |known: &str| same_path(known, path);
        self.fixed.iter().any(|p| same(p))
            || self
                .learnt
                .lock()
                .expect("paths lock")
                .iter()
                .any(|p| same(p))
    }

    /// Whether `path` is the MCP path itself (where `endpoint` events are believed).
    pub fn is_mcp(&self, path: &str) -> bool {
        same_path(self.upstream.path(), path)
    }

    /// An `endpoint` event's data on a stream of the MCP path: its path is forwarded from now on
    /// (ignored when it names another origin or is not a URI reference).
    /// Gives the endpoint's URL back (its query names the session), or none when refused.
    pub fn learn_endpoint(&self, data: &str) -> Option<url::Url> {
        let url = mcp_client::mcp::legacy_sse::message_endpoint(&self.upstream, data).ok()?;
        let path = url.path().to_string();
        let mut learnt = self.learnt.lock().expect("paths lock");
        if !self.fixed.contains(&path) && !learnt.contains(&path) {
            if learnt.len() >= MAX_MESSAGE_PATHS {
                learnt.pop_front();
            }
            learnt.push_back(path);
        }
        Some(url)
    }
}

/// `a` and `b` are the same path, byte for byte, but for one trailing `/`.
fn same_path(a: &str, b: &str) -> bool {
    fn trim(p: &str) -> &str {
        match p.strip_suffix('/') {
            Some(rest) if !rest.is_empty() => rest,
            _ => p,
        }
    }
    trim(a) == trim(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn url(s: &str) -> url::Url {
        url::Url::parse(s).expect("url")
    }

    #[test]
    fn only_the_mcp_path_is_forwarded_by_default() {
        let p = Paths::new(&url("http://h:1/ok/mcp"), false);
        for ok in ["/ok/mcp", "/ok/mcp/"] {
            assert!(p.allows(ok), "{ok}");
        }
        for no in [
            "/",
            "/stats",
            "/gb/mcp",
            "/ok/mcp/x",
            "/ok/mcpx",
            "/ok/../gb/mcp",
            "//ok/mcp",
            "/ok%2Fmcp",
            "/OK/mcp",
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/ok/mcp",
        ] {
            assert!(!p.allows(no), "{no}");
        }
    }

    #[test]
    fn oauth_metadata_paths_only_when_configured() {
        let p = Paths::new(&url("http://h:1/ok/mcp"), true);
        assert!(p.allows("/.well-known/oauth-protected-resource/ok/mcp"));
        assert!(p.allows("/.well-known/oauth-protected-resource"));
        assert!(!p.allows("/.well-known/oauth-protected-resource/gb/mcp"));
        assert!(!p.allows("/.well-known/oauth-authorization-server"));
    }

    #[test]
    fn endpoint_paths_are_learnt_same_origin_only_and_bounded() {
        let p = Paths::new(&url("http://h:1/sse"), false);
        assert!(p.is_mcp("/sse") && !p.is_mcp("/messages/"));
        assert!(!p.allows("/messages/"));
        p.learn_endpoint("/messages/?session_id=ab");
        assert!(p.allows("/messages/"));
        p.learn_endpoint("http://elsewhere:2/steal");
        assert!(!p.allows("/steal"));
        for i in 0..MAX_MESSAGE_PATHS {
            p.learn_endpoint(&format!("/m{i}"));
        }
        assert!(!p.allows("/messages/"), "the oldest is forgotten");
        assert!(p.allows(&format!("/m{}", MAX_MESSAGE_PATHS - 1)));
    }
}
