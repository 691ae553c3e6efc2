//! Is a changed tool definition still callable the way it was? The rules, keyword by keyword.
//!
//! A client that cached a tool sends arguments shaped by the *old* `inputSchema` and reads
//! results by the *old* `outputSchema`. So the two schemas are compared in opposite directions:
//!
//! - `inputSchema` says what the server **accepts**. Accepting less (a type narrowed, a value
//!   removed from `enum`, a required property added, `additionalProperties` closed, a bound
//!   tightened) breaks old callers; accepting more does not.
//! - `outputSchema` says what the server **promises**. Promising less (a property or a required
//!   property removed, a type or `enum` widened, a bound relaxed, the schema removed) breaks
//!   old readers; promising more does not.
//!
//! A property removed from `properties` (or renamed: removed and added with the same schema) is
//! breaking either way: the server no longer understands, or no longer sends, what old clients
//! use. Text (`description`, `title`, annotations other than the two hints below) is compatible.
//! `annotations.readOnlyHint` dropped and `destructiveHint` set are breaking: a client (or this
//! exporter's side-effect guard) that trusted the hint now calls something else.
//!
//! What these rules cannot decide is `unknown`, never guessed: `$ref`, `oneOf`, `anyOf`,
//! `allOf`, `not`, `if`/`then`/`else`, `patternProperties`, `dependentSchemas` and the other
//! 2020-12 keywords whose effect depends on the rest of the schema, a changed `pattern` or
//! `format`, tuple `items`, keywords this module does not know, and schemas nested deeper than
//! [`MAX_DEPTH`]. A definition with one proven breaking change is `breaking` even when another
//! part is unknown: the breakage is certain.
//!
//! Prompts, resources and resource templates go through the same walk ([`classify_item`], the
//! list as a value): the item's key and `_meta` are skipped, the text every list has is judged
//! here, and each list's own fields by [`super::lists`]. [`classify`] is it for tools, and its
//! results are exactly what they were before the other lists were classified.
//!
//! Every finding names the rule it applied and the JSON path it applied at ([`super::paths`]);
//! findings are capped at [`MAX_FINDINGS`] per tool and everything here is bounded by the two
//! definitions' size, so a hostile definition costs time linear in its bytes and never panics.

use std::collections::HashSet;

use serde_json::{Map, Value};

pub use super::findings::{Class, Classification, Finding, MAX_FINDINGS};
use super::paths::{Path, union};
use crate::listing::list::List;

/// Deepest schema nesting compared; deeper differences are `unknown`.
pub const MAX_DEPTH: usize = 32;

/// Compare two tool definitions (as `tools/list` serves them; `_meta` is ignored, as by the
/// fingerprint). Equal definitions give no findings.
pub fn classify(before: &Value, after: &Value) -> Classification {
    classify_item(List::Tools, before, after)
}

/// Compare two definitions of one item of `list` (as its listing method serves them; `_meta`
/// and the item's key are ignored). The walk over the fields is shared by every list; the text
/// fields every list has (`description`, `title`, `icons`) are judged here, the rest by the
/// list's own rules: [`tool_field`] for tools, [`super::lists::field`] for the others.
pub fn classify_item(list: List, before: &Value, after: &Value) -> Classification {
    let mut out = Classification::default();
    let root = Path::root();
    let (Some(b), Some(a)) = (before.as_object(), after.as_object()) else {
        if before != after {
            out.push(
                &root,
                "not_an_object",
                Class::Unknown,
                Some(before),
                Some(after),
            );
        }
        return out;
    };
    for key in union(b, a) {
        let (bv, av) = (b.get(key), a.get(key));
        if bv == av || key == "_meta" || key == list.key_field() {
            continue;
        }
        let path = root.key(key);
        match key {
            "description" => {
                out.description_changed = true;
                out.push(&path, "description_changed", Class::Compatible, bv, av);
            }
            "title" | "icons" => out.push(&path, "text_changed", Class::Compatible, bv, av),
            _ if list == List::Tools => tool_field(&mut out, &path, key, bv, av),
            _ => super::lists::field(&mut out, list, &path, key, bv, av),
        }
    }
    out
}

