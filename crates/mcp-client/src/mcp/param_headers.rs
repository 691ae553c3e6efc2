//! `x-mcp-header` annotations (2026-07-28, Streamable HTTP): a tool may ask that some of its
//! parameters be mirrored into `Mcp-Param-{name}` headers. A client on Streamable HTTP MUST drop
//! from its `tools/list` result every tool whose annotations break the spec's constraints, so
//! one malformed definition does not break the others; this module is that judgement.
//!
//! The constraints: the name is a non-empty HTTP token, unique (case-insensitively) within the
//! schema; the annotated property is a string, integer or boolean; and it is reachable from the
//! schema root through `properties` keys only (not through `items`, composition, conditionals
//! or `$ref`).

use std::collections::HashSet;

use reqwest::header::{HeaderName, HeaderValue};
use serde_json::{Map, Value};

/// One annotated parameter of a tool: where its value is in the call arguments (a chain of
/// `properties` keys) and the `{name}` of its `Mcp-Param-{name}` header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderParam {
    pub path: Box<[Box<str>]>,
    pub name: Box<str>,
}

/// The `Mcp-Param-{name}` headers of a call with `arguments`: each annotated parameter present
/// as a string, integer or boolean, its value encoded as the spec says (base64 sentinel when it
/// is not plain visible ASCII). Absent values (and values of other types) send no header.
pub fn headers(
    params: &[HeaderParam],
    arguments: &Map<String, Value>,
) -> Vec<(HeaderName, HeaderValue)> {
    params
        .iter()
        .filter_map(|p| {
            let (first, rest) = p.path.split_first()?;
            let mut value = arguments.get(&**first)?;
            for key in rest {
                value = value.get(&**key)?;
            }
            let text = match value {
                Value::String(s) => s.clone(),
                Value::Bool(b) => b.to_string(),
                Value::Number(n) if n.is_i64() || n.is_u64() => n.to_string(),
                _ => return None,
            };
            let name = HeaderName::from_bytes(format!("mcp-param-{}", p.name).as_bytes()).ok()?;
            Some((name, super::http::header_safe(&text)))
        })
        .collect()
}

/// Most annotations looked at in one schema (a hostile schema cannot make this walk long).
const MAX_ANNOTATIONS: usize = 64;
/// Deepest `properties` chain followed.
const MAX_DEPTH: usize = 32;
const KEY: &str = "x-mcp-header";

/// Why `tool`'s annotations make it invalid; `None` when it is fine (or has none).
pub fn invalid(tool: &Value) -> Option<&'static str> {
    annotations(tool).err()
}

/// The annotated parameters of `tool` (none without annotations), or why its annotations make
/// it invalid. One walk of the schema judges and collects.
pub fn annotations(tool: &Value) -> Result<Vec<HeaderParam>, &'static str> {
    let mut found = Vec::new();
    let Some(schema) = tool.get("inputSchema") else {
        return Ok(found);
    };
    // Every annotation anywhere in the schema, and those reachable the allowed way.
    let everywhere = count_everywhere(schema, 0);
    let mut names = HashSet::new();
    let mut stack: Vec<(&Value, Vec<Box<str>>)> = vec![(schema, Vec::new())];
    while let Some((node, path)) = stack.pop() {
        let Some(props) = node.get("properties").and_then(Value::as_object) else {
            continue;
        };
        for (key, prop) in props {
            let mut here = path.clone();
            here.push(key.as_str().into());
            if let Some(name) = prop.get(KEY) {
                let Some(name) = name.as_str() else {
                    return Err("an x-mcp-header value is not a string");
                };
                if name.is_empty() || !name.bytes().all(is_tchar) {
                    return Err("an x-mcp-header value is not an HTTP token");
                }
                if !names.insert(name.to_ascii_lowercase()) {
                    return Err("two x-mcp-header values are the same");
                }
                if !matches!(
                    prop.get("type").and_then(Value::as_str),
                    Some("string" | "integer" | "boolean")
                ) {
                    return Err(
                        "x-mcp-header on a parameter that is not a string, integer or boolean",
                    );
                }
                found.push(HeaderParam {
                    path: here.clone().into(),
                    name: name.into(),
                });
            }
            if here.len() <= MAX_DEPTH {
                stack.push((prop, here));
            }
        }
        if found.len() > MAX_ANNOTATIONS {
            return Err("too many x-mcp-header annotations");
        }
    }
    if everywhere != found.len() {
        return Err("x-mcp-header on a property not reachable through properties alone");
    }
    Ok(found)
}

