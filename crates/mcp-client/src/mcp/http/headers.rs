//! The headers this client sets on a request besides the configured ones: the session's id and
//! version, the modern era's method, name and parameter headers, and the encoding that makes any
//! text a valid header value. Kept apart so every header rule of the spec is read in one place.

use reqwest::header::{HeaderName, HeaderValue};

/// Per-session headers the client owns.
#[derive(Debug, Clone, Default)]
pub struct SessionHeaders {
    pub session_id: Option<HeaderValue>,
    pub protocol_version: Option<HeaderValue>,
}

pub(super) const MCP_SESSION_ID: &str = "mcp-session-id";
pub(super) const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";
pub(super) const LAST_EVENT_ID: &str = "last-event-id";
pub(super) const MCP_METHOD: &str = "mcp-method";
pub(super) const MCP_NAME: &str = "mcp-name";

/// The headers a modern-era (2026-07-28) POST carries besides the configured ones: the version
/// (equal to the one in `_meta`), the method, and for `tools/call`-like methods the name.
#[derive(Debug, Clone)]
pub struct ModernHeaders {
    pub protocol_version: HeaderValue,
    pub method: HeaderValue,
    pub name: Option<HeaderValue>,
    /// `Mcp-Param-*` headers of a `tools/call` (the tool's `x-mcp-header` parameters).
    pub params: Vec<(HeaderName, HeaderValue)>,
}

impl ModernHeaders {
    /// Headers for `method` (and `name`, encoded as the spec's value-encoding section says).
    pub fn new(protocol_version: &'static str, method: &str, name: Option<&str>) -> Self {
        ModernHeaders {
            protocol_version: HeaderValue::from_static(protocol_version),
            method: header_safe(method),
            name: name.map(header_safe),
            params: Vec::new(),
        }
    }
}

/// A header value for `text`: as is when it is plain visible ASCII (spaces inside allowed) and
/// not itself shaped like the sentinel, else `=?base64?…?=` of its UTF-8 bytes.
pub fn header_safe(text: &str) -> HeaderValue {
    use base64::Engine as _;
    let visible = |b: u8| b == b' ' || (0x21..=0x7e).contains(&b);
    let sentinel = text.starts_with("=?base64?") && text.ends_with("?=");
    let padded = text.starts_with(' ') || text.ends_with(' ');
    let plain = !text.is_empty() && text.bytes().all(visible) && !padded && !sentinel;
    let value = if plain {
        text.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
        )
    };
    HeaderValue::from_str(&value).expect("visible ASCII is a valid header value")
}

/// A header value of an answer, in memory of its own. hyper parses a response's header values as
/// slices of the connection's read buffer (8 KiB or more), so a value kept from an answer — the
/// session id, for the session's life — would keep that whole buffer alive with it: measured at
/// 8 KiB per session at 2,000 sessions. Copied, it holds its own few bytes.
pub(crate) fn owned_value(v: &HeaderValue) -> HeaderValue {
    let mut owned = HeaderValue::from_bytes(v.as_bytes()).expect("the bytes of a header value");
    owned.set_sensitive(v.is_sensitive());
    owned
}

/// A session id the client may send back: visible ASCII only (0x21 to 0x7E), as the spec requires
/// of servers (transports § Session Management).
pub(crate) fn session_id_is_visible_ascii(id: &HeaderValue) -> bool {
    id.as_bytes().iter().all(|b| (0x21..=0x7e).contains(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A value parsed as a slice of a larger buffer (as hyper parses every answer's headers) is
    /// kept as a copy of its own bytes, not as a share of that buffer.
    #[test]
    fn a_kept_value_owns_its_bytes() {
        let buffer = bytes::Bytes::from(format!(
            "HTTP/1.1 200 OK\r\nmcp-session-id: abc123\r\n{}",
            "x".repeat(8192)
        ));
        let start = buffer.iter().position(|b| *b == b'a').unwrap();
        let parsed = HeaderValue::from_maybe_shared(buffer.slice(start..start + 6)).unwrap();
        assert_eq!(
            parsed.as_bytes().as_ptr(),
            buffer[start..].as_ptr(),
            "the parse shares the buffer"
        );
        let kept = owned_value(&parsed);
        assert_eq!(kept, parsed);
        let inside = buffer.as_ptr_range();
        assert!(
            !inside.contains(&kept.as_bytes().as_ptr()),
            "the kept value is not a share of the buffer"
        );
        let mut secret = parsed.clone();
        secret.set_sensitive(true);
        assert!(owned_value(&secret).is_sensitive());
    }
}
