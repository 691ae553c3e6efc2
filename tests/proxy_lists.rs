//! Passive mode on every list a client caches, not only tools, in both eras: the lab (10 prompts,
//! 12 resources, 3 resource templates, pages of 8; each redeploy retires `summarize_legacy`,
//! `kb://collections/legacy-index` and the template `kb://search/legacy{?q}`) behind the proxy,
//! the exporter's own MCP client as the clients (told apart by a header,
//! `client_label: {header: x-client}`), each with its channel open (the legacy GET stream, the
//! modern `subscriptions/listen`), so the redeploy's notifications pass through the proxy.
//!
//! - A client that keeps its listings across the redeploy and then gets the retired prompt and
//!   reads the retired resource (and a URI of the retired template) is counted stale, under its
//!   own label and per list; and counted without re-list for both lists.
//! - A client that re-lists first is not stale, and its re-lists are timed per list.
//! - A read of a URI only a listed template produces is not stale.
//! - A client that ignores `nextCursor` on `prompts/list` is first-page-only for prompts, and a
//!   client that follows every cursor is not.

mod common;

use std::sync::Arc;

use common::proxy_lab::ProxyLab;
use common::{DEADLINE, Scrape};
use mcp_client::listing::list::List;
use mcp_client::mcp::{Client, Inbox, ProtocolVersion};
use mcp_exporter::config::{ClientLabel, Endpoint, Secret};
use serde_json::{Value, json};

const LEGACY: &str = "2025-11-25";
const MODERN: &str = "2026-07-28";

/// One client through the proxy, labelled by its `x-client` header, its channel read on.
struct Peer {
    client: Client,
    reader: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Peer {
    fn drop(&mut self) {
        if let Some(r) = self.reader.take() {
            r.abort();
        }
    }
}

async fn peer(s: &ProxyLab, name: &str, version: &str) -> Peer {
    let url = url::Url::parse(&s.url()).expect("URL");
    let net = mcp_client::target_http::TargetHttp::plain();
    let headers = [("x-client".to_string(), Secret::new(name))];
    let dialer = mcp_exporter::probe::connection::dialer(&Endpoint::http(url), &headers, &net)
        .expect("dialer");
    let (inbox, _requests) = Inbox::new();
    let inbox = Arc::new(inbox);
    let pinned = ProtocolVersion::parse(version).expect("version");
    let observe = |_: &'static str, _, _| {};
    let client = Client::connect(&dialer, Some(pinned), inbox.clone(), DEADLINE, &observe)
        .await
        .expect("a session through the proxy");
    let channel = client
        .open_channel()
        .await
        .expect("a channel through the proxy")
        .expect("the lab serves one");
    let reader = tokio::spawn(async move {
        let _ = channel.stream.run(&inbox).await;
    });
    Peer {
        client,
        reader: Some(reader),
    }
}

impl Peer {
    /// Every page of `list`: its keys.
    async fn walk(&self, list: List) -> Vec<String> {
        let (mut keys, mut cursor) = (Vec::new(), None::<String>);
        loop {
            let (page, _) = self
                .client
                .list_page(list, cursor.as_deref(), 1 << 20)
                .await
                .expect("a page");
            keys.extend(
                page[list.result_key()]
                    .as_array()
                    .expect("items")
                    .iter()
                    .filter_map(|i| i[list.key_field()].as_str().map(str::to_string)),
            );
            match page.get("nextCursor").and_then(Value::as_str) {
                Some(next) => cursor = Some(next.to_string()),
                None => return keys,
            }
        }
    }

    /// `prompts/get` of `name`: whether the upstream answered with a result.
    async fn get_prompt(&self, name: &str) -> bool {
        let args = json!({"document_id": "d1", "style": "brief", "question": "q"});
        self.client
            .request(
                "prompts/get",
                Some(json!({"name": name, "arguments": args})),
            )
            .await
            .is_ok()
    }

    /// `resources/read` of `uri`: whether the upstream answered with a result.
    async fn read(&self, uri: &str) -> bool {
        self.client
            .request("resources/read", Some(json!({"uri": uri})))
            .await
            .is_ok()
    }
}

async fn labelled() -> ProxyLab {
    ProxyLab::new(|c| c.client_label = ClientLabel::Header("x-client".into())).await
}

fn l<'a>(client: &'a str, list: &'a str) -> [(&'static str, &'a str); 3] {
    [("proxy", "kb"), ("client", client), ("list", list)]
}

const STALE: &str = "mcp_proxy_stale_list_calls_total";
const FIRST_PAGE: &str = "mcp_proxy_list_first_page_only_sessions_total";
const WITHOUT_RELIST: &str = "mcp_proxy_list_sessions_without_relist_total";

/// The lab redeployed, and the proxy's catalog walked after it.
async fn churn(s: &ProxyLab) {
    let walks = s.proxy.status().catalog_walks;
    s.lab.churn();
    s.until("the catalog re-walked after the redeploy", |_| {
        s.proxy.status().catalog_walks > walks
    })
    .await;
}

