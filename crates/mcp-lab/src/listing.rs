//! How a lab endpoint answers `tools/list`: which catalog it serves, how it cuts pages, and what
//! its cursors look like. Pure: the server decides generation, instance and churn state.

use serde_json::{Value, json};

use super::behaviour::{Behaviour, Cursors, Instances};
use super::kb;

/// The server-side state one `tools/list` answer depends on.
#[derive(Debug, Clone, Copy)]
pub struct ListState {
    /// The backend's deploy generation.
    pub generation: u64,
    /// Which instance answers (0 or 1).
    pub instance: u8,
    /// Whether the F11 hot-fix tool is currently inserted at the front.
    pub hotfix: bool,
    /// Offset cursors name the second page with the empty string (modern era only, where the
    /// empty string is a valid cursor).
    pub empty_cursor: bool,
}

/// The `ListToolsResult`, or the message of an invalid-params error.
pub fn answer(b: &Behaviour, st: ListState, cursor: Option<&Value>) -> Result<Value, &'static str> {
    let tools = catalog(b, st);
    match b.cursors {
        Cursors::Offset => offset_page(b, st, &tools, cursor),
        Cursors::Repeat => {
            let half = tools.len() / 2;
            let slice = if cursor.is_none() {
                &tools[..half]
            } else {
                &tools[half..]
            };
            Ok(json!({"tools": slice, "nextCursor": "page-2"}))
        }
        Cursors::Endless => {
            let n = cursor
                .and_then(Value::as_str)
                .and_then(|c| c.strip_prefix("more:"))
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            let slice: &[Value] = if n == 0 { &tools } else { &[] };
            Ok(json!({"tools": slice, "nextCursor": format!("more:{}", n + 1)}))
        }
    }
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
    let tools = catalog(b, st);
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

fn catalog(b: &Behaviour, st: ListState) -> Vec<Value> {
    let generation = match b.instances {
        // The second instance already runs the next deploy.
        Instances::PinnedDivergent if st.instance == 1 => st.generation + 1,
        _ => st.generation,
    };
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
    tools: &[Value],
    cursor: Option<&Value>,
) -> Result<Value, &'static str> {
    // Instance-local cursors name their instance; another instance cannot read them.
    let prefix = match b.instances {
        Instances::RoundRobinLocalCursors => format!("i{}:off:", st.instance),
        _ => "off:".to_string(),
    };
    let page = b.page_size.max(1);
    let offset = match cursor {
        None | Some(Value::Null) => 0,
        Some(Value::String(c)) => {
            let offset = if c.is_empty() && st.empty_cursor {
                Some(page)
            } else {
                c.strip_prefix(&prefix)
                    .and_then(|n| n.parse::<usize>().ok())
            };
            offset
                .filter(|n| *n < tools.len())
                .ok_or("Invalid cursor")?
        }
        Some(_) => return Err("Invalid cursor"),
    };
    let end = (offset + page).min(tools.len());
    let mut result = json!({"tools": tools[offset..end]});
    if end < tools.len() {
        let cursor = if st.empty_cursor && end == page {
            String::new()
        } else {
            format!("{prefix}{end}")
        };
        result["nextCursor"] = json!(cursor);
    }
    Ok(result)
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
        let p1 = answer(&b, ST, None).unwrap();
        let p2 = answer(&b, ST, Some(&p1["nextCursor"])).unwrap();
        assert_eq!(names(&p1).len() + names(&p2).len(), 14);
        assert!(p2.get("nextCursor").is_none());
        assert_eq!(answer(&b, ST, Some(&json!("bogus"))), Err("Invalid cursor"));
    }

    #[test]
    fn an_empty_cursor_names_the_second_page() {
        let b = Behaviour::default();
        let st = ListState {
            empty_cursor: true,
            ..ST
        };
        let p1 = answer(&b, st, None).unwrap();
        assert_eq!(p1["nextCursor"], "");
        let p2 = answer(&b, st, Some(&p1["nextCursor"])).unwrap();
        assert_eq!(names(&p1).len() + names(&p2).len(), 14);
        assert!(p2.get("nextCursor").is_none());
        assert_eq!(answer(&b, ST, Some(&json!(""))), Err("Invalid cursor"));
    }

    #[test]
    fn instance_local_cursors_fail_on_the_other_instance() {
        let b = Behaviour {
            instances: Instances::RoundRobinLocalCursors,
            ..Behaviour::default()
        };
        let p1 = answer(&b, ST, None).unwrap();
        let other = ListState { instance: 1, ..ST };
        assert_eq!(
            answer(&b, other, Some(&p1["nextCursor"])),
            Err("Invalid cursor")
        );
        assert!(answer(&b, ST, Some(&p1["nextCursor"])).is_ok());
    }

    #[test]
    fn hotfix_inserted_between_pages_repeats_a_name() {
        let b = Behaviour {
            insert_during_walk: true,
            ..Behaviour::default()
        };
        let p1 = answer(&b, ST, None).unwrap();
        let p2 = answer(
            &b,
            ListState { hotfix: true, ..ST },
            Some(&p1["nextCursor"]),
        )
        .unwrap();
        let n1 = names(&p1);
        assert!(names(&p2).iter().any(|n| n1.contains(n)));
    }

    #[test]
    fn divergent_instances_serve_different_lists() {
        let b = Behaviour {
            instances: Instances::PinnedDivergent,
            ..Behaviour::default()
        };
        let a = answer(&b, ST, None).unwrap();
        let c = answer(&b, ListState { instance: 1, ..ST }, None).unwrap();
        assert_ne!(a, c);
    }
}
