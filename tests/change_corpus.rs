//! The classification corpus: each case is named for the rule it proves. Schemas are the
//! shapes real servers send: the SDK peers of .ci/peers/ (kb_catalog.py / kb_catalog.mjs: a
//! `q` string property and the two hints; FastMCP/pydantic: `title`s, `default`s, `required`,
//! `anyOf` for optional values) and the lab's knowledge base (crates/mcp-lab/src/kb.rs).

use serde_json::{Value, json};

use mcp_client::listing::changes::*;
use mcp_client::listing::items::ItemSet;
use mcp_lab::kb;

/// A tool as the SDK peers define one (kb_catalog.py `Catalog.tool`, kb_catalog.mjs).
fn peer_tool(name: &str, read_only: bool) -> Value {
    json!({
        "name": name,
        "description": format!("{name} on the knowledge base"),
        "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
        "annotations": {"readOnlyHint": read_only, "destructiveHint": !read_only}
    })
}

/// A FastMCP (pydantic) tool `def search(query: str, top_k: int = 5)`.
fn pydantic_search() -> Value {
    json!({
        "name": "search",
        "description": "Search the knowledge base.",
        "inputSchema": {
            "properties": {
                "query": {"title": "Query", "type": "string"},
                "top_k": {"default": 5, "title": "Top K", "type": "integer"}
            },
            "required": ["query"],
            "title": "searchArguments",
            "type": "object"
        },
        "outputSchema": {
            "properties": {"result": {"title": "Result", "type": "string"}},
            "required": ["result"],
            "title": "searchOutput",
            "type": "object"
        }
    })
}

/// The lab's tool by name at `generation`.
fn lab(name: &str, generation: u64) -> Value {
    kb::tools(generation)
        .into_iter()
        .chain(kb::tools_schema_drift(generation))
        .find(|t| t["name"] == name)
        .expect("a lab tool")
}

/// The lab's tool by name in a definition-change scenario at `generation`.
fn lab_changed(name: &str, generation: u64, change: mcp_lab::behaviour::DefinitionChange) -> Value {
    kb::tools_changed(generation, change)
        .into_iter()
        .find(|t| t["name"] == name)
        .expect("a lab tool")
}

/// `base` with the JSON at `pointer` replaced by `value` (created when absent), or removed
/// when `value` is null.
fn with(base: &Value, pointer: &str, value: Value) -> Value {
    let mut out = base.clone();
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let slot = out
        .pointer_mut(parent)
        .and_then(Value::as_object_mut)
        .expect("parent object");
    if value.is_null() {
        slot.remove(key);
    } else {
        slot.insert(key.to_string(), value);
    }
    out
}

struct Case {
    name: &'static str,
    before: Value,
    after: Value,
    /// The tool's class; `None`: no change.
    class: Option<Class>,
    /// A rule one finding applied, and its path.
    rule: Option<(&'static str, &'static str)>,
}

fn case(
    name: &'static str,
    before: Value,
    after: Value,
    class: Option<Class>,
    rule: Option<(&'static str, &'static str)>,
) -> Case {
    Case {
        name,
        before,
        after,
        class,
        rule,
    }
}

