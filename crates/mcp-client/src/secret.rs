//! Values that must never reach a log line, an error message or a status page.
//!
//! Header values from the configuration (tokens, API keys) are wrapped in [`Secret`]
//! so that `{:?}` and `{}` print `<redacted>`; the value is only reachable through an
//! explicit [`Secret::expose`] call at the point where the request is built.
//! [`redact_url`] does the same for the parts of a URL that commonly carry credentials.

use std::fmt;

/// The text printed in place of a secret value.
const REDACTED: &str = "<redacted>";

/// A secret string (for example an `Authorization` header value).
///
/// `Debug` and `Display` print `<redacted>`; use [`Secret::expose`] to get the value.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Secret {
        Secret(value.into())
    }

    /// The secret value. Call this only where the value is handed to the HTTP client.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Secret {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Secret {
        Secret(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(REDACTED)
    }
}

/// The URL as text that is safe to log or show on a status page: the one redaction rule of the
/// exporter, used wherever a URL is shown (landing page, `/status.json`, status page, logs,
/// `check`, `--config.check`).
///
/// The password (if any) is replaced by `<redacted>`, and so are the query string and
/// the fragment when present; scheme, host and port are kept, and the path is kept except for
/// segments that look like tokens ([`token_like`]):
/// `https://user:pw@h:8443/mcp?key=abc` becomes `https://user:<redacted>@h:8443/mcp?<redacted>`,
/// `https://h/mcp/sk-abc123/sse` becomes `https://h/mcp/<redacted>/sse`.
/// A user name without a password is redacted too: `https://<token>@host/` is a common way to
/// put an API key in a URL, so only a name that has a password beside it is shown.
pub fn redact_url(url: &url::Url) -> String {
    use url::Position;

    let mut out = String::with_capacity(url.as_str().len());
    // "https://" (or "mailto:" for URLs without an authority).
    out.push_str(&url[..Position::BeforeUsername]);
    let has_password = url.password().is_some();
    if has_password {
        out.push_str(url.username());
        out.push(':');
        out.push_str(REDACTED);
        out.push('@');
    } else if !url.username().is_empty() {
        out.push_str(REDACTED);
        out.push('@');
    }
    // host and port, then the path without its token-like segments.
    match url.path_segments() {
        Some(segments) => {
            out.push_str(&url[Position::BeforeHost..Position::AfterPort]);
            for segment in segments {
                out.push('/');
                out.push_str(if token_like(segment) {
                    REDACTED
                } else {
                    segment
                });
            }
        }
        // No hierarchical path (`mailto:`, `data:`): shown as it is.
        None => out.push_str(&url[Position::BeforeHost..Position::AfterPath]),
    }
    if url.query().is_some() {
        out.push('?');
        out.push_str(REDACTED);
    }
    if url.fragment().is_some() {
        out.push('#');
        out.push_str(REDACTED);
    }
    out
}

/// Shortest path segment taken for a token: below it, ids and words are too short to be secrets
/// worth hiding and too common to lose (`v1`, `mcp`, `sse`, `2025-06-18` has no letter).
const TOKEN_MIN_BYTES: usize = 8;
/// From this length a segment without word separators is taken for a token even without a
/// digit (a random string of letters); `oauth-protected-resource` has separators.
const OPAQUE_MIN_BYTES: usize = 20;

