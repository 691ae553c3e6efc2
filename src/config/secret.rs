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

/// The URL as text that is safe to log or show on a status page.
///
/// The password (if any) is replaced by `<redacted>`, and so are the query string and
/// the fragment when present; scheme, host, port and path are kept:
/// `https://user:pw@h:8443/mcp?key=abc` becomes `https://user:<redacted>@h:8443/mcp?<redacted>`.
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
    // host, port and path.
    out.push_str(&url[Position::BeforeHost..Position::AfterPath]);
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
    fn redact_url_handles_urls_without_authority() {
        assert_eq!(
            redact("mailto:someone@example.com"),
            "mailto:someone@example.com"
        );
        assert_eq!(redact("data:text/plain?x=1"), "data:text/plain?<redacted>");
    }
}
