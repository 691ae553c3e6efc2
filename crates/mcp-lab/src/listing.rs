//! How a lab endpoint answers a listing (`tools/list`, `prompts/list`, `resources/list`,
//! `resources/templates/list`): which catalog it serves, how it cuts pages, and what its cursors
//! look like; and the calls that use a listed item (`tools/call`, `prompts/get`,
//! `resources/read`). One paginator for every list: the cursor faults (F8–F10) and the instances
//! behind the endpoint (F12) apply to each alike. Pure: the server decides generation, instance
//! and churn state.

use serde_json::{Map, Value, json};

use super::behaviour::{Behaviour, Cursors, Instances};
use super::{kb, kb_lists};
use mcp_client::listing::list::List;

/// The server-side state one listing answer depends on.
#[derive(Debug, Clone, Copy)]
pub struct ListState {
    /// The backend's deploy generation.
    pub generation: u64,
    /// Which instance answers (0 or 1).
    pub instance: u8,
    /// Whether the F11 hot-fix tool is currently inserted at the front (of the tool list).
    pub hotfix: bool,
    /// Offset cursors name the second page with the empty string (modern era only, where the
    /// empty string is a valid cursor).
    pub empty_cursor: bool,
}

/// The result page of `list`'s listing (`ListToolsResult`, `ListPromptsResult`, …), or the
/// message of an invalid-params error.
pub fn answer(
    b: &Behaviour,
    st: ListState,
    list: List,
    cursor: Option<&Value>,
) -> Result<Value, &'static str> {
    let items = catalog(b, st, list);
    match b.cursors {
        Cursors::Offset => offset_page(b, st, list, &items, cursor),
        Cursors::Repeat => {
            let half = items.len() / 2;
            let slice = if cursor.is_none() {
                &items[..half]
            } else {
                &items[half..]
            };
            Ok(page(list, slice, Some("page-2".into())))
        }
        Cursors::Endless => {
            let n = cursor
                .and_then(Value::as_str)
                .and_then(|c| c.strip_prefix("more:"))
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            let slice: &[Value] = if n == 0 { &items } else { &[] };
            Ok(page(list, slice, Some(format!("more:{}", n + 1))))
        }
    }
}

/// One result page: `list`'s array, and `nextCursor` unless it is the last.
fn page(list: List, items: &[Value], next: Option<String>) -> Value {
    let mut result = Map::new();
    result.insert(list.result_key().into(), Value::Array(items.to_vec()));
    if let Some(next) = next {
        result.insert("nextCursor".into(), Value::String(next));
    }
    Value::Object(result)
}

/// The `CallToolResult` of `tools/call`, or the code and message of a JSON-RPC error.
///
/// Every lab tool is a stub that answers `ok`; `kb_stats` also returns `structuredContent`. A
/// tool the current deploy does not serve is an unknown tool (-32602, as the specification's
/// example), and a tool in `broken_tools` is listed but its backend is down (`isError: true`).
pub fn call(b: &Behaviour, st: ListState, params: &Value) -> Result<Value, (i64, String)> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((-32602, "tools/call needs a string name".into()));
    };
    let tools = catalog(b, st, List::Tools);
    if !tools.iter().any(|t| t["name"] == name) {
        return Err((-32602, format!("Unknown tool: {name}")));
    }
    if b.broken_tools.contains(&name) {
        return Ok(json!({
            "content": [{"type": "text", "text": format!("{name}: backend unavailable")}],
            "isError": true,
        }));
    }
    if name == "kb_stats" {
        let n = tools.len();
        return Ok(json!({
            "content": [{"type": "text", "text": format!("ok: {n} tools, deploy {}", st.generation)}],
            "structuredContent": {"status": "ok", "tools": n, "deploy": st.generation},
        }));
    }
    Ok(json!({"content": [{"type": "text", "text": format!("ok: {name}")}]}))
}

