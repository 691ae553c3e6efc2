//! A minimal MCP client that authenticates with `mcp_exporter::oauth::TokenSource`, for the
//! conformance suite's auth scenarios:
//!
//! ```text
//! node …/conformance/dist/index.js client --scenario auth/client-credentials-basic \
//!     --command "target/debug/examples/oauth_conformance_client"
//! ```
//!
//! The suite passes the server URL as the last argument and the scenario's credentials in
//! `MCP_CONFORMANCE_CONTEXT` (`client_id`, `client_secret`, or `private_key_pem` with
//! `signing_algorithm`). Without credentials the client is a public client. It lists the tools
//! and calls the first one, answering each 401/403 through `TokenSource::challenged`; it exits 1
//! when authentication fails.

use mcp_exporter::config::{
    ClientAuth, JwtAlgorithm, JwtKey, OAuth2Config, ProxyConfig, Secret, SecretSource, TlsConfig,
};
use mcp_exporter::net::refusal::{Refusal, Retry};
use mcp_exporter::oauth::TokenSource;
use serde_json::{Value, json};
use std::time::Duration;

/// Requests (a refused one and its retries) per MCP message.
const MAX_ATTEMPTS: usize = 6;

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let server = std::env::args().next_back().expect("server URL argument");
    let server = url::Url::parse(&server).expect("server URL");
    let ctx: Value = std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Value::Null);
    let version =
        std::env::var("MCP_CONFORMANCE_PROTOCOL_VERSION").unwrap_or_else(|_| "2025-11-25".into());
    let s = |k: &str| ctx.get(k).and_then(Value::as_str).map(str::to_owned);
    let client_auth = if let Some(pem) = s("private_key_pem") {
        ClientAuth::PrivateKeyJwt(JwtKey {
            key: SecretSource::Inline(Secret::new(pem)),
            key_id: None,
            algorithm: match s("signing_algorithm").as_deref() {
                Some("RS256") => JwtAlgorithm::Rs256,
                Some("RS384") => JwtAlgorithm::Rs384,
                Some("RS512") => JwtAlgorithm::Rs512,
                Some("PS256") => JwtAlgorithm::Ps256,
                Some("ES384") => JwtAlgorithm::Es384,
                Some("EdDSA") => JwtAlgorithm::EdDsa,
                _ => JwtAlgorithm::Es256,
            },
        })
    } else if let Some(secret) = s("client_secret") {
        ClientAuth::SecretAuto(SecretSource::Inline(Secret::new(secret)))
    } else {
        ClientAuth::None
    };
    let cfg = OAuth2Config {
        client_id: s("client_id").unwrap_or_else(|| "mcp-exporter-conformance".into()),
        client_auth,
        scopes: Vec::new(),
        token_url: None,
        endpoint_params: Vec::new(),
        tls: TlsConfig::default(),
        proxy: ProxyConfig::Direct,
    };
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("HTTP client");
    let tokens = TokenSource::new("conformance", &cfg, &server, http.clone());
    let client = Client {
        http,
        server,
        tokens,
        version: version.clone(),
    };
    let modern = version.as_str() >= "2026";
    let result = async {
        if !modern {
            client
                .call(
                    json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{
                    "protocolVersion": version, "capabilities": {},
                    "clientInfo": {"name":"mcp-exporter-oauth-conformance","version":"0"}}}),
                )
                .await?;
            client
                .call(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
                .await?;
        }
        let tools = client
            .call(client.request(2, "tools/list", json!({})))
            .await?;
        let first = tools
            .pointer("/result/tools/0/name")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if let Some(name) = first {
            client
                .call(client.request(3, "tools/call", json!({"name": name, "arguments": {}})))
                .await?;
        }
        Ok::<(), String>(())
    }
    .await;
    if let Err(e) = result {
        eprintln!("oauth_conformance_client: {e}");
        std::process::exit(1);
    }
}

struct Client {
    http: reqwest::Client,
    server: url::Url,
    tokens: std::sync::Arc<TokenSource>,
    version: String,
}

impl Client {
    fn request(&self, id: u64, method: &str, mut params: Value) -> Value {
        if self.version.as_str() >= "2026" {
            params["_meta"] = json!({
                "io.modelcontextprotocol/protocolVersion": self.version,
                "io.modelcontextprotocol/clientCapabilities": {},
            });
        }
        json!({"jsonrpc":"2.0","id":id,"method":method,"params":params})
    }

    /// POSTs one message; answers refusals through the token source. Returns the JSON-RPC
    /// response (from JSON or the first SSE `data:` line), or `null` for a notification.
    async fn call(&self, msg: Value) -> Result<Value, String> {
        for _ in 0..MAX_ATTEMPTS {
            let auth = self.tokens.bearer().await.map_err(|e| e.to_string())?;
            let mut req = self
                .http
                .post(self.server.clone())
                .header("Accept", "application/json, text/event-stream")
                .header("MCP-Protocol-Version", &self.version)
                .json(&msg);
            if let Some(a) = &auth {
                req = req.header(reqwest::header::AUTHORIZATION, a.clone());
            }
            let resp = req
                .send()
                .await
                .map_err(|e| format!("request failed: {e}"))?;
            let status = resp.status().as_u16();
            if status == 401 || status == 403 {
                let www = resp
                    .headers()
                    .get(reqwest::header::WWW_AUTHENTICATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                let refusal = Refusal {
                    status,
                    www_authenticate: www.as_deref(),
                    sent: auth.as_ref(),
                };
                match self.tokens.challenged(&refusal).await {
                    Ok(Retry::Once) => continue,
                    Ok(Retry::No) => return Err(format!("HTTP {status}")),
                    Err(e) => return Err(e.to_string()),
                }
            }
            if !(200..300).contains(&status) {
                return Err(format!("HTTP {status}"));
            }
            let text = resp.text().await.map_err(|e| e.to_string())?;
            if text.trim().is_empty() {
                return Ok(Value::Null);
            }
            let body = text
                .lines()
                .find_map(|l| l.strip_prefix("data:"))
                .unwrap_or(&text);
            return serde_json::from_str(body.trim()).map_err(|e| e.to_string());
        }
        Err("still refused after retries".into())
    }
}
