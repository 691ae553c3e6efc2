//! `--demo`: the knowledge base behind seven gateways, probed by the exporter in the same process.
//! The first five serve both eras (on `protocol_version: auto` the exporter settles on the modern
//! one); `kb_modern` and `kb_no_promise` serve 2026-07-28 only, so a legacy-only client could not
//! reach them.
//!
//! | target            | what its gateway does                                  | what the exporter shows          |
//! |-------------------|--------------------------------------------------------|----------------------------------|
//! | `kb_healthy`      | nothing wrong                                          | drift 0, pages 2, tools 14       |
//! | `kb_lossy_gateway`| drops `list_changed` (F1)                              | drift extra/missing, unannounced |
//! | `kb_no_list_changed` | declares no `listChanged`, sends none (F2)          | capable 0, drift, unannounced    |
//! | `kb_no_stream`    | declares `listChanged` but answers GET with 405 (F3)   | stream up 0 while capable 1      |
//! | `kb_flaky_relist` | the first 2 `tools/list` after each redeploy fail (F5) | refresh failures, then recovery  |
//! | `kb_modern`       | nothing wrong, 2026-07-28 only (`initialize` refused)  | era modern, drift 0, pages 2     |
//! | `kb_no_promise`   | 2026-07-28 defaults: no `listChanged`, `ttlMs` 0       | `no_promise`: drift, never stale |
//!
//! Tool definition changes (docs/changes.md) show on every target: each redeploy changes
//! `search_v2`'s schema under the same name, a `breaking` change on
//! `mcp_probe_tool_changes_total` and the status page. `kb_lossy_gateway` is also pinned to the
//! first deploy's tools, prompts, resources and templates (a pins file written to the temporary
//! folder at start): from the first redeploy on, `search_legacy` is a pinned tool gone and
//! `search_v2` an unpinned one, and each other list's retired item a pinned item gone, so the
//! pin alerts have data. The lossy gateway drops the other lists' notifications too: its prompt
//! cache goes stale next to its tool cache.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use crate::config::{
    Config, Defaults, Endpoint, Expect, ProbeConfig, ProtocolChoice, TargetConfig, TargetSettings,
};
use mcp_client::listing::list::List;
use mcp_lab::{Behaviour, Era, Lab};

/// The demo's reverse proxy (`proxy` label) and where it listens: in front of `kb_healthy`,
/// whose tool list swaps at every redeploy. Clients use [`proxy_url`].
pub const PROXY_NAME: &str = "kb_proxy";
pub const PROXY_LISTEN: &str = crate::config::DEFAULT_PROXY_LISTEN;
/// The lab profile the demo proxy fronts.
const PROXY_PROFILE: &str = "kb_healthy";

/// The MCP endpoint of the demo proxy (the upstream's path, served as-is).
pub fn proxy_url() -> url::Url {
    url::Url::parse(&format!("http://{PROXY_LISTEN}/{PROXY_PROFILE}/mcp")).expect("static URL")
}

/// How often the demo backend is redeployed with a changed tool list.
pub const CHURN_PERIOD: Duration = Duration::from_secs(30);

/// The demo's profiles.
pub fn profiles() -> Vec<(String, Behaviour)> {
    let healthy = Behaviour::default();
    vec![
        ("kb_healthy".into(), healthy.clone()),
        (
            "kb_lossy_gateway".into(),
            Behaviour {
                deliver_list_changed: false,
                ..healthy.clone()
            },
        ),
        (
            "kb_no_list_changed".into(),
            Behaviour {
                list_changed_capability: false,
                sse_responses: true,
                ..healthy.clone()
            },
        ),
        (
            "kb_no_stream".into(),
            Behaviour {
                get_stream: false,
                ..healthy.clone()
            },
        ),
        (
            "kb_flaky_relist".into(),
            Behaviour {
                failing_lists_after_change: 2,
                ..healthy.clone()
            },
        ),
        (
            "kb_modern".into(),
            Behaviour {
                era: Era::Modern,
                ..healthy.clone()
            },
        ),
        (
            // What fastmcp, rmcp and the Python SDK's low-level server serve by default: no
            // promise to caching clients, so a drift that is never a stale verdict.
            "kb_no_promise".into(),
            Behaviour {
                era: Era::Modern,
                list_changed_capability: false,
                ttl_ms: 0,
                ..healthy
            },
        ),
    ]
}

