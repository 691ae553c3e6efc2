//! Every way a request to an MCP server can fail, folded into a small fixed set of reasons.
//!
//! The reason is what operators alert on, so it is a closed enum rendered as a label value; the
//! free text (status line, server message, I/O error) stays in the error for logs only.

use std::fmt;

/// The fixed label set of `reason` on failure counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Reason {
    /// No complete answer within the deadline.
    Timeout,
    /// The name did not resolve.
    Dns,
    /// TCP connect failed (refused, unreachable, reset during connect).
    Connect,
    /// TLS handshake or certificate verification failed.
    Tls,
    /// Any other I/O failure while sending or reading.
    Transport,
    /// HTTP 401 or 403.
    Auth,
    /// HTTP 404 on a request that carried a session id: the session is gone.
    SessionExpired,
    /// Another 4xx status.
    Http4xx,
    /// A 5xx status.
    Http5xx,
    /// A 3xx status: redirects are never followed.
    Redirect,
    /// A response with a content type that is neither JSON nor an event stream.
    ContentType,
    /// The body or an event exceeded its size cap.
    BodyTooLarge,
    /// The body was not valid JSON-RPC JSON.
    InvalidJson,
    /// Valid JSON, but not what the protocol requires (wrong id, missing fields, bad result shape).
    InvalidResponse,
    /// The event stream ended before the response arrived.
    StreamClosed,
    /// The server answered with a JSON-RPC error object.
    JsonrpcError,
    /// The server chose a protocol version this client does not speak.
    UnsupportedVersion,
}

impl Reason {
    /// All reasons, for documentation and tests.
    pub const ALL: [Reason; 17] = [
        Reason::Timeout,
        Reason::Dns,
        Reason::Connect,
        Reason::Tls,
        Reason::Transport,
        Reason::Auth,
        Reason::SessionExpired,
        Reason::Http4xx,
        Reason::Http5xx,
        Reason::Redirect,
        Reason::ContentType,
        Reason::BodyTooLarge,
        Reason::InvalidJson,
        Reason::InvalidResponse,
        Reason::StreamClosed,
        Reason::JsonrpcError,
        Reason::UnsupportedVersion,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Timeout => "timeout",
            Reason::Dns => "dns",
            Reason::Connect => "connect",
            Reason::Tls => "tls",
            Reason::Transport => "transport",
            Reason::Auth => "auth",
            Reason::SessionExpired => "session_expired",
            Reason::Http4xx => "http_4xx",
            Reason::Http5xx => "http_5xx",
            Reason::Redirect => "redirect",
            Reason::ContentType => "content_type",
            Reason::BodyTooLarge => "body_too_large",
            Reason::InvalidJson => "invalid_json",
            Reason::InvalidResponse => "invalid_response",
            Reason::StreamClosed => "stream_closed",
            Reason::JsonrpcError => "jsonrpc_error",
            Reason::UnsupportedVersion => "unsupported_version",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed exchange: the reason (for labels) and a detail (for logs).
///
/// The detail never contains header values or the target URL: both may carry secrets.
#[derive(Debug, Clone, PartialEq)]
pub struct McpError {
    pub reason: Reason,
    pub detail: String,
    /// The JSON-RPC error code when `reason` is [`Reason::JsonrpcError`].
    pub rpc_code: Option<i64>,
    /// The HTTP status when the failure is one (3xx, 4xx, 5xx): what the spec's transport
    /// fallbacks are decided on.
    pub http_status: Option<u16>,
}

/// Longest detail kept: details end up in logs, the status page and `check` reports, and some
/// quote what a server sent.
pub const MAX_DETAIL_BYTES: usize = 512;

impl McpError {
    pub fn new(reason: Reason, detail: impl Into<String>) -> Self {
        let detail = detail.into();
        let detail = match crate::text::bounded(&detail, MAX_DETAIL_BYTES) {
            std::borrow::Cow::Borrowed(_) => detail,
            std::borrow::Cow::Owned(bounded) => bounded,
        };
        McpError {
            reason,
            detail,
            rpc_code: None,
            http_status: None,
        }
    }

    /// A failed HTTP status, with its `reason`.
    pub fn http(reason: Reason, status: u16) -> Self {
        McpError {
            http_status: Some(status),
            ..McpError::new(reason, format!("HTTP {status}"))
        }
    }

    pub fn rpc(code: i64, message: &str) -> Self {
        McpError {
            reason: Reason::JsonrpcError,
            detail: format!("JSON-RPC error {code}: {}", truncate(message, 200)),
            rpc_code: Some(code),
            http_status: None,
        }
    }

    /// A request that could not be sent, or was refused for good (see
    /// [`crate::target_http::TargetHttp::send`]). An auth failure names its step in the detail
    /// (`unauthorized`, `token_endpoint` …): that is what the status page and `check` show.
    pub fn from_send(err: crate::target_http::SendError) -> Self {
        match err {
            crate::target_http::SendError::Http(e) => McpError::from_reqwest(&e),
            crate::target_http::SendError::Stream(fault) => McpError::from_stream(fault),
            crate::target_http::SendError::Auth { error, status } => McpError {
                http_status: status,
                ..McpError::new(
                    Reason::Auth,
                    format!("{}: {}", error.step.as_str(), error.detail),
                )
            },
        }
    }

    /// Classify why a notification stream's own socket failed (`net::stream_socket`).
    fn from_stream(fault: crate::net::stream_socket::StreamFault) -> Self {
        use crate::net::stream_socket::StreamFault;
        let detail = fault.to_string();
        let reason = match &fault {
            StreamFault::Dns(_) => Reason::Dns,
            StreamFault::Connect(_) => Reason::Connect,
            StreamFault::Tls(_) => Reason::Tls,
            StreamFault::Transport(_) if names_tls(&detail) => Reason::Tls,
            StreamFault::Transport(_) => Reason::Transport,
        };
        McpError::new(reason, truncate(&detail, 300))
    }

    /// Classify a reqwest error by walking its source chain.
    pub fn from_reqwest(err: &reqwest::Error) -> Self {
        let chain = error_chain(err);
        let reason = if err.is_timeout() {
            Reason::Timeout
        } else if chain.contains("dns error") || chain.contains("failed to lookup address") {
            Reason::Dns
        } else if names_tls(&chain) {
            Reason::Tls
        } else if err.is_connect() {
            Reason::Connect
        } else if err.is_redirect() {
            Reason::Redirect
        } else {
            Reason::Transport
        };
        McpError::new(reason, truncate(&chain, 300))
    }
}

impl fmt::Display for McpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.reason, self.detail)
    }
}

