//! The lab serves prompts, resources and resource templates beside its tools, in the legacy era
//! (raw HTTP against a lab started in-process): declared with `listChanged`, paginated by the
//! same paginator, announced on the GET stream at every redeploy, and the retired item of each
//! list unknown to `prompts/get` and `resources/read` after it. The modern era's side is in
//! `lab_modern.rs`.

mod common;

use std::net::SocketAddr;

use common::DEADLINE;
use eventsource_stream::Eventsource;
use futures_util::StreamExt;
use mcp_client::listing::list::List;
use mcp_lab::{Behaviour, Lab};
use serde_json::{Value, json};

const VERSION: &str = "2025-11-25";

async fn lab(b: Behaviour) -> Lab {
    Lab::start(
        SocketAddr::from(([127, 0, 0, 1], 0)),
        vec![("kb".to_string(), b)],
    )
    .await
    .expect("lab starts")
}

/// A legacy session on the lab: its id, and the `initialize` result.
struct Legacy {
    http: reqwest::Client,
    url: url::Url,
    id: String,
    init: Value,
}

impl Legacy {
    async fn open(lab: &Lab) -> Legacy {
        let http = reqwest::Client::new();
        let url = lab.url("kb");
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": VERSION, "capabilities": {},
            "clientInfo": {"name": "lab-lists-test", "version": "0"}}});
        let resp = http
            .post(url.clone())
            .header("Accept", "application/json, text/event-stream")
            .json(&init)
            .send()
            .await
            .expect("initialize sent");
        let id = resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        let init: Value = resp.json().await.expect("initialize answer");
        Legacy {
            http,
            url,
            id,
            init: init["result"].clone(),
        }
    }

    /// A request of this session: its method, `Accept`, and the session's headers.
    fn request(&self, method: reqwest::Method, accept: &str) -> reqwest::RequestBuilder {
        self.http
            .request(method, self.url.clone())
            .header("Accept", accept)
            .header("Mcp-Session-Id", &self.id)
            .header("MCP-Protocol-Version", VERSION)
    }

    /// One request's whole JSON-RPC answer.
    async fn call(&self, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let resp = self
            .request(reqwest::Method::POST, "application/json, text/event-stream")
            .json(&body);
        let resp = tokio::time::timeout(DEADLINE, resp.send())
            .await
            .expect("answer within the deadline")
            .expect("request sent");
        resp.json().await.expect("a JSON answer")
    }

    /// Every item of `list`, following cursors; and how many pages that took.
    async fn walk(&self, list: List) -> (Vec<Value>, usize) {
        let (mut items, mut pages, mut cursor) = (Vec::new(), 0, None::<Value>);
        loop {
            let params = cursor.map_or(json!({}), |c| json!({"cursor": c}));
            let answer = self.call(list.method(), params).await;
            let page = &answer["result"];
            items.extend(page[list.result_key()].as_array().expect("items").clone());
            pages += 1;
            cursor = page.get("nextCursor").cloned();
            if cursor.is_none() || pages > 10 {
                return (items, pages);
            }
        }
    }
}

fn keys(list: List, items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| i[list.key_field()].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn legacy_sessions_list_prompts_and_resources_and_hear_every_list_change() {
    let lab = lab(Behaviour::default()).await;
    let s = Legacy::open(&lab).await;
    for cap in ["tools", "prompts", "resources"] {
        assert_eq!(
            s.init["capabilities"][cap],
            json!({"listChanged": true}),
            "{}",
            s.init
        );
    }
    let (prompts, pages) = s.walk(List::Prompts).await;
    assert_eq!((prompts.len(), pages), (10, 2));
    assert_eq!(keys(List::Prompts, &prompts)[0], "summarize_legacy");
    let (resources, pages) = s.walk(List::Resources).await;
    assert_eq!((resources.len(), pages), (12, 2));
    let (templates, pages) = s.walk(List::ResourceTemplates).await;
    assert_eq!((templates.len(), pages), (3, 1));

    // The GET stream announces a redeploy once per notification method, the tools first.
    let stream = s
        .request(reqwest::Method::GET, "text/event-stream")
        .send()
        .await
        .expect("GET stream");
    let mut events = stream.bytes_stream().eventsource();
    lab.churn();
    let mut methods = Vec::new();
    for _ in 0..3 {
        let event = tokio::time::timeout(DEADLINE, events.next())
            .await
            .expect("an event within the deadline")
            .expect("the stream is open")
            .expect("a well-formed event");
        let msg: Value = serde_json::from_str(&event.data).unwrap();
        methods.push(msg["method"].as_str().unwrap().to_string());
    }
    assert_eq!(
        methods,
        [
            "notifications/tools/list_changed",
            "notifications/prompts/list_changed",
            "notifications/resources/list_changed"
        ]
    );

    // After the redeploy the retired items are gone: the prompt is unknown, the resource not
    // found (-32002 in this era); what is listed still answers.
    let (prompts, _) = s.walk(List::Prompts).await;
    assert!(!keys(List::Prompts, &prompts).contains(&"summarize_legacy".to_string()));
    let gone = s
        .call("prompts/get", json!({"name": "summarize_legacy"}))
        .await;
    assert_eq!(gone["error"]["code"], -32602, "{gone}");
    let listed = s.call("prompts/get", json!({"name": "summarize_v2"})).await;
    assert!(listed["result"]["messages"].is_array(), "{listed}");
    let gone = s
        .call(
            "resources/read",
            json!({"uri": "kb://collections/legacy-index"}),
        )
        .await;
    assert_eq!(gone["error"]["code"], -32002, "{gone}");
    let by_template = s
        .call("resources/read", json!({"uri": "kb://documents/42"}))
        .await;
    assert_eq!(
        by_template["result"]["contents"][0]["uri"], "kb://documents/42",
        "{by_template}"
    );
}

#[tokio::test]
async fn the_cursor_faults_and_a_silent_server_apply_to_every_list() {
    let endless = Behaviour {
        cursors: mcp_lab::Cursors::Endless,
        list_changed_capability: false,
        ..Behaviour::default()
    };
    let lab = lab(endless).await;
    let s = Legacy::open(&lab).await;
    for cap in ["tools", "prompts", "resources"] {
        assert_eq!(s.init["capabilities"][cap], json!({}), "{}", s.init);
    }
    let (_, pages) = s.walk(List::Resources).await;
    assert!(pages > 10, "endless cursors never end a resource walk");
}

#[tokio::test]
async fn a_tools_only_profile_declares_and_serves_no_other_list() {
    let lab = lab(Behaviour {
        prompts_and_resources: false,
        ..Behaviour::default()
    })
    .await;
    let s = Legacy::open(&lab).await;
    assert_eq!(
        s.init["capabilities"],
        json!({"tools": {"listChanged": true}})
    );
    for method in ["prompts/list", "resources/list", "prompts/get"] {
        let answer = s.call(method, json!({})).await;
        assert_eq!(answer["error"]["code"], -32601, "{method}: {answer}");
    }
}