/// A tool's own fields: its hints and its two schemas.
fn tool_field(
    out: &mut Classification,
    path: &Path,
    key: &str,
    bv: Option<&Value>,
    av: Option<&Value>,
) {
    match key {
        "annotations" => annotations(out, path, bv, av),
        "inputSchema" => match (bv, av) {
            (Some(bv), Some(av)) => schema(out, path, bv, av, Dir::Input, 0),
            _ => out.push(path, "input_schema_missing", Class::Unknown, bv, av),
        },
        "outputSchema" => match (bv, av) {
            (Some(bv), Some(av)) => schema(out, path, bv, av, Dir::Output, 0),
            (None, Some(_)) => out.push(path, "output_schema_added", Class::Compatible, bv, av),
            _ => out.push(path, "output_schema_removed", Class::Breaking, bv, av),
        },
        _ => out.push(path, "unrecognised_field", Class::Unknown, bv, av),
    }
}

/// The two hints a client or guard acts on, the rest as text.
fn annotations(out: &mut Classification, path: &Path, b: Option<&Value>, a: Option<&Value>) {
    let hint = |v: Option<&Value>, k: &str| v.and_then(|v| v.get(k)).and_then(Value::as_bool);
    let empty = Map::new();
    let obj = |v: Option<&Value>| v.and_then(Value::as_object).unwrap_or(&empty).clone();
    let (bo, ao) = (obj(b), obj(a));
    let found = out.findings.len();
    for key in union(&bo, &ao) {
        let (bv, av) = (bo.get(key), ao.get(key));
        if bv == av {
            continue;
        }
        let p = path.key(key);
        match key {
            "readOnlyHint" if hint(b, key) == Some(true) && hint(a, key) != Some(true) => {
                out.push(&p, "read_only_dropped", Class::Breaking, bv, av)
            }
            // The spec's default is `true`: a dropped `false` makes the tool destructive too.
            "destructiveHint" if !hint(b, key).unwrap_or(true) && hint(a, key).unwrap_or(true) => {
                out.push(&p, "destructive_set", Class::Breaking, bv, av)
            }
            _ => out.push(&p, "annotation_changed", Class::Compatible, bv, av),
        }
    }
    if b.is_some_and(|v| !v.is_object() && !v.is_null())
        || a.is_some_and(|v| !v.is_object() && !v.is_null())
    {
        out.push(path, "not_an_object", Class::Unknown, b, a);
    } else if out.findings.len() == found {
        // They differ, yet no hint does: `null` against absent or `{}`. Still a change (the
        // fingerprint saw one), and only text.
        out.push(path, "annotation_changed", Class::Compatible, b, a);
    }
}

/// Which way a schema constrains: what the server accepts, or what it promises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dir {
    Input,
    Output,
}

/// What a difference does to the set of values the schema allows.
#[derive(Debug, Clone, Copy)]
enum Effect {
    /// Allows fewer values.
    Narrowed,
    /// Allows more values.
    Widened,
    /// Some values in, others out.
    Both,
}

impl Effect {
    fn class(self, dir: Dir) -> Class {
        match (self, dir) {
            (Effect::Both, _) | (Effect::Narrowed, Dir::Input) | (Effect::Widened, Dir::Output) => {
                Class::Breaking
            }
            _ => Class::Compatible,
        }
    }
}

/// Keywords whose effect depends on the rest of the schema, or that point elsewhere: a
/// schema holding one of them is not judged by the rules here.
const UNDECIDABLE: &[&str] = &[
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "oneOf",
    "anyOf",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "patternProperties",
    "dependentSchemas",
    "dependentRequired",
    "dependencies",
    "propertyNames",
    "unevaluatedProperties",
    "unevaluatedItems",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "additionalItems",
    "contentSchema",
];

/// Keywords that constrain nothing.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "examples",
    "default",
    "$comment",
    "deprecated",
    "readOnly",
    "writeOnly",
    "contentMediaType",
    "contentEncoding",
];

/// Keywords that only name or scope a schema; a change of them is not judged.
const IDENTITY: &[&str] = &[
    "$schema",
    "$id",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "$defs",
    "definitions",
];