impl std::error::Error for McpError {}

/// Whether an error's text is rustls': it names a refused client certificate in an alert
/// (`CertificateRequired`, `BadCertificate`, `UnknownCA`) that may only arrive after the
/// handshake, on the first read, so such an error is a TLS failure too, not a transport one.
fn names_tls(chain: &str) -> bool {
    let lower = chain.to_ascii_lowercase();
    lower.contains("certificate")
        || lower.contains("tls")
        || lower.contains("handshake")
        || lower.contains("fatal alert")
        || chain.contains("InvalidContentType")
        || chain.contains("CorruptMessage")
}

fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut out = err.to_string();
    let mut source = err.source();
    // Bounded: error chains are short, but a cap costs nothing.
    for _ in 0..16 {
        let Some(s) = source else { break };
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    // reqwest prints the URL in its errors; it may carry a token in the query.
    strip_urls(&out)
}

/// Remove anything that looks like a URL from a log detail.
fn strip_urls(text: &str) -> String {
    text.split(' ')
        .map(|w| {
            let w2 = w.trim_start_matches('(');
            if w2.starts_with("http://") || w2.starts_with("https://") {
                "<url>"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A server-supplied string cut to at most `max` bytes and made printable (see
/// [`crate::text::bounded`]): details quote what servers send.
pub fn truncate(text: &str, max: usize) -> String {
    crate::text::bounded(text, max).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reasons_are_unique_snake_case_labels() {
        let mut seen = std::collections::BTreeSet::new();
        for r in Reason::ALL {
            let s = r.as_str();
            assert!(
                s.chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            );
            assert!(seen.insert(s), "duplicate {s}");
        }
    }

    #[test]
    fn urls_are_stripped_from_details() {
        let s = strip_urls("error sending request for url (https://kb/mcp?token=abc)");
        assert!(!s.contains("token"), "{s}");
    }

    #[test]
    fn details_are_bounded_and_printable() {
        let e = McpError::rpc(-32000, &"\x1b".repeat(10_000));
        assert!(e.detail.len() <= MAX_DETAIL_BYTES, "{}", e.detail.len());
        assert!(!e.detail.chars().any(crate::text::is_hostile));
        let e = McpError::new(Reason::InvalidResponse, "x".repeat(1 << 20));
        assert!(e.detail.len() <= MAX_DETAIL_BYTES);
    }
}