/// Annotations anywhere in the schema (capped: past the cap the count no longer matters).
fn count_everywhere(node: &Value, depth: usize) -> usize {
    if depth > MAX_DEPTH * 2 {
        return MAX_ANNOTATIONS + 1;
    }
    match node {
        Value::Object(map) => map
            .iter()
            .map(|(k, v)| usize::from(k == KEY) + count_everywhere(v, depth + 1))
            .fold(0usize, |a, b| a.saturating_add(b).min(MAX_ANNOTATIONS * 4)),
        Value::Array(items) => items
            .iter()
            .map(|v| count_everywhere(v, depth + 1))
            .fold(0usize, |a, b| a.saturating_add(b).min(MAX_ANNOTATIONS * 4)),
        _ => 0,
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(schema: Value) -> Value {
        json!({"name": "t", "inputSchema": schema})
    }

    #[test]
    fn valid_annotations_pass() {
        let ok = tool(json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {
                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}
            }},
            "q": {"type": "string"}
        }}));
        assert_eq!(invalid(&ok), None);
        assert_eq!(invalid(&json!({"name": "plain"})), None);
    }

    #[test]
    fn annotated_values_become_headers_encoded_as_the_spec_says() {
        let t = tool(json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "opts": {"type": "object", "properties": {
                "dry": {"type": "boolean", "x-mcp-header": "Dry-Run"},
                "n": {"type": "integer", "x-mcp-header": "N"}
            }},
            "greeting": {"type": "string", "x-mcp-header": "Greeting"}
        }}));
        let params = annotations(&t).unwrap();
        assert_eq!(params.len(), 4);
        let args = json!({"region": "us-west1", "opts": {"dry": true, "n": -7}, "greeting": "Hello, 世界"});
        let mut got: Vec<(String, String)> = headers(&params, args.as_object().unwrap())
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap().to_string()))
            .collect();
        got.sort();
        assert_eq!(
            got,
            [
                ("mcp-param-dry-run".to_string(), "true".to_string()),
                (
                    "mcp-param-greeting".into(),
                    "=?base64?SGVsbG8sIOS4lueVjA==?=".into()
                ),
                ("mcp-param-n".into(), "-7".into()),
                ("mcp-param-region".into(), "us-west1".into()),
            ]
        );
        // Absent values send no header.
        assert!(headers(&params, &Map::new()).is_empty());
    }

    #[test]
    fn each_constraint_is_enforced() {
        let cases = [
            json!({"properties": {"a": {"type": "string", "x-mcp-header": ""}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "has space"}}}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": "A\r\nB"}}}),
            json!({"properties": {
                "a": {"type": "string", "x-mcp-header": "Same"},
                "b": {"type": "string", "x-mcp-header": "same"}
            }}),
            json!({"properties": {"a": {"type": "number", "x-mcp-header": "N"}}}),
            json!({"properties": {"a": {"type": "array", "items": {"type": "string", "x-mcp-header": "I"}}}}),
            json!({"oneOf": [{"properties": {"a": {"type": "string", "x-mcp-header": "O"}}}]}),
            json!({"properties": {"a": {"type": "string", "x-mcp-header": 7}}}),
        ];
        for schema in cases {
            assert!(invalid(&tool(schema.clone())).is_some(), "{schema}");
        }
    }
}