/// The whole scenario in one era.
async fn stale_uses_are_counted_per_client_and_list(version: &str) {
    let s = labelled().await;
    let m = s
        .until("the catalog walked every list", |m| {
            let items = |list| {
                m.get(
                    "mcp_proxy_upstream_list_items",
                    &[("proxy", "kb"), ("list", list)],
                )
            };
            items("prompts") == Some(10.0)
                && items("resources") == Some(12.0)
                && items("resource_templates") == Some(3.0)
        })
        .await;
    assert_eq!(m.v("mcp_proxy_upstream_tools", &[("proxy", "kb")]), 14.0);

    let cached = peer(&s, "cached", version).await;
    let relister = peer(&s, "relister", version).await;
    let templated = peer(&s, "templated", version).await;
    for p in [&cached, &relister, &templated] {
        let prompts = p.walk(List::Prompts).await;
        assert_eq!(prompts.len(), 10);
        assert!(prompts.contains(&"summarize_legacy".to_string()));
        assert_eq!(p.walk(List::Resources).await.len(), 12);
    }
    assert_eq!(templated.walk(List::ResourceTemplates).await.len(), 3);
    assert!(
        cached.get_prompt("summarize_legacy").await,
        "listed before the redeploy: served"
    );

    churn(&s).await;

    // Correct uses first: re-listed, then used what is listed now; a template's URI.
    let prompts = relister.walk(List::Prompts).await;
    assert!(
        !prompts.contains(&"summarize_legacy".to_string()),
        "{prompts:?}"
    );
    assert!(relister.get_prompt("summarize_v2").await);
    let resources = relister.walk(List::Resources).await;
    assert!(resources.contains(&"kb://collections/index-v1".to_string()));
    assert!(relister.read("kb://collections/index-v1").await);
    assert!(
        templated.read("kb://documents/42").await,
        "a template's URI"
    );
    // The cached client uses what it listed before the redeploy.
    assert!(!cached.get_prompt("summarize_legacy").await, "retired");
    assert!(
        !cached.read("kb://collections/legacy-index").await,
        "retired"
    );
    let _ = cached.read("kb://search/legacy?q=x").await;

    let m = s
        .until("the cached client's stale uses, per list", |m| {
            m.count(STALE, &l("cached", "prompts")) == 1.0
                && m.count(STALE, &l("cached", "resources")) == 2.0
        })
        .await;
    for client in ["relister", "templated"] {
        for list in ["prompts", "resources"] {
            assert_eq!(
                m.count(STALE, &l(client, list)),
                0.0,
                "{client} {list}\n{}",
                m.text
            );
        }
    }
    // Not a tool call: the tool series stay as they were.
    assert!(
        !m.text.contains("mcp_proxy_stale_tool_calls_total{"),
        "{}",
        m.text
    );
    // The cached client used both lists after their list_changed without listing them again.
    for list in ["prompts", "resources"] {
        assert_eq!(
            m.count(WITHOUT_RELIST, &l("cached", list)),
            1.0,
            "{list}\n{}",
            m.text
        );
        assert_eq!(
            m.count(WITHOUT_RELIST, &l("relister", list)),
            0.0,
            "{list}\n{}",
            m.text
        );
    }
    let lag = |list| {
        m.count(
            "mcp_proxy_list_relist_lag_seconds_count",
            &[("proxy", "kb"), ("list", list)],
        )
    };
    assert!(
        lag("prompts") >= 1.0 && lag("resources") >= 1.0,
        "{}",
        m.text
    );
    // Every cursor followed: no first-page-only session.
    for client in ["cached", "relister", "templated"] {
        assert_eq!(
            m.count(FIRST_PAGE, &l(client, "prompts")),
            0.0,
            "{}",
            m.text
        );
    }
    let session = s
        .proxy
        .status()
        .sessions
        .into_iter()
        .find(|r| r.client == "cached")
        .expect("the cached client's session row");
    let stale: Vec<(&str, u16)> = session
        .lists
        .iter()
        .map(|r| (r.list, r.stale_calls))
        .collect();
    assert_eq!(stale, [("prompts", 1), ("resources", 2)], "{session:?}");
    s.proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_stale_prompt_gets_and_resource_reads_are_counted_per_client_and_list() {
    stale_uses_are_counted_per_client_and_list(LEGACY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_stale_prompt_gets_and_resource_reads_are_counted_per_client_and_list() {
    stale_uses_are_counted_per_client_and_list(MODERN).await;
}

/// A client that takes the first page of `prompts/list` and then gets a prompt.
async fn first_page_only_on_prompts(version: &str) {
    let s = labelled().await;
    let careless = peer(&s, "first-page", version).await;
    let (page, _) = careless
        .client
        .list_page(List::Prompts, None, 1 << 20)
        .await
        .expect("the first page");
    assert_eq!(page["prompts"].as_array().map(Vec::len), Some(8));
    assert!(page.get("nextCursor").is_some());
    assert!(careless.get_prompt("answer_from_kb").await);
    let m = s
        .until("first-page-only for prompts", |m: &Scrape| {
            m.count(FIRST_PAGE, &l("first-page", "prompts")) == 1.0
        })
        .await;
    assert_eq!(
        m.v(
            "mcp_proxy_first_page_only_sessions_total",
            &[("proxy", "kb"), ("client", "first-page")]
        ),
        0.0,
        "the tool series is the tool list's alone: {}",
        m.text
    );
    assert_eq!(
        m.count(STALE, &l("first-page", "prompts")),
        0.0,
        "{}",
        m.text
    );
    s.proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_first_page_only_is_counted_for_prompts() {
    first_page_only_on_prompts(LEGACY).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_first_page_only_is_counted_for_prompts() {
    first_page_only_on_prompts(MODERN).await;
}
