//! Whether a call's arguments fit an `inputSchema`: the subset of JSON Schema that decides
//! stale-schema calls.
//!
//! Why not a full validator crate: a stale-schema call is "fits the previous schema, not the
//! current one", so what matters is that *not fitting* is never claimed wrongly. This checks the
//! keywords tool schema changes actually break callers with — `type`, `required`, `properties`
//! (recursively), `additionalProperties: false`, `enum`, `const`, `items` — and treats every other
//! keyword (`$ref`, `oneOf`, formats, patterns …) as satisfied, so an unsupported keyword can only
//! hide a stale-schema call, never invent one. Depth is capped, so a hostile schema costs little.
//! (The `jsonschema` crate would add a large dependency tree to build on every CI run for this.)

use serde_json::Value;

/// Deepest nesting of schemas looked at.
const MAX_DEPTH: usize = 32;

/// Whether `value` fits `schema` (within the supported keywords).
pub fn fits(schema: &Value, value: &Value) -> bool {
    fits_at(schema, value, 0)
}

fn fits_at(schema: &Value, value: &Value, depth: usize) -> bool {
    let Value::Object(s) = schema else {
        // `true`, `false` or malformed: only `false` refuses.
        return schema != &Value::Bool(false);
    };
    if depth > MAX_DEPTH {
        return true;
    }
    if let Some(t) = s.get("type") {
        let ok = match t {
            Value::String(t) => has_type(t, value),
            Value::Array(ts) => ts
                .iter()
                .filter_map(Value::as_str)
                .any(|t| has_type(t, value)),
            _ => true,
        };
        if !ok {
            return false;
        }
    }
    if let Some(c) = s.get("const")
        && c != value
    {
        return false;
    }
    if let Some(Value::Array(options)) = s.get("enum")
        && !options.contains(value)
    {
        return false;
    }
    if let Value::Object(obj) = value {
        if let Some(Value::Array(required)) = s.get("required")
            && required
                .iter()
                .filter_map(Value::as_str)
                .any(|r| !obj.contains_key(r))
        {
            return false;
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => {
                    if !fits_at(sub, v, depth + 1) {
                        return false;
                    }
                }
                None => match s.get("additionalProperties") {
                    Some(Value::Bool(false)) => return false,
                    Some(extra @ Value::Object(_)) if !fits_at(extra, v, depth + 1) => {
                        return false;
                    }
                    _ => {}
                },
            }
        }
    }
    if let (Value::Array(items), Some(item_schema)) = (value, s.get("items"))
        && !items.iter().all(|i| fits_at(item_schema, i, depth + 1))
    {
        return false;
    }
    true
}

fn has_type(t: &str, v: &Value) -> bool {
    match t {
        "object" => v.is_object(),
        "array" => v.is_array(),
        "string" => v.is_string(),
        "boolean" => v.is_boolean(),
        "null" => v.is_null(),
        "number" => v.is_number(),
        "integer" => {
            v.as_i64().is_some()
                || v.as_u64().is_some()
                || v.as_f64().is_some_and(|f| f.fract() == 0.0)
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_keywords_that_break_callers_are_checked() {
        let s = json!({"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer"}}, "required": ["q"], "additionalProperties": false});
        assert!(fits(&s, &json!({"q": "x"})));
        assert!(fits(&s, &json!({"q": "x", "k": 3})));
        assert!(!fits(&s, &json!({"k": 3})), "required");
        assert!(!fits(&s, &json!({"q": 1})), "type");
        assert!(!fits(&s, &json!({"q": "x", "z": 1})), "closed");
        assert!(!fits(&json!({"enum": ["a"]}), &json!("b")));
        assert!(!fits(&json!({"const": 2}), &json!(1)));
        assert!(fits(
            &json!({"type": "array", "items": {"type": "string"}}),
            &json!(["a"])
        ));
        assert!(!fits(
            &json!({"type": "array", "items": {"type": "string"}}),
            &json!([1])
        ));
    }

    #[test]
    fn unsupported_keywords_never_refuse() {
        assert!(fits(&json!({"oneOf": [{"type": "string"}]}), &json!(3)));
        assert!(fits(&json!({"$ref": "#/x"}), &json!({})));
        assert!(fits(&json!(true), &json!(1)));
        assert!(!fits(&json!(false), &json!(1)));
    }
}
