//! Where a change is, and what it looked like, in a form safe to show.
//!
//! Paths are JSONPath in dot notation from the tool definition (`$.inputSchema.properties.q`);
//! a key that is not a plain identifier is bracketed and quoted (`$.properties["a b"]`). Both
//! the path and the before/after values are server text: each passes [`crate::text::bounded`]
//! (a byte cap, control and bidi characters escaped) when it is rendered, so a finding costs at
//! most a few hundred bytes whatever the server sent.

use serde_json::{Map, Value};

/// The keys a comparison of two objects descends into: each key of both once, in the order of
/// `b` then the new ones of `a`.
pub(super) fn union<'a>(b: &'a Map<String, Value>, a: &'a Map<String, Value>) -> Vec<&'a str> {
    let mut keys: Vec<&str> = b.keys().map(String::as_str).collect();
    keys.extend(a.keys().map(String::as_str).filter(|k| !b.contains_key(*k)));
    keys
}

/// Longest path kept, in bytes.
pub const MAX_PATH_BYTES: usize = 200;
/// Longest before/after value kept, in bytes (compact JSON).
pub const MAX_VALUE_BYTES: usize = 160;

/// A path being built while the comparison descends. Cheap to extend: segments are borrowed.
#[derive(Debug, Clone)]
pub struct Path<'a> {
    parent: Option<&'a Path<'a>>,
    key: Option<&'a str>,
}

impl<'a> Path<'a> {
    pub fn root() -> Path<'static> {
        Path {
            parent: None,
            key: None,
        }
    }

    /// This path and one more key.
    pub fn key<'b>(&'b self, key: &'b str) -> Path<'b>
    where
        'a: 'b,
    {
        Path {
            parent: Some(self),
            key: Some(key),
        }
    }

    /// `$.a.b["c d"]`, at most [`MAX_PATH_BYTES`], escaped.
    pub fn render(&self) -> String {
        let mut keys = Vec::new();
        let mut at = Some(self);
        while let Some(p) = at {
            if let Some(k) = p.key {
                keys.push(k);
            }
            at = p.parent;
        }
        let mut out = String::from("$");
        for k in keys.into_iter().rev() {
            if out.len() > MAX_PATH_BYTES {
                break;
            }
            if plain(k) {
                out.push('.');
                out.push_str(k);
            } else {
                out.push('[');
                out.push_str(&Value::String(k.to_string()).to_string());
                out.push(']');
            }
        }
        crate::text::bounded(&out, MAX_PATH_BYTES).into_owned()
    }
}

/// A key written bare in a path: an identifier of ASCII letters, digits, `_` and `$`.
fn plain(k: &str) -> bool {
    !k.is_empty()
        && !k.starts_with(|c: char| c.is_ascii_digit())
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
}

/// A value as a finding shows it: compact JSON, at most [`MAX_VALUE_BYTES`], escaped.
pub fn shown(v: &Value) -> String {
    // Serialising a huge value only to cut it would cost its size: strings are cut first.
    let text = match v {
        Value::String(s) if s.len() > MAX_VALUE_BYTES => {
            let cut = crate::text::bounded(s, MAX_VALUE_BYTES).into_owned();
            Value::String(cut).to_string()
        }
        Value::Array(_) | Value::Object(_) => compact_prefix(v, MAX_VALUE_BYTES * 4),
        other => other.to_string(),
    };
    crate::text::bounded(&text, MAX_VALUE_BYTES).into_owned()
}

/// Compact JSON of `v`, stopping once `limit` bytes are written (the bounded render cuts it).
fn compact_prefix(v: &Value, limit: usize) -> String {
    struct Capped {
        out: Vec<u8>,
        limit: usize,
    }
    impl std::io::Write for Capped {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            if self.out.len() >= self.limit {
                return Err(std::io::Error::other("enough"));
            }
            self.out.extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut w = Capped {
        out: Vec::new(),
        limit,
    };
    let _ = serde_json::to_writer(&mut w, v);
    String::from_utf8_lossy(&w.out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn paths_quote_what_is_not_plain_and_escape_hostile_text() {
        let root = Path::root();
        let a = root.key("inputSchema");
        let b = a.key("properties");
        let c = b.key("a b\u{202e}");
        assert_eq!(b.render(), "$.inputSchema.properties");
        assert_eq!(c.render(), "$.inputSchema.properties[\"a b\\u{202e}\"]");
        assert_eq!(root.render(), "$");
    }

    #[test]
    fn values_are_compact_bounded_and_escaped() {
        assert_eq!(shown(&json!({"type": "string"})), r#"{"type":"string"}"#);
        let big = json!({"description": "x".repeat(100_000)});
        assert!(shown(&big).len() <= MAX_VALUE_BYTES);
        let long = Value::String("y".repeat(100_000));
        assert!(shown(&long).len() <= MAX_VALUE_BYTES);
        assert!(!shown(&json!("a\u{1b}[2J")).contains('\u{1b}'));
    }
}