/// The `GetPromptResult` of `prompts/get` for a prompt the deploy lists, or the code and
/// message of the invalid-params error for one it does not.
pub fn get_prompt(b: &Behaviour, st: ListState, params: &Value) -> Result<Value, (i64, String)> {
    let Some(name) = params.get("name").and_then(Value::as_str) else {
        return Err((-32602, "prompts/get needs a string name".into()));
    };
    let prompts = catalog(b, st, List::Prompts);
    let Some(prompt) = prompts.iter().find(|p| p["name"] == name) else {
        return Err((-32602, format!("Unknown prompt: {name}")));
    };
    Ok(json!({
        "description": prompt["description"],
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("{name}: deploy {}", st.generation)}}],
    }))
}

/// The `ReadResourceResult` of `resources/read` for a URI the deploy serves (listed, or under one
/// of its templates), or the code and message of the error for one it does not: "resource not
/// found" is `not_found` (-32002 in the legacy era, -32602 in 2026-07-28).
pub fn read_resource(
    b: &Behaviour,
    st: ListState,
    params: &Value,
    not_found: i64,
) -> Result<Value, (i64, String)> {
    let Some(uri) = params.get("uri").and_then(Value::as_str) else {
        return Err((-32602, "resources/read needs a string uri".into()));
    };
    let resources = catalog(b, st, List::Resources);
    let templates = catalog(b, st, List::ResourceTemplates);
    if !kb_lists::readable(uri, &resources, &templates) {
        return Err((not_found, format!("Resource not found: {uri}")));
    }
    let mime = resources
        .iter()
        .find(|r| r["uri"] == uri)
        .and_then(|r| r["mimeType"].as_str())
        .unwrap_or("text/plain");
    Ok(json!({
        "contents": [{"uri": uri, "mimeType": mime, "text": format!("{uri}: deploy {}", st.generation)}],
    }))
}

fn catalog(b: &Behaviour, st: ListState, list: List) -> Vec<Value> {
    let generation = match b.instances {
        // The second instance already runs the next deploy.
        Instances::PinnedDivergent if st.instance == 1 => st.generation + 1,
        _ => st.generation,
    };
    if list != List::Tools {
        return kb_lists::items(list, generation);
    }
    let mut tools = if let Some(change) = b.definition_change {
        kb::tools_changed(generation, change)
    } else if b.schema_drift {
        kb::tools_schema_drift(generation)
    } else {
        kb::tools(generation)
    };
    if st.hotfix {
        tools.insert(0, kb::hotfix_tool());
    }
    tools
}