/// Lower bounds: raising one narrows.
const LOWER: &[&str] = &[
    "minimum",
    "exclusiveMinimum",
    "minLength",
    "minItems",
    "minProperties",
];
/// Upper bounds: lowering one narrows.
const UPPER: &[&str] = &[
    "maximum",
    "exclusiveMaximum",
    "maxLength",
    "maxItems",
    "maxProperties",
];

fn schema(out: &mut Classification, path: &Path, b: &Value, a: &Value, dir: Dir, depth: usize) {
    if b == a {
        return;
    }
    if depth >= MAX_DEPTH {
        out.push(path, "too_deep", Class::Unknown, Some(b), Some(a));
        return;
    }
    // Boolean schemas: `true` allows everything, `false` nothing.
    let (bo, ao) = match (b, a) {
        (Value::Object(bo), Value::Object(ao)) => (bo, ao),
        (Value::Bool(_) | Value::Object(_), Value::Bool(_) | Value::Object(_)) => {
            let allows_all =
                |v: &Value| v == &Value::Bool(true) || v.as_object().is_some_and(Map::is_empty);
            let effect = match (
                allows_all(b),
                allows_all(a),
                b == &Value::Bool(false),
                a == &Value::Bool(false),
            ) {
                (true, true, _, _) | (_, _, true, true) => return,
                (true, _, _, _) | (_, _, _, true) => Effect::Narrowed,
                (_, true, _, _) | (_, _, true, _) => Effect::Widened,
                _ => {
                    out.push(path, "boolean_schema", Class::Unknown, Some(b), Some(a));
                    return;
                }
            };
            out.push(path, "boolean_schema", effect.class(dir), Some(b), Some(a));
            return;
        }
        _ => {
            out.push(path, "not_a_schema", Class::Unknown, Some(b), Some(a));
            return;
        }
    };
    let interacting = UNDECIDABLE
        .iter()
        .any(|k| bo.contains_key(*k) || ao.contains_key(*k));
    for key in union(bo, ao) {
        let (bv, av) = (bo.get(key), ao.get(key));
        if bv == av {
            continue;
        }
        let p = path.key(key);
        if ANNOTATIONS.contains(&key) || key.starts_with("x-") {
            out.push(&p, "annotation_changed", Class::Compatible, bv, av);
            continue;
        }
        if UNDECIDABLE.contains(&key) {
            out.push(&p, "undecidable_keyword", Class::Unknown, bv, av);
            continue;
        }
        if IDENTITY.contains(&key) {
            out.push(&p, "schema_identity_changed", Class::Unknown, bv, av);
            continue;
        }
        if interacting {
            // `anyOf` beside `properties`: a property change may be undone (or made) by a branch.
            out.push(&p, "beside_undecidable_keyword", Class::Unknown, bv, av);
            continue;
        }
        match key {
            "type" => types(out, &p, bv, av, dir),
            "enum" | "const" => {}
            "required" => required(out, &p, bv, av, dir),
            "properties" => properties(out, &p, bo, ao, dir, depth),
            "additionalProperties" => additional(out, &p, bv, av, dir, depth),
            "items" => match (bv, av) {
                (
                    Some(bv @ (Value::Object(_) | Value::Bool(_))),
                    Some(av @ (Value::Object(_) | Value::Bool(_))),
                ) => schema(out, &p, bv, av, dir, depth + 1),
                (None, Some(Value::Object(_) | Value::Bool(_))) => schema(
                    out,
                    &p,
                    &Value::Bool(true),
                    av.unwrap_or(&Value::Null),
                    dir,
                    depth + 1,
                ),
                (Some(Value::Object(_) | Value::Bool(_)), None) => schema(
                    out,
                    &p,
                    bv.unwrap_or(&Value::Null),
                    &Value::Bool(true),
                    dir,
                    depth + 1,
                ),
                _ => out.push(&p, "tuple_items", Class::Unknown, bv, av),
            },
            "uniqueItems" => {
                let on = |v: Option<&Value>| v == Some(&Value::Bool(true));
                let effect = if on(av) {
                    Effect::Narrowed
                } else {
                    Effect::Widened
                };
                if on(av) != on(bv) {
                    out.push(&p, "unique_items_changed", effect.class(dir), bv, av);
                }
            }
            "multipleOf" => multiple_of(out, &p, bv, av, dir),
            "pattern" | "format" => match (bv, av) {
                (None, Some(_)) => {
                    out.push(&p, "constraint_added", Effect::Narrowed.class(dir), bv, av)
                }
                (Some(_), None) => {
                    out.push(&p, "constraint_removed", Effect::Widened.class(dir), bv, av)
                }
                _ => out.push(&p, "pattern_changed", Class::Unknown, bv, av),
            },
            k if LOWER.contains(&k) => bound(out, &p, bv, av, dir, true),
            k if UPPER.contains(&k) => bound(out, &p, bv, av, dir, false),
            _ => out.push(&p, "unrecognised_keyword", Class::Unknown, bv, av),
        }
    }
    if !interacting {
        allowed_values(out, path, bo, ao, dir);
    }
}