/// Whether a path segment (as it appears in the URL, percent-encoded) looks like a credential:
/// at least [`TOKEN_MIN_BYTES`] long and mixing letters and digits (`sk-abc123`, a UUID, an API
/// key, a hex or base64 token), or at least [`OPAQUE_MIN_BYTES`] long with no `-`, `_` or `.`
/// between words. The rule errs towards hiding: an id in a path (a tenant's UUID) is hidden too,
/// which costs a reader of the status page little, while a token shown there is a leak.
pub fn token_like(segment: &str) -> bool {
    let len = segment.len();
    if len < TOKEN_MIN_BYTES {
        return false;
    }
    let letter = segment.bytes().any(|b| b.is_ascii_alphabetic());
    let digit = segment.bytes().any(|b| b.is_ascii_digit());
    let words = segment.bytes().any(|b| matches!(b, b'-' | b'_' | b'.'));
    (letter && digit) || (len >= OPAQUE_MIN_BYTES && !words)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SENTINEL: &str = "s3cr3t-token";

    #[test]
    fn secret_debug_and_display_are_redacted() {
        let s = Secret::new(format!("Bearer {SENTINEL}"));
        assert_eq!(format!("{s:?}"), "<redacted>");
        assert_eq!(format!("{s}"), "<redacted>");
        assert_eq!(
            format!("{:?}", vec![("Authorization", s.clone())]),
            "[(\"Authorization\", <redacted>)]"
        );
        assert_eq!(s.expose(), "Bearer s3cr3t-token");
    }

    #[test]
    fn secret_equality_and_conversions() {
        assert_eq!(Secret::from("a"), Secret::new(String::from("a")));
        assert_ne!(Secret::from("a"), Secret::from("b"));
        assert_eq!(Secret::from(String::from("x")).clone().expose(), "x");
        assert_eq!(Secret::default().expose(), "");
    }

    fn redact(s: &str) -> String {
        redact_url(&url::Url::parse(s).unwrap())
    }

    #[test]
    fn redact_url_keeps_plain_urls() {
        assert_eq!(
            redact("https://kb.example.com/mcp"),
            "https://kb.example.com/mcp"
        );
        assert_eq!(redact("http://127.0.0.1:8080/"), "http://127.0.0.1:8080/");
        assert_eq!(redact("http://[::1]:9000/a/b"), "http://[::1]:9000/a/b");
    }

    #[test]
    fn redact_url_hides_a_lone_user_name() {
        let r = redact(&format!("https://{SENTINEL}@h.example/mcp"));
        assert_eq!(r, "https://<redacted>@h.example/mcp");
        assert!(!r.contains(SENTINEL));
    }

    #[test]
    fn redact_url_hides_password_query_and_fragment() {
        let r = redact(&format!(
            "https://user:{SENTINEL}@h.example:8443/mcp?key={SENTINEL}&x=1#{SENTINEL}"
        ));
        assert_eq!(
            r,
            "https://user:<redacted>@h.example:8443/mcp?<redacted>#<redacted>"
        );
        assert!(!r.contains(SENTINEL));

        assert_eq!(
            redact(&format!("https://:{SENTINEL}@h.example/")),
            "https://:<redacted>@h.example/"
        );
        assert_eq!(
            redact("https://h.example/mcp?"),
            "https://h.example/mcp?<redacted>"
        );
        assert_eq!(
            redact(&format!("https://h.example/mcp?token={SENTINEL}")),
            "https://h.example/mcp?<redacted>"
        );
    }

    #[test]
    fn redact_url_hides_path_segments_that_look_like_tokens() {
        // The issue-22 case: a token in the path was shown on `/` and in /status.json.
        assert_eq!(
            redact("https://host.example/mcp/sk-abc123/"),
            "https://host.example/mcp/<redacted>/"
        );
        assert_eq!(
            redact(&format!("https://h.example/u/{SENTINEL}/sse?k=v")),
            "https://h.example/u/<redacted>/sse?<redacted>"
        );
        assert_eq!(
            redact("https://h.example/t/0f8fad5b-d9cb-469f-a165-70867728950e/mcp"),
            "https://h.example/t/<redacted>/mcp"
        );
        assert_eq!(
            redact("https://h.example/x/AbCdEfGhIjKlMnOpQrStUv"),
            "https://h.example/x/<redacted>"
        );
        // Words, versions, dates and short ids stay readable.
        for plain in [
            "https://h.example/api/v1/mcp",
            "https://h.example/2025-06-18/mcp/",
            "https://h.example/.well-known/oauth-protected-resource/mcp",
            "https://h.example/.well-known/oauth-authorization-server",
            "https://h.example/tenant1/mcp",
            "http://127.0.0.1:8080/kb/mcp",
        ] {
            assert_eq!(redact(plain), plain);
        }
    }

    #[test]
    fn redact_url_handles_urls_without_authority() {
        assert_eq!(
            redact("mailto:someone@example.com"),
            "mailto:someone@example.com"
        );
        assert_eq!(redact("data:text/plain?x=1"), "data:text/plain?<redacted>");
    }
}