fn offset_page(
    b: &Behaviour,
    st: ListState,
    list: List,
    items: &[Value],
    cursor: Option<&Value>,
) -> Result<Value, &'static str> {
    // Instance-local cursors name their instance; another instance cannot read them.
    let prefix = match b.instances {
        Instances::RoundRobinLocalCursors => format!("i{}:off:", st.instance),
        _ => "off:".to_string(),
    };
    let size = b.page_size.max(1);
    let offset = match cursor {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => {
            let offset = if c.is_empty() && st.empty_cursor {
                Some(size)
            } else {
                c.strip_prefix(&prefix)
                    .and_then(|n| n.parse::<usize>().ok())
            };
            offset
                .filter(|n| *n < items.len())
                .ok_or("Invalid cursor")?
        }
        Some(_) => return Err("Invalid cursor"),
    };
    let end = (offset + size).min(items.len());
    let next = (end < items.len()).then(|| {
        if st.empty_cursor && end == size {
            String::new()
        } else {
            format!("{prefix}{end}")
        }
    });
    Ok(page(list, &items[offset..end], next))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &Value) -> Vec<String> {
        v["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    const ST: ListState = ListState {
        generation: 0,
        instance: 0,
        hotfix: false,
        empty_cursor: false,
    };

    #[test]
    fn offset_pages_cover_the_catalog_once() {
        let b = Behaviour::default();
        let p1 = answer(&b, ST, List::Tools, None).unwrap();
        let p2 = answer(&b, ST, List::Tools, Some(&p1["nextCursor"])).unwrap();
        assert_eq!(names(&p1).len() + names(&p2).len(), 14);
        assert!(p2.get("nextCursor").is_none());
        assert_eq!(
            answer(&b, ST, List::Tools, Some(&json!("bogus"))),
            Err("Invalid cursor")
        );
    }

    #[test]
    fn an_empty_cursor_names_the_second_page() {
        let b = Behaviour::default();
        let st = ListState {
            empty_cursor: true,
            ..ST
        };
        let p1 = answer(&b, st, List::Tools, None).unwrap();
        assert_eq!(p1["nextCursor"], "");
        let p2 = answer(&b, st, List::Tools, Some(&p1["nextCursor"])).unwrap();
        assert_eq!(names(&p1).len() + names(&p2).len(), 14);
        assert!(p2.get("nextCursor").is_none());
        assert_eq!(
            answer(&b, ST, List::Tools, Some(&json!(""))),
            Err("Invalid cursor")
        );
    }

    #[test]
    fn instance_local_cursors_fail_on_the_other_instance() {
        let b = Behaviour {
            instances: Instances::RoundRobinLocalCursors,
            ..Behaviour::default()
        };
        let p1 = answer(&b, ST, List::Tools, None).unwrap();
        let other = ListState { instance: 1, ..ST };
        assert_eq!(
            answer(&b, other, List::Tools, Some(&p1["nextCursor"])),
            Err("Invalid cursor")
        );
        assert!(answer(&b, ST, List::Tools, Some(&p1["nextCursor"])).is_ok());
    }

    #[test]
    fn hotfix_inserted_between_pages_repeats_a_name() {
        let b = Behaviour {
            insert_during_walk: true,
            ..Behaviour::default()
        };
        let p1 = answer(&b, ST, List::Tools, None).unwrap();
        let p2 = answer(
            &b,
            ListState { hotfix: true, ..ST },
            List::Tools,
            Some(&p1["nextCursor"]),
        )
        .unwrap();
        let n1 = names(&p1);
        assert!(names(&p2).iter().any(|n| n1.contains(n)));
    }

    #[test]
    fn every_list_is_paged_the_same_way_under_its_own_key() {
        let b = Behaviour::default();
        for list in [List::Prompts, List::Resources, List::ResourceTemplates] {
            let mut seen = Vec::new();
            let mut cursor: Option<Value> = None;
            for _ in 0..10 {
                let p = answer(&b, ST, list, cursor.as_ref()).unwrap();
                assert!(p.get("tools").is_none(), "{list}: {p}");
                seen.extend(p[list.result_key()].as_array().unwrap().iter().cloned());
                cursor = p.get("nextCursor").cloned();
                if cursor.is_none() {
                    break;
                }
            }
            assert!(cursor.is_none(), "{list}: the walk ends");
            assert_eq!(
                seen,
                kb_lists::items(list, 0),
                "{list}: every item once, in order"
            );
        }
        let endless = Behaviour {
            cursors: Cursors::Endless,
            ..Behaviour::default()
        };
        let p = answer(&endless, ST, List::Prompts, Some(&json!("more:3"))).unwrap();
        assert_eq!(p["nextCursor"], "more:4");
    }

    #[test]
    fn a_retired_prompt_or_resource_is_unknown_to_the_new_deploy() {
        let b = Behaviour::default();
        let later = ListState {
            generation: 1,
            ..ST
        };
        let legacy = json!({"name": "summarize_legacy"});
        assert!(get_prompt(&b, ST, &legacy).is_ok());
        assert_eq!(get_prompt(&b, later, &legacy).unwrap_err().0, -32602);
        let index = json!({"uri": "kb://collections/legacy-index"});
        assert!(read_resource(&b, ST, &index, -32002).is_ok());
        assert_eq!(
            read_resource(&b, later, &index, -32002).unwrap_err().0,
            -32002
        );
        assert_eq!(
            read_resource(&b, later, &index, -32602).unwrap_err().0,
            -32602
        );
    }

    #[test]
    fn divergent_instances_serve_different_lists() {
        let b = Behaviour {
            instances: Instances::PinnedDivergent,
            ..Behaviour::default()
        };
        let a = answer(&b, ST, List::Tools, None).unwrap();
        let c = answer(&b, ListState { instance: 1, ..ST }, List::Tools, None).unwrap();
        assert_ne!(a, c);
    }
}