/// `enum` and `const` together: the set of allowed values, or `None` for any value.
fn allowed_values(
    out: &mut Classification,
    path: &Path,
    bo: &Map<String, Value>,
    ao: &Map<String, Value>,
    dir: Dir,
) {
    fn set(o: &Map<String, Value>) -> Option<Result<Vec<&Value>, ()>> {
        match (o.get("const"), o.get("enum")) {
            (None, None) => None,
            (Some(c), None) => Some(Ok(vec![c])),
            (None, Some(Value::Array(e))) => Some(Ok(e.iter().collect())),
            _ => Some(Err(())),
        }
    }
    let (bs, as_) = (set(bo), set(ao));
    if bs == as_ {
        return;
    }
    let key = if ao.contains_key("enum") || bo.contains_key("enum") {
        "enum"
    } else {
        "const"
    };
    let p = path.key(key);
    let (bv, av) = (bo.get(key), ao.get(key));
    let (removed, added) = match (&bs, &as_) {
        (Some(Err(())), _) | (_, Some(Err(()))) => {
            out.push(&p, "enum_and_const", Class::Unknown, bv, av);
            return;
        }
        (None, Some(_)) => (true, false),
        (Some(_), None) => (false, true),
        (Some(Ok(b)), Some(Ok(a))) => one_sided(b, a),
        (None, None) => return,
    };
    let (rule, effect) = match (removed, added) {
        (true, true) => ("enum_values_replaced", Effect::Both),
        (true, false) => ("enum_value_removed", Effect::Narrowed),
        (false, true) => ("enum_widened", Effect::Widened),
        (false, false) => return, // the same values in another order
    };
    out.push(&p, rule, effect.class(dir), bv, av);
}

/// JSON types as a set; `None` is any type. `integer` is within `number`.
fn type_set(v: Option<&Value>) -> Result<Option<Vec<&str>>, ()> {
    match v {
        None => Ok(None),
        Some(Value::String(t)) => Ok(Some(vec![t.as_str()])),
        Some(Value::Array(ts)) => ts
            .iter()
            .map(|t| t.as_str().ok_or(()))
            .collect::<Result<_, _>>()
            .map(Some),
        Some(_) => Err(()),
    }
}

fn types(out: &mut Classification, p: &Path, bv: Option<&Value>, av: Option<&Value>, dir: Dir) {
    let (Ok(b), Ok(a)) = (type_set(bv), type_set(av)) else {
        out.push(p, "not_a_type", Class::Unknown, bv, av);
        return;
    };
    let within = |t: &str, set: &Option<Vec<&str>>| {
        set.as_ref()
            .is_none_or(|s| s.contains(&t) || (t == "integer" && s.contains(&"number")))
    };
    let lost = match &b {
        None => a.is_some(),
        Some(b) => b.iter().any(|t| !within(t, &a)),
    };
    let gained = match &a {
        None => b.is_some(),
        Some(a) => a.iter().any(|t| !within(t, &b)),
    };
    let (rule, effect) = match (lost, gained) {
        (true, true) => ("type_changed", Effect::Both),
        (true, false) => ("type_narrowed", Effect::Narrowed),
        (false, true) => ("type_widened", Effect::Widened),
        (false, false) => return,
    };
    out.push(p, rule, effect.class(dir), bv, av);
}