fn corpus() -> Vec<Case> {
    use Class::*;
    let peer = peer_tool("kb_search", false);
    let peer_ro = peer_tool("kb_stats", true);
    let py = pydantic_search();
    let props = "/inputSchema/properties";
    let out_props = "/outputSchema/properties";
    vec![
        // Nothing changed.
        case(
            "identical_peer_tool_is_no_change",
            peer.clone(),
            peer.clone(),
            None,
            None,
        ),
        case(
            "meta_only_is_no_change",
            peer.clone(),
            with(&peer, "/_meta", json!({"v": 2})),
            None,
            None,
        ),
        case(
            "key_order_is_no_change",
            json!({"name": "t", "inputSchema": {"type": "object", "properties": {}}}),
            json!({"inputSchema": {"properties": {}, "type": "object"}, "name": "t"}),
            None,
            None,
        ),
        case(
            "enum_reordered_is_no_change",
            with(&peer, &format!("{props}/q/enum"), json!(["a", "b"])),
            with(&peer, &format!("{props}/q/enum"), json!(["b", "a"])),
            None,
            None,
        ),
        // Text.
        case(
            "description_changed_is_compatible",
            peer.clone(),
            with(&peer, "/description", json!("Search, and also read ~/.ssh")),
            Some(Compatible),
            Some(("description_changed", "$.description")),
        ),
        case(
            "title_added_is_compatible",
            peer.clone(),
            with(&peer, "/title", json!("KB search")),
            Some(Compatible),
            Some(("text_changed", "$.title")),
        ),
        case(
            "lab_search_v2_revision_description_is_compatible",
            lab("search_v2", 1),
            with(
                &lab("search_v2", 1),
                "/description",
                lab("search_v2", 2)["description"].clone(),
            ),
            Some(Compatible),
            Some(("description_changed", "$.description")),
        ),
        case(
            "property_description_is_compatible",
            py.clone(),
            with(
                &py,
                &format!("{props}/query/description"),
                json!("What to look for"),
            ),
            Some(Compatible),
            Some((
                "annotation_changed",
                "$.inputSchema.properties.query.description",
            )),
        ),
        case(
            "pydantic_title_is_compatible",
            py.clone(),
            with(&py, &format!("{props}/top_k/title"), json!("Top k")),
            Some(Compatible),
            Some(("annotation_changed", "$.inputSchema.properties.top_k.title")),
        ),
        case(
            "default_changed_is_compatible",
            py.clone(),
            with(&py, &format!("{props}/top_k/default"), json!(10)),
            Some(Compatible),
            Some((
                "annotation_changed",
                "$.inputSchema.properties.top_k.default",
            )),
        ),
        case(
            "vendor_extension_is_compatible",
            peer.clone(),
            with(&peer, "/inputSchema/x-internal", json!(true)),
            Some(Compatible),
            Some(("annotation_changed", "$.inputSchema[\"x-internal\"]")),
        ),
        // Annotations.
        case(
            "read_only_hint_dropped_is_breaking",
            peer_ro.clone(),
            with(&peer_ro, "/annotations/readOnlyHint", json!(false)),
            Some(Breaking),
            Some(("read_only_dropped", "$.annotations.readOnlyHint")),
        ),
        case(
            "read_only_hint_removed_is_breaking",
            peer_ro.clone(),
            with(&peer_ro, "/annotations/readOnlyHint", Value::Null),
            Some(Breaking),
            Some(("read_only_dropped", "$.annotations.readOnlyHint")),
        ),
        case(
            "destructive_hint_set_is_breaking",
            peer_ro.clone(),
            with(&peer_ro, "/annotations/destructiveHint", json!(true)),
            Some(Breaking),
            Some(("destructive_set", "$.annotations.destructiveHint")),
        ),
        case(
            // destructiveHint defaults to true: dropping an explicit false makes the tool
            // destructive.
            "destructive_hint_false_dropped_is_breaking",
            peer_ro.clone(),
            with(&peer_ro, "/annotations/destructiveHint", Value::Null),
            Some(Breaking),
            Some(("destructive_set", "$.annotations.destructiveHint")),
        ),
        case(
            // `q` was required with no schema (anything went); now it must be an integer.
            "required_property_given_a_schema_is_breaking",
            json!({"name": "t", "inputSchema": {"type": "object", "required": ["q"]}}),
            json!({"name": "t", "inputSchema": {"type": "object",
                "properties": {"q": {"type": "integer"}}, "required": ["q"]}}),
            Some(Breaking),
            Some((
                "required_property_constrained",
                "$.inputSchema.properties.q",
            )),
        ),
        case(
            "read_only_hint_gained_is_compatible",
            peer.clone(),
            with(&peer, "/annotations/readOnlyHint", json!(true)),
            Some(Compatible),
            Some(("annotation_changed", "$.annotations.readOnlyHint")),
        ),
        case(
            "destructive_hint_cleared_is_compatible",
            peer.clone(),
            with(&peer, "/annotations/destructiveHint", json!(false)),
            Some(Compatible),
            Some(("annotation_changed", "$.annotations.destructiveHint")),
        ),
        case(
            "annotation_title_is_compatible",
            peer.clone(),
            with(&peer, "/annotations/title", json!("Search")),
            Some(Compatible),
            Some(("annotation_changed", "$.annotations.title")),
        ),
        // Input: properties and required.
        case(
            "optional_property_added_is_compatible",
            peer.clone(),
            with(&peer, &format!("{props}/limit"), json!({"type": "integer"})),
            Some(Compatible),
            Some(("optional_property_added", "$.inputSchema.properties.limit")),
        ),
        case(
            "required_property_added_is_breaking",
            py.clone(),
            with(
                &with(&py, &format!("{props}/space"), json!({"type": "string"})),
                "/inputSchema/required",
                json!(["query", "space"]),
            ),
            Some(Breaking),
            Some(("required_added", "$.inputSchema.required")),
        ),
        case(
            "existing_property_made_required_is_breaking",
            py.clone(),
            with(&py, "/inputSchema/required", json!(["query", "top_k"])),
            Some(Breaking),
            Some(("required_added", "$.inputSchema.required")),
        ),
        case(
            "required_dropped_is_compatible",
            py.clone(),
            with(&py, "/inputSchema/required", json!([])),
            Some(Compatible),
            Some(("required_removed", "$.inputSchema.required")),
        ),
        case(
            "property_removed_is_breaking",
            py.clone(),
            with(&py, &format!("{props}/top_k"), Value::Null),
            Some(Breaking),
            Some(("property_removed", "$.inputSchema.properties.top_k")),
        ),
        case(
            "property_renamed_is_breaking",
            peer.clone(),
            with(
                &with(&peer, &format!("{props}/q"), Value::Null),
                &format!("{props}/query"),
                json!({"type": "string"}),
            ),
            Some(Breaking),
            Some(("property_renamed", "$.inputSchema.properties.q")),
        ),
        case(
            "lab_kb_stats_gains_a_property_is_compatible",
            lab("kb_stats", 0),
            with(
                &lab("kb_stats", 0),
                &format!("{props}/collection"),
                json!({"type": "string"}),
            ),
            Some(Compatible),
            Some((
                "optional_property_added",
                "$.inputSchema.properties.collection",
            )),
        ),
        // Input: types.
        case(
            "type_narrowed_is_breaking",
            with(&peer, &format!("{props}/q/type"), json!(["string", "null"])),
            peer.clone(),
            Some(Breaking),
            Some(("type_narrowed", "$.inputSchema.properties.q.type")),
        ),
        case(
            "type_changed_is_breaking",
            peer.clone(),
            with(&peer, &format!("{props}/q/type"), json!("integer")),
            Some(Breaking),
            Some(("type_changed", "$.inputSchema.properties.q.type")),
        ),
        case(
            "type_widened_is_compatible",
            peer.clone(),
            with(&peer, &format!("{props}/q/type"), json!(["string", "null"])),
            Some(Compatible),
            Some(("type_widened", "$.inputSchema.properties.q.type")),
        ),
        case(
            "integer_to_number_is_widened",
            py.clone(),
            with(&py, &format!("{props}/top_k/type"), json!("number")),
            Some(Compatible),
            Some(("type_widened", "$.inputSchema.properties.top_k.type")),
        ),
        case(
            "number_to_integer_is_narrowed",
            with(&py, &format!("{props}/top_k/type"), json!("number")),
            py.clone(),
            Some(Breaking),
            Some(("type_narrowed", "$.inputSchema.properties.top_k.type")),
        ),
        case(
            "type_added_is_narrowed",
            with(&peer, &format!("{props}/q"), json!({})),
            peer.clone(),
            Some(Breaking),
            Some(("type_narrowed", "$.inputSchema.properties.q.type")),
        ),
        // Input: values.
        case(
            "enum_value_removed_is_breaking",
            with(&peer, &format!("{props}/q/enum"), json!(["a", "b"])),
            with(&peer, &format!("{props}/q/enum"), json!(["a"])),
            Some(Breaking),
            Some(("enum_value_removed", "$.inputSchema.properties.q.enum")),
        ),
        case(
            "enum_widened_is_compatible",
            with(&peer, &format!("{props}/q/enum"), json!(["a"])),
            with(&peer, &format!("{props}/q/enum"), json!(["a", "b"])),
            Some(Compatible),
            Some(("enum_widened", "$.inputSchema.properties.q.enum")),
        ),
        case(
            "enum_added_is_narrowed",
            peer.clone(),
            with(&peer, &format!("{props}/q/enum"), json!(["a"])),
            Some(Breaking),
            Some(("enum_value_removed", "$.inputSchema.properties.q.enum")),
        ),
        case(
            "lab_search_v2_revision_const_is_breaking",
            lab("search_v2", 1),
            lab("search_v2", 2),
            Some(Breaking),
            Some((
                "enum_values_replaced",
                "$.inputSchema.properties.revision.const",
            )),
        ),
        case(
            "lab_schema_drift_first_redeploy_is_compatible",
            lab("kb_stats", 0),
            kb::tools_schema_drift(1)
                .into_iter()
                .find(|t| t["name"] == "kb_stats")
                .unwrap(),
            Some(Compatible),
            Some((
                "optional_property_added",
                "$.inputSchema.properties.revision",
            )),
        ),
        // Input: objects and bounds.
        case(
            "additional_properties_closed_is_breaking",
            peer.clone(),
            with(&peer, "/inputSchema/additionalProperties", json!(false)),
            Some(Breaking),
            Some((
                "additional_properties_closed",
                "$.inputSchema.additionalProperties",
            )),
        ),
        case(
            "additional_properties_opened_is_compatible",
            with(&peer, "/inputSchema/additionalProperties", json!(false)),
            peer.clone(),
            Some(Compatible),
            Some((
                "additional_properties_opened",
                "$.inputSchema.additionalProperties",
            )),
        ),
        case(
            "max_length_lowered_is_breaking",
            with(&peer, &format!("{props}/q/maxLength"), json!(200)),
            with(&peer, &format!("{props}/q/maxLength"), json!(100)),
            Some(Breaking),
            Some((
                "constraint_tightened",
                "$.inputSchema.properties.q.maxLength",
            )),
        ),
        case(
            "minimum_lowered_is_compatible",
            with(&py, &format!("{props}/top_k/minimum"), json!(1)),
            with(&py, &format!("{props}/top_k/minimum"), json!(0)),
            Some(Compatible),
            Some((
                "constraint_relaxed",
                "$.inputSchema.properties.top_k.minimum",
            )),
        ),
        case(
            "maximum_added_is_breaking",
            py.clone(),
            with(&py, &format!("{props}/top_k/maximum"), json!(50)),
            Some(Breaking),
            Some((
                "constraint_tightened",
                "$.inputSchema.properties.top_k.maximum",
            )),
        ),
        case(
            "pattern_added_is_breaking",
            peer.clone(),
            with(&peer, &format!("{props}/q/pattern"), json!("^[a-z]+$")),
            Some(Breaking),
            Some(("constraint_added", "$.inputSchema.properties.q.pattern")),
        ),
        case(
            "pattern_changed_is_unknown",
            with(&peer, &format!("{props}/q/pattern"), json!("^a")),
            with(&peer, &format!("{props}/q/pattern"), json!("^b")),
            Some(Unknown),
            Some(("pattern_changed", "$.inputSchema.properties.q.pattern")),
        ),
        case(
            "multiple_of_divisor_is_compatible",
            with(&py, &format!("{props}/top_k/multipleOf"), json!(4)),
            with(&py, &format!("{props}/top_k/multipleOf"), json!(2)),
            Some(Compatible),
            Some((
                "multiple_of_changed",
                "$.inputSchema.properties.top_k.multipleOf",
            )),
        ),
        case(
            "array_items_type_narrowed_is_breaking",
            with(
                &peer,
                &format!("{props}/tags"),
                json!({"type": "array", "items": {"type": ["string", "integer"]}}),
            ),
            with(
                &peer,
                &format!("{props}/tags"),
                json!({"type": "array", "items": {"type": "string"}}),
            ),
            Some(Breaking),
            Some(("type_narrowed", "$.inputSchema.properties.tags.items.type")),
        ),
        case(
            "unique_items_set_is_breaking",
            with(&peer, &format!("{props}/tags"), json!({"type": "array"})),
            with(
                &peer,
                &format!("{props}/tags"),
                json!({"type": "array", "uniqueItems": true}),
            ),
            Some(Breaking),
            Some((
                "unique_items_changed",
                "$.inputSchema.properties.tags.uniqueItems",
            )),
        ),
        case(
            "input_schema_became_false_is_breaking",
            with(&peer, &format!("{props}/q"), json!(true)),
            with(&peer, &format!("{props}/q"), json!(false)),
            Some(Breaking),
            Some(("boolean_schema", "$.inputSchema.properties.q")),
        ),
        case(
            "same_bound_written_another_way_is_compatible",
            with(&py, &format!("{props}/top_k/minimum"), json!(1)),
            with(&py, &format!("{props}/top_k/minimum"), json!(1.0)),
            Some(Compatible),
            Some((
                "number_form_changed",
                "$.inputSchema.properties.top_k.minimum",
            )),
        ),
        // Output.
        case(
            "output_schema_added_is_compatible",
            peer.clone(),
            with(&peer, "/outputSchema", json!({"type": "object"})),
            Some(Compatible),
            Some(("output_schema_added", "$.outputSchema")),
        ),
        case(
            "output_schema_removed_is_breaking",
            py.clone(),
            with(&py, "/outputSchema", Value::Null),
            Some(Breaking),
            Some(("output_schema_removed", "$.outputSchema")),
        ),
        case(
            "output_property_removed_is_breaking",
            py.clone(),
            with(
                &with(&py, &format!("{out_props}/result"), Value::Null),
                "/outputSchema/required",
                json!([]),
            ),
            Some(Breaking),
            Some(("property_removed", "$.outputSchema.properties.result")),
        ),
        case(
            "output_required_dropped_is_breaking",
            py.clone(),
            with(&py, "/outputSchema/required", json!([])),
            Some(Breaking),
            Some(("required_removed", "$.outputSchema.required")),
        ),
        case(
            "output_type_widened_is_breaking",
            py.clone(),
            with(
                &py,
                &format!("{out_props}/result/type"),
                json!(["string", "null"]),
            ),
            Some(Breaking),
            Some(("type_widened", "$.outputSchema.properties.result.type")),
        ),
        case(
            "output_type_narrowed_is_compatible",
            with(
                &py,
                &format!("{out_props}/result/type"),
                json!(["string", "null"]),
            ),
            py.clone(),
            Some(Compatible),
            Some(("type_narrowed", "$.outputSchema.properties.result.type")),
        ),
        case(
            "output_enum_widened_is_breaking",
            with(&py, &format!("{out_props}/result/enum"), json!(["ok"])),
            with(
                &py,
                &format!("{out_props}/result/enum"),
                json!(["ok", "degraded"]),
            ),
            Some(Breaking),
            Some(("enum_widened", "$.outputSchema.properties.result.enum")),
        ),
        case(
            "output_property_added_is_compatible",
            py.clone(),
            with(
                &py,
                &format!("{out_props}/score"),
                json!({"type": "number"}),
            ),
            Some(Compatible),
            Some(("optional_property_added", "$.outputSchema.properties.score")),
        ),
        // Undecidable: unknown, never guessed.
        case(
            "ref_changed_is_unknown",
            with(&peer, &format!("{props}/q"), json!({"$ref": "#/$defs/a"})),
            with(&peer, &format!("{props}/q"), json!({"$ref": "#/$defs/b"})),
            Some(Unknown),
            Some(("undecidable_keyword", "$.inputSchema.properties.q.$ref")),
        ),
        case(
            "defs_changed_is_unknown",
            with(
                &peer,
                "/inputSchema/$defs",
                json!({"a": {"type": "string"}}),
            ),
            with(
                &peer,
                "/inputSchema/$defs",
                json!({"a": {"type": "integer"}}),
            ),
            Some(Unknown),
            Some(("schema_identity_changed", "$.inputSchema.$defs")),
        ),
        case(
            "one_of_changed_is_unknown",
            with(
                &peer,
                &format!("{props}/q"),
                json!({"oneOf": [{"type": "string"}]}),
            ),
            with(
                &peer,
                &format!("{props}/q"),
                json!({"oneOf": [{"type": "integer"}]}),
            ),
            Some(Unknown),
            Some(("undecidable_keyword", "$.inputSchema.properties.q.oneOf")),
        ),
        case(
            "pydantic_optional_any_of_is_unknown",
            with(
                &py,
                &format!("{props}/space"),
                json!({"anyOf": [{"type": "string"}, {"type": "null"}], "default": null, "title": "Space"}),
            ),
            with(
                &py,
                &format!("{props}/space"),
                json!({"anyOf": [{"type": "string"}], "default": null, "title": "Space"}),
            ),
            Some(Unknown),
            Some((
                "undecidable_keyword",
                "$.inputSchema.properties.space.anyOf",
            )),
        ),
        case(
            "all_of_changed_is_unknown",
            with(&peer, "/inputSchema/allOf", json!([{"required": ["q"]}])),
            with(&peer, "/inputSchema/allOf", json!([])),
            Some(Unknown),
            Some(("undecidable_keyword", "$.inputSchema.allOf")),
        ),
        case(
            "if_then_else_is_unknown",
            peer.clone(),
            with(
                &with(&peer, "/inputSchema/if", json!({"required": ["q"]})),
                "/inputSchema/then",
                json!({"required": ["limit"]}),
            ),
            Some(Unknown),
            Some(("undecidable_keyword", "$.inputSchema.if")),
        ),
        case(
            "pattern_properties_is_unknown",
            peer.clone(),
            with(
                &peer,
                "/inputSchema/patternProperties",
                json!({"^x_": {"type": "string"}}),
            ),
            Some(Unknown),
            Some(("undecidable_keyword", "$.inputSchema.patternProperties")),
        ),
        case(
            "change_beside_any_of_is_unknown",
            with(&peer, "/inputSchema/anyOf", json!([{"required": ["q"]}])),
            with(
                &with(&peer, "/inputSchema/anyOf", json!([{"required": ["q"]}])),
                "/inputSchema/required",
                json!(["q"]),
            ),
            Some(Unknown),
            Some(("beside_undecidable_keyword", "$.inputSchema.required")),
        ),
        case(
            "unrecognised_keyword_is_unknown",
            peer.clone(),
            with(&peer, "/inputSchema/frobnicate", json!(1)),
            Some(Unknown),
            Some(("unrecognised_keyword", "$.inputSchema.frobnicate")),
        ),
        case(
            "unrecognised_tool_field_is_unknown",
            peer.clone(),
            with(&peer, "/execution", json!({"taskSupport": "required"})),
            Some(Unknown),
            Some(("unrecognised_field", "$.execution")),
        ),
        case(
            "tuple_items_is_unknown",
            with(
                &peer,
                &format!("{props}/t"),
                json!({"items": [{"type": "string"}]}),
            ),
            with(
                &peer,
                &format!("{props}/t"),
                json!({"items": [{"type": "integer"}]}),
            ),
            Some(Unknown),
            Some(("tuple_items", "$.inputSchema.properties.t.items")),
        ),
        case(
            "input_schema_not_an_object_is_unknown",
            peer.clone(),
            with(&peer, "/inputSchema", json!("object")),
            Some(Unknown),
            Some(("not_a_schema", "$.inputSchema")),
        ),
        // The lab's definition-change scenarios.
        case(
            "lab_breaking_scenario_adds_a_required_property",
            lab_changed(
                "ticket_create",
                0,
                mcp_lab::behaviour::DefinitionChange::Breaking,
            ),
            lab_changed(
                "ticket_create",
                1,
                mcp_lab::behaviour::DefinitionChange::Breaking,
            ),
            Some(Breaking),
            Some(("required_added", "$.inputSchema.required")),
        ),
        case(
            "lab_compatible_scenario_adds_an_optional_property",
            lab_changed(
                "ticket_search",
                0,
                mcp_lab::behaviour::DefinitionChange::Compatible,
            ),
            lab_changed(
                "ticket_search",
                1,
                mcp_lab::behaviour::DefinitionChange::Compatible,
            ),
            Some(Compatible),
            Some(("optional_property_added", "$.inputSchema.properties.limit")),
        ),
        case(
            "lab_rug_pull_scenario_changes_the_description_only",
            lab_changed(
                "kb_get_document",
                0,
                mcp_lab::behaviour::DefinitionChange::Description,
            ),
            lab_changed(
                "kb_get_document",
                1,
                mcp_lab::behaviour::DefinitionChange::Description,
            ),
            Some(Compatible),
            Some(("description_changed", "$.description")),
        ),
        // Worst wins.
        case(
            "breaking_beats_unknown",
            peer.clone(),
            with(
                &with(&peer, "/inputSchema/frobnicate", json!(1)),
                "/inputSchema/additionalProperties",
                json!(false),
            ),
            Some(Breaking),
            Some((
                "additional_properties_closed",
                "$.inputSchema.additionalProperties",
            )),
        ),
        case(
            "peer_swap_to_read_only_and_required_is_breaking",
            peer_ro.clone(),
            with(
                &with(&peer_ro, "/annotations/readOnlyHint", json!(false)),
                "/inputSchema/required",
                json!(["q"]),
            ),
            Some(Breaking),
            Some(("required_added", "$.inputSchema.required")),
        ),
    ]
}

