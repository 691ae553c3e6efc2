//! The one rule for a URL a server hands over: where may it take us?
//!
//! A server names URLs for the client to use: the HTTP+SSE `endpoint` event (where to POST, with
//! the configured headers), a 401's `resource_metadata`, the `authorization_servers` of its
//! Protected Resource Metadata. Following such a URL blindly lets one server make the exporter
//! send requests (and credentials) anywhere — another host, a cloud metadata address — so every
//! such URL is checked here, against origins the configuration chose: the target's own origin
//! and what its configuration names (`oauth2.issuer`, `oauth2.metadata_origins`). An origin is
//! scheme, host and port (RFC 6454): `http://h` and `https://h`, or `h` and `h:8443`, differ.
//! Only http and https URLs can be trusted at all.

use url::{Origin, Url};

/// The origins a server-supplied URL may point to; built from the configuration, never from what
/// a server says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origins(Vec<Origin>);

impl Origins {
    /// Only the origin of `base` (the configured URL a server's answer came from).
    pub fn of(base: &Url) -> Origins {
        Origins(Vec::new()).with(base)
    }

    /// These and the origin of `url` (ignored unless http or https).
    pub fn with(mut self, url: &Url) -> Origins {
        let origin = url.origin();
        if is_web(url) && !self.0.contains(&origin) {
            self.0.push(origin);
        }
        self
    }

    /// Whether `url` is an http(s) URL on one of these origins.
    pub fn allow(&self, url: &Url) -> bool {
        is_web(url) && self.0.contains(&url.origin())
    }
}

/// Whether `a` and `b` share an origin (and both are http or https).
pub fn same_origin(a: &Url, b: &Url) -> bool {
    Origins::of(a).allow(b)
}

/// The origin of `url` as text (`https://host:port`) for a message: no user info, path or query,
/// so nothing a URL may carry as a secret.
pub fn shown(url: &Url) -> String {
    url.origin().ascii_serialization()
}

fn is_web(url: &Url) -> bool {
    matches!(url.scheme(), "http" | "https") && url.has_host()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn u(s: &str) -> Url {
        Url::parse(s).unwrap()
    }

    #[test]
    fn scheme_host_and_port_make_the_origin() {
        let base = u("https://kb.example/mcp/sse");
        assert!(same_origin(&base, &u("https://KB.example:443/other?x=1")));
        for other in [
            "http://kb.example/mcp",
            "https://kb.example:8443/mcp",
            "https://evil.example/mcp",
            "https://kb.example.evil.example/mcp",
            "http://169.254.169.254/latest/meta-data",
        ] {
            assert!(!same_origin(&base, &u(other)), "{other}");
        }
    }

    #[test]
    fn only_http_urls_are_ever_allowed() {
        let o = Origins::of(&u("https://kb.example/mcp")).with(&u("file:///etc/passwd"));
        assert!(!o.allow(&u("file:///etc/passwd")));
        assert!(!o.allow(&u("data:text/plain,x")));
        assert!(!Origins::of(&u("data:text/plain,x")).allow(&u("data:text/plain,x")));
    }

    #[test]
    fn named_origins_are_added() {
        let o = Origins::of(&u("https://kb.example/mcp")).with(&u("https://as.example/tenant"));
        assert!(o.allow(&u("https://as.example/.well-known/openid-configuration")));
        assert!(o.allow(&u(
            "https://kb.example/.well-known/oauth-protected-resource"
        )));
        assert!(!o.allow(&u("https://other.example/")));
        assert_eq!(
            shown(&u("https://u:p@as.example:444/x?k=v")),
            "https://as.example:444"
        );
    }
}