/// Whether `b` has values `a` lacks, and `a` values `b` lacks. Small lists compare values;
/// large ones compare their JSON text in hash sets, so a huge enum costs linear time.
fn one_sided(b: &[&Value], a: &[&Value]) -> (bool, bool) {
    if b.len().saturating_mul(a.len()) <= MAX_RENAME_COMPARISONS {
        return (
            b.iter().any(|v| !a.contains(v)),
            a.iter().any(|v| !b.contains(v)),
        );
    }
    let text = |l: &[&Value]| l.iter().map(|v| v.to_string()).collect::<HashSet<String>>();
    let (bt, at) = (text(b), text(a));
    (
        bt.iter().any(|v| !at.contains(v)),
        at.iter().any(|v| !bt.contains(v)),
    )
}

fn names(v: Option<&Value>) -> Result<Vec<&str>, ()> {
    match v {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items.iter().map(|n| n.as_str().ok_or(())).collect(),
        Some(_) => Err(()),
    }
}

fn required(out: &mut Classification, p: &Path, bv: Option<&Value>, av: Option<&Value>, dir: Dir) {
    let (Ok(b), Ok(a)) = (names(bv), names(av)) else {
        out.push(p, "not_a_name_list", Class::Unknown, bv, av);
        return;
    };
    let (bset, aset): (HashSet<&str>, HashSet<&str>) =
        (b.iter().copied().collect(), a.iter().copied().collect());
    for n in a.iter().filter(|n| !bset.contains(*n)) {
        let v = Value::String((*n).to_string());
        out.push(
            p,
            "required_added",
            Effect::Narrowed.class(dir),
            None,
            Some(&v),
        );
    }
    for n in b.iter().filter(|n| !aset.contains(*n)) {
        let v = Value::String((*n).to_string());
        out.push(
            p,
            "required_removed",
            Effect::Widened.class(dir),
            Some(&v),
            None,
        );
    }
}

/// Most property-schema comparisons a rename search may make in one object.
const MAX_RENAME_COMPARISONS: usize = 4096;

fn properties(
    out: &mut Classification,
    p: &Path,
    bo: &Map<String, Value>,
    ao: &Map<String, Value>,
    dir: Dir,
    depth: usize,
) {
    let empty = Map::new();
    fn props(o: &Map<String, Value>) -> Option<Result<&Map<String, Value>, ()>> {
        o.get("properties").map(|v| v.as_object().ok_or(()))
    }
    let (b, a) = match (props(bo), props(ao)) {
        (Some(Err(())), _) | (_, Some(Err(()))) => {
            out.push(
                p,
                "not_an_object",
                Class::Unknown,
                bo.get("properties"),
                ao.get("properties"),
            );
            return;
        }
        (b, a) => (
            b.and_then(Result::ok).unwrap_or(&empty),
            a.and_then(Result::ok).unwrap_or(&empty),
        ),
    };
    let added: Vec<(&String, &Value)> = a.iter().filter(|(k, _)| !b.contains_key(*k)).collect();
    let required_after: HashSet<&str> = names(ao.get("required"))
        .unwrap_or_default()
        .into_iter()
        .collect();
    let required_before: HashSet<&str> = names(bo.get("required"))
        .unwrap_or_default()
        .into_iter()
        .collect();
    // A rename is looked for only while it stays cheap: past this many comparisons a removed
    // property is reported removed (breaking either way), so a huge schema cannot cost time.
    let look_for_renames = b.len().saturating_mul(added.len()) <= MAX_RENAME_COMPARISONS;
    for (name, bs) in b {
        let pp = p.key(name);
        match a.get(name) {
            Some(as_) => schema(out, &pp, bs, as_, dir, depth + 1),
            None => {
                // Removed; renamed when a new property has the same schema.
                let renamed = added
                    .iter()
                    .filter(|_| look_for_renames)
                    .find(|(_, s)| *s == bs)
                    .map(|(n, _)| Value::String((*n).clone()));
                let rule = if renamed.is_some() {
                    "property_renamed"
                } else {
                    "property_removed"
                };
                let before = Value::String(name.clone());
                out.push(&pp, rule, Class::Breaking, Some(&before), renamed.as_ref());
            }
        }
    }
    for (name, s) in added {
        if dir == Dir::Input && required_before.contains(name.as_str()) {
            // Required before without a schema (anything went), constrained now: old callers'
            // values may no longer fit, and `required` itself did not change.
            out.push(
                &p.key(name),
                "required_property_constrained",
                Class::Breaking,
                None,
                Some(s),
            );
            continue;
        }
        // A required new input property is reported (breaking) by `required`.
        if dir == Dir::Input && required_after.contains(name.as_str()) {
            continue;
        }
        out.push(
            &p.key(name),
            "optional_property_added",
            Class::Compatible,
            None,
            Some(s),
        );
    }
}