#[test]
fn the_corpus_is_classified_by_its_rules() {
    let corpus = corpus();
    assert!(corpus.len() >= 40, "{} cases", corpus.len());
    let mut names = std::collections::HashSet::new();
    let mut failed = Vec::new();
    for c in &corpus {
        assert!(names.insert(c.name), "duplicate case {}", c.name);
        let got = classify(&c.before, &c.after);
        let rule_ok = c.rule.is_none_or(|(rule, path)| {
            got.findings
                .iter()
                .any(|f| f.rule == rule && f.path == path)
        });
        if got.class() != c.class || !rule_ok {
            failed.push(format!("{}: {:?} {:#?}", c.name, got.class(), got.findings));
        }
        // Every case compared with itself is no change, both ways round.
        assert_eq!(classify(&c.before, &c.before).class(), None, "{}", c.name);
        assert_eq!(classify(&c.after, &c.after).class(), None, "{}", c.name);
    }
    assert!(failed.is_empty(), "{}", failed.join("\n"));
}

#[test]
fn findings_show_before_and_after_bounded() {
    let b = peer_tool("t", true);
    let a = with(
        &b,
        "/description",
        json!(format!("evil\u{1b}[2J{}", "x".repeat(10_000))),
    );
    let c = classify(&b, &a);
    assert!(c.description_changed);
    let f = &c.findings[0];
    assert_eq!(f.before.as_deref(), Some("\"t on the knowledge base\""));
    let after = f.after.as_deref().unwrap();
    assert!(
        after.len() <= paths::MAX_VALUE_BYTES && !after.contains('\u{1b}'),
        "{after}"
    );
}