/// Start the demo lab on a free loopback port, churning every [`CHURN_PERIOD`], and the clients
/// of its proxy (`mcp_lab::demo_clients`).
pub async fn start() -> std::io::Result<Lab> {
    let lab = Lab::start(SocketAddr::from(([127, 0, 0, 1], 0)), profiles()).await?;
    lab.spawn_churn(CHURN_PERIOD);
    mcp_lab::demo_clients::spawn(proxy_url());
    Ok(lab)
}

/// The configuration that probes the demo lab: short intervals so the story unfolds in a minute.
pub fn config(lab: &Lab) -> Config {
    let settings = TargetSettings {
        audit_interval: Duration::from_secs(10),
        ping_interval: Duration::from_secs(5),
        request_timeout: Duration::from_secs(5),
        notification_grace: Duration::from_secs(3),
        ..TargetSettings::default()
    };
    let pins = demo_pins();
    let targets = profiles()
        .into_iter()
        .map(|(name, _)| TargetConfig {
            pins: (name == "kb_lossy_gateway").then(|| pins.clone()).flatten(),
            endpoint: Endpoint::http(lab.url(&name)),
            protocol_version: ProtocolChoice::Auto,
            headers: vec![],
            settings: settings.clone(),
            probes: probes(&name),
            http: Default::default(),
            labels: Default::default(),
            name,
        })
        .map(Arc::new)
        .collect();
    let listen = crate::config::parse_proxy_listen(PROXY_LISTEN).expect("static address");
    let mut proxy = crate::config::McpProxyConfig::new(PROXY_NAME, listen, lab.url(PROXY_PROFILE));
    proxy.cursor_grace = Duration::from_secs(5);
    proxy.relist_grace = Duration::from_secs(10);
    proxy.catalog_refresh_interval = Duration::from_secs(30);
    Config {
        global: Defaults {
            settings,
            ..Defaults::default()
        },
        targets,
        proxies: vec![proxy],
        ..Config::default()
    }
}

/// The first deploy's tools, prompts, resources and templates as a pins file in a folder of the temporary directory (one per
/// process); `None`, logged, when it cannot be written: the demo runs without pins then.
fn demo_pins() -> Option<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("mcp_exporter-demo-{}", std::process::id()));
    let path = dir.join("kb.pins.json");
    let lists = List::ALL.map(|l| (l, mcp_lab::kb_lists::items(l, 0)));
    let sections: Vec<_> = lists.iter().map(|(l, d)| (*l, &d[..])).collect();
    let text = mcp_client::listing::changes::pins::render_lists(&sections);
    match std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, text)) {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!(error = %e, "demo pins file not written; kb_lossy_gateway runs unpinned");
            None
        }
    }
}

/// Every demo target checks `kb_stats` (read-only, answers "ok"); the lossy gateway's clients
/// also rely on `search_legacy`, which the first redeploy retires: its probe turns into the
/// `unknown_tool` failure a stale cache produces.
fn probes(target: &str) -> Vec<ProbeConfig> {
    let probe = |tool: &str, expect: Expect| ProbeConfig {
        tool: tool.into(),
        arguments: serde_json::Map::new(),
        interval: Duration::from_secs(15),
        timeout: Duration::from_secs(5),
        expect,
        allow_side_effects: false,
    };
    let mut out = vec![probe(
        "kb_stats",
        Expect {
            text_contains: Some("ok".into()),
            structured: [("/status".to_string(), serde_json::json!("ok"))].into(),
        },
    )];
    if target == "kb_lossy_gateway" {
        out.push(probe("search_legacy", Expect::default()));
    }
    out
}
