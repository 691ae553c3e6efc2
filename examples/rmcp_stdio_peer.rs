//! A real MCP server over stdio for the transport tests: the official Rust SDK (rmcp) serving a
//! paginated `tools/list` (page size 2, opaque cursors) and a tool `add_tool` that adds a tool
//! and announces it with `notifications/tools/list_changed` through rmcp's own `Peer`.
//!
//! Started by `tests/transports.rs` as a child process; it ends when its stdin closes.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ProtocolVersion, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

const PAGE_SIZE: usize = 2;
const CURSOR_PREFIX: &str = "page-after:";

#[derive(Clone)]
struct Registry {
    names: Arc<Mutex<Vec<String>>>,
}

fn tool(name: &str) -> Tool {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), serde_json::json!("object"));
    Tool::new(
        name.to_string(),
        format!("the {name} tool"),
        Arc::new(schema),
    )
}

impl ServerHandler for Registry {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new("rmcp-stdio-peer", "1.0.0"))
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&ProtocolVersion::V_2025_11_25))
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let names = self.names.lock().unwrap().clone();
        let start = match request.and_then(|r| r.cursor) {
            None => 0,
            Some(c) => c
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= names.len())
                .ok_or_else(|| ErrorData::invalid_params("unknown cursor", None))?,
        };
        let end = (start + PAGE_SIZE).min(names.len());
        let page = names[start..end].iter().map(|n| tool(n)).collect();
        Ok(ListToolsResult {
            next_cursor: (end < names.len()).then(|| format!("{CURSOR_PREFIX}{end}")),
            ..ListToolsResult::with_all_items(page)
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if request.name != "add_tool" {
            return Err(ErrorData::invalid_params("unknown tool", None));
        }
        let name = {
            let mut names = self.names.lock().unwrap();
            let name = format!("added_{}", names.len());
            names.push(name.clone());
            name
        };
        context
            .peer
            .notify_tool_list_changed()
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(name)]).into())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let names = ["alpha", "beta", "gamma", "add_tool"]
        .map(String::from)
        .to_vec();
    let registry = Registry {
        names: Arc::new(Mutex::new(names)),
    };
    let server = registry.serve(rmcp::transport::stdio()).await?;
    server.waiting().await?;
    Ok(())
}