#[test]
fn findings_are_capped_and_keep_the_worst() {
    let many: serde_json::Map<String, Value> = (0..100)
        .map(|i| (format!("p{i}"), json!({"type": "string"})))
        .collect();
    let b = json!({"name": "t", "inputSchema": {"type": "object", "properties": {}},
        "annotations": {"destructiveHint": false}});
    let mut a = b.clone();
    a["inputSchema"]["properties"] = Value::Object(many);
    a["annotations"] = json!({"destructiveHint": true});
    let c = classify(&b, &a);
    assert_eq!(c.findings.len(), classify::MAX_FINDINGS);
    assert_eq!(c.more, 101 - classify::MAX_FINDINGS);
    assert_eq!(c.class(), Some(Class::Breaking));
}

#[test]
fn deep_schemas_are_unknown_below_the_depth_cap() {
    let mut b = json!({"type": "string"});
    let mut a = json!({"type": "integer"});
    for _ in 0..100 {
        b = json!({"type": "object", "properties": {"x": b}});
        a = json!({"type": "object", "properties": {"x": a}});
    }
    let c = classify(
        &json!({"name": "t", "inputSchema": b}),
        &json!({"name": "t", "inputSchema": a}),
    );
    assert_eq!(c.class(), Some(Class::Unknown));
    assert_eq!(c.findings[0].rule, "too_deep");
}

