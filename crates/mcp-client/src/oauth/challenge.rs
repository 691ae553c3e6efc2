//! `WWW-Authenticate: Bearer …` (RFC 6750 §3, RFC 9728 §5.1): the parameters a refusal carries.
//!
//! Servers put several challenges in one header (`Bearer …, DPoP …`), quote or do not quote
//! values, and vary the case of scheme and parameter names. We read only the first `Bearer`
//! challenge's `resource_metadata`, `scope` and `error`, and tolerate anything else, since a
//! parse failure here would turn a recoverable 401 into an outage.

/// Cap on how much of the header we look at.
const MAX_HEADER_BYTES: usize = 8 * 1024;
/// Cap on the number of scopes taken from one challenge.
const MAX_SCOPES: usize = 64;

/// What a `Bearer` challenge asked for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Challenge {
    pub resource_metadata: Option<String>,
    pub scopes: Vec<String>,
    pub error: Option<String>,
}

impl Challenge {
    pub(crate) fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// The first `Bearer` challenge of a `WWW-Authenticate` value, if there is one.
pub(crate) fn parse(header: &str) -> Option<Challenge> {
    let mut end = header.len().min(MAX_HEADER_BYTES);
    while !header.is_char_boundary(end) {
        end -= 1;
    }
    let s = &header.as_bytes()[..end];
    let mut i = 0;
    let mut scheme: Option<&[u8]> = None;
    let mut found: Option<Challenge> = None;
    while i < s.len() {
        // Separators between challenges and parameters.
        if s[i] == b',' || s[i].is_ascii_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        while i < s.len() && is_tchar(s[i]) {
            i += 1;
        }
        if i == start {
            i += 1; // not a token: skip the byte
            continue;
        }
        let name = &s[start..i];
        let mut j = i;
        while j < s.len() && s[j] == b' ' {
            j += 1;
        }
        if j < s.len() && s[j] == b'=' {
            // A parameter `name=value` of the current challenge (or token68 padding).
            j += 1;
            while j < s.len() && s[j] == b' ' {
                j += 1;
            }
            let (value, next) = read_value(s, j);
            i = next;
            let bearer = scheme.is_some_and(|sc| sc.eq_ignore_ascii_case(b"bearer"));
            if let (true, Some(ch)) = (bearer, found.as_mut()) {
                set_param(ch, name, value);
            }
        } else {
            // A new challenge: once the Bearer one is over, stop.
            if found.is_some() {
                break;
            }
            scheme = Some(name);
            if name.eq_ignore_ascii_case(b"bearer") {
                found = Some(Challenge::default());
            }
        }
    }
    found
}

fn set_param(ch: &mut Challenge, name: &[u8], value: String) {
    if name.eq_ignore_ascii_case(b"resource_metadata") {
        ch.resource_metadata.get_or_insert(value);
    } else if name.eq_ignore_ascii_case(b"scope") {
        if ch.scopes.is_empty() {
            ch.scopes = value
                .split(' ')
                .filter(|s| !s.is_empty())
                .take(MAX_SCOPES)
                .map(str::to_owned)
                .collect();
        }
    } else if name.eq_ignore_ascii_case(b"error") {
        ch.error.get_or_insert(value);
    }
}

/// A quoted-string (with `\` escapes) or a token; returns the value and the index after it.
fn read_value(s: &[u8], mut i: usize) -> (String, usize) {
    let mut out = Vec::new();
    if i < s.len() && s[i] == b'"' {
        i += 1;
        while i < s.len() {
            match s[i] {
                b'\\' if i + 1 < s.len() => {
                    out.push(s[i + 1]);
                    i += 2;
                }
                b'"' => {
                    i += 1;
                    break;
                }
                c => {
                    out.push(c);
                    i += 1;
                }
            }
        }
    } else {
        while i < s.len() && s[i] != b',' && !s[i].is_ascii_whitespace() {
            out.push(s[i]);
            i += 1;
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), i)
}

/// RFC 9110 `tchar`.
fn is_tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_quoted_parameters() {
        let c = parse(
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp", scope="files:read files:write""#,
        )
        .unwrap();
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource/mcp")
        );
        assert_eq!(c.scopes, ["files:read", "files:write"]);
        assert_eq!(c.error, None);
    }

    #[test]
    fn tolerates_case_tokens_escapes_and_other_challenges() {
        let c = parse(
            r#"DPoP algs="ES256", bearer Error=insufficient_scope, SCOPE="a \"b\"",resource_metadata=https://x/y, Basic realm="r""#,
        )
        .unwrap();
        assert!(c.insufficient_scope());
        assert_eq!(c.scopes, ["a", "\"b\""]);
        assert_eq!(c.resource_metadata.as_deref(), Some("https://x/y"));
    }

    #[test]
    fn parameters_of_other_schemes_are_not_taken() {
        let c = parse(r#"Bearer realm="r", DPoP scope="other", error="x""#).unwrap();
        assert!(c.scopes.is_empty());
        assert_eq!(c.error, None);
        assert_eq!(parse(r#"Basic realm="x", scope="y""#), None);
        assert_eq!(parse(""), None);
        assert_eq!(parse("Bearer").unwrap(), Challenge::default());
    }

    #[test]
    fn garbage_and_unterminated_quotes_do_not_panic() {
        for h in [
            "Bearer scope=\"abc",
            "Bearer ,,, = = \"",
            "Bearer scope=\"a\\",
            "\u{1F600} Bearer error=é",
            "Bearer token68abc==",
        ] {
            let _ = parse(h);
        }
        assert_eq!(parse("Bearer error=é").unwrap().error.as_deref(), Some("é"));
    }
}