/// `additionalProperties`: absent or `true` is open, `false` closed, a schema constrains.
fn additional(
    out: &mut Classification,
    p: &Path,
    bv: Option<&Value>,
    av: Option<&Value>,
    dir: Dir,
    depth: usize,
) {
    let open = Value::Bool(true);
    let b = bv.unwrap_or(&open);
    let a = av.unwrap_or(&open);
    let rule = if a == &Value::Bool(false) {
        "additional_properties_closed"
    } else if b == &Value::Bool(false) {
        "additional_properties_opened"
    } else {
        "additional_properties_changed"
    };
    let before = out.findings.len();
    schema(out, p, b, a, dir, depth + 1);
    // Name the rule the reader knows, keeping the class the schema comparison found.
    for f in out.findings.iter_mut().skip(before) {
        if f.rule == "boolean_schema" {
            f.rule = rule;
        }
    }
}

fn multiple_of(
    out: &mut Classification,
    p: &Path,
    bv: Option<&Value>,
    av: Option<&Value>,
    dir: Dir,
) {
    let num = |v: Option<&Value>| {
        v.and_then(Value::as_f64)
            .filter(|n| n.is_finite() && *n > 0.0)
    };
    let effect = match (bv, av, num(bv), num(av)) {
        (None, Some(_), _, Some(_)) => Effect::Narrowed,
        (Some(_), None, Some(_), _) => Effect::Widened,
        // The new step divides the old one: every old value is still a multiple.
        (Some(_), Some(_), Some(b), Some(a)) if (b / a).fract() == 0.0 => Effect::Widened,
        (Some(_), Some(_), Some(_), Some(_)) => Effect::Both,
        _ => {
            out.push(p, "not_a_number", Class::Unknown, bv, av);
            return;
        }
    };
    out.push(p, "multiple_of_changed", effect.class(dir), bv, av);
}

/// A numeric bound: `lower` bounds narrow when raised, upper ones when lowered; an absent bound
/// is no bound.
fn bound(
    out: &mut Classification,
    p: &Path,
    bv: Option<&Value>,
    av: Option<&Value>,
    dir: Dir,
    lower: bool,
) {
    let num = |v: Option<&Value>| v.map(|v| v.as_f64().ok_or(())).transpose();
    let (Ok(b), Ok(a)) = (num(bv), num(av)) else {
        out.push(p, "not_a_number", Class::Unknown, bv, av);
        return;
    };
    let tighter = match (b, a) {
        (None, Some(_)) => true,
        (Some(_), None) => false,
        (Some(b), Some(a)) if a == b => {
            // `1` and `1.0`: the same bound written another way.
            out.push(p, "number_form_changed", Class::Compatible, bv, av);
            return;
        }
        (Some(b), Some(a)) if lower => a > b,
        (Some(b), Some(a)) => a < b,
        (None, None) => return,
    };
    let (rule, effect) = if tighter {
        ("constraint_tightened", Effect::Narrowed)
    } else {
        ("constraint_relaxed", Effect::Widened)
    };
    out.push(p, rule, effect.class(dir), bv, av);
}