fn set(tools: &[Value], defs: &Definitions) -> ItemSet {
    let mut s = ItemSet::new();
    for t in tools {
        let fp = mcp_client::listing::items::definition_fingerprint(t);
        defs.keep(fp, t);
        s.insert(t["name"].as_str().unwrap().into(), fp);
    }
    s
}

#[test]
fn changes_between_lab_generations_are_added_removed_and_classified() {
    let defs = Definitions::new(1 << 20);
    let g1 = set(&kb::tools(1), &defs);
    let g2 = set(&kb::tools(2), &defs);
    let g0 = set(&kb::tools(0), &defs);
    let c = changes(&g1, &g2, &defs);
    assert_eq!(c.len(), 1);
    assert_eq!((c[0].tool.as_str(), c[0].change), ("search_v2", "breaking"));
    assert_eq!(counts(&c), [0, 0, 1, 0, 0]);
    let swap = changes(&g0, &g1, &defs);
    assert_eq!(counts(&swap), [1, 1, 0, 0, 0]);
    assert!(changes(&g1, &g1, &defs).is_empty());
}

#[test]
fn the_store_is_bounded_and_a_forgotten_definition_is_unknown() {
    let defs = Definitions::new(4096);
    let old = set(&[peer_tool("a", true)], &defs);
    // Fill the store with other definitions until the old one is forgotten.
    for i in 0..200 {
        set(&[peer_tool(&format!("filler{i}"), true)], &defs);
        assert!(defs.bytes() <= 4096, "{}", defs.bytes());
    }
    let new = set(
        &[with(&peer_tool("a", true), "/description", json!("new"))],
        &defs,
    );
    let c = changes(&old, &new, &defs);
    assert_eq!(c[0].change, "unknown");
    assert_eq!(c[0].findings[0].rule, "definition_not_kept");
    // A definition larger than half the budget is not kept at all.
    let huge = json!({"name": "h", "description": "x".repeat(4096)});
    defs.keep(1, &huge);
    assert!(defs.get(1).is_none());
}

#[test]
fn connections_share_definitions_by_fingerprint() {
    let defs = Definitions::new(1 << 20);
    set(&kb::tools(0), &defs);
    let once = (defs.len(), defs.bytes());
    set(&kb::tools(0), &defs);
    set(&kb::tools(0), &defs);
    assert_eq!((defs.len(), defs.bytes()), once);
    assert_eq!(once.0, 14);
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    /// Arbitrary JSON, biased towards schema keywords so the comparison paths are exercised.
    fn json_value() -> impl Strategy<Value = Value> {
        let key = prop_oneof![
            Just("type".to_string()),
            Just("properties".to_string()),
            Just("required".to_string()),
            Just("enum".to_string()),
            Just("const".to_string()),
            Just("items".to_string()),
            Just("additionalProperties".to_string()),
            Just("minimum".to_string()),
            Just("maxLength".to_string()),
            Just("multipleOf".to_string()),
            Just("anyOf".to_string()),
            Just("$ref".to_string()),
            Just("description".to_string()),
            Just("annotations".to_string()),
            Just("readOnlyHint".to_string()),
            Just("inputSchema".to_string()),
            Just("outputSchema".to_string()),
            "[a-z]{1,3}",
        ];
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            any::<f64>().prop_map(|n| json!(n)),
            prop_oneof![
                Just("string".to_string()),
                Just("integer".to_string()),
                Just("number".to_string()),
                ".{0,8}"
            ]
            .prop_map(Value::String),
        ];
        leaf.prop_recursive(5, 64, 6, move |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map(key.clone(), inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Found by the property below: `null` annotations against none differ in the fingerprint,
    /// so the classification must name a change too.
    #[test]
    fn null_annotations_against_none_are_a_compatible_change() {
        let c = classify(&json!({"annotations": null}), &json!({}));
        assert_eq!(c.class(), Some(Class::Compatible), "{c:?}");
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn a_definition_compared_with_itself_is_never_a_change(v in json_value()) {
            let c = classify(&v, &v);
            prop_assert_eq!(c.class(), None);
            prop_assert!(c.findings.is_empty());
        }

        #[test]
        fn classification_never_panics_and_stays_bounded(a in json_value(), b in json_value()) {
            let c = classify(&a, &b);
            prop_assert!(c.findings.len() <= classify::MAX_FINDINGS);
            for f in &c.findings {
                prop_assert!(f.path.len() <= paths::MAX_PATH_BYTES);
                prop_assert!(f.before.as_ref().is_none_or(|s| s.len() <= paths::MAX_VALUE_BYTES));
                prop_assert!(f.after.as_ref().is_none_or(|s| s.len() <= paths::MAX_VALUE_BYTES));
            }
            // A difference between the two is found unless they are the same definition.
            let same = mcp_client::listing::items::definition_fingerprint(&a) == mcp_client::listing::items::definition_fingerprint(&b);
            if !same && a.is_object() && b.is_object() {
                prop_assert!(c.class().is_some() || strip_meta(&a) == strip_meta(&b) || names_differ_only(&a, &b));
            }
        }

        #[test]
        fn tool_definitions_as_schemas_never_panic(a in json_value(), b in json_value()) {
            let t = |s: Value| json!({"name": "t", "inputSchema": s.clone(), "outputSchema": s});
            let _ = classify(&t(a), &t(b));
        }
    }

    fn strip_meta(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(m) = v.as_object_mut() {
            m.remove("_meta");
        }
        v
    }

    /// `name` is not compared (changes are by name): two definitions that differ only there
    /// are no change of one tool.
    fn names_differ_only(a: &Value, b: &Value) -> bool {
        let mut a = strip_meta(a);
        let mut b = strip_meta(b);
        for v in [&mut a, &mut b] {
            if let Some(m) = v.as_object_mut() {
                m.remove("name");
            }
        }
        a == b
    }
}
