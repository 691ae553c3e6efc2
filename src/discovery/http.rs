//! `http_sd_configs`: a URL polled every `refresh_interval` for JSON target groups, as
//! Prometheus' HTTP discovery does (200, `Content-Type: application/json`, a list of groups).
//!
//! The request goes through the same client as a target's ([`TargetHttp`]: credentials, TLS,
//! proxy from the source's own `http_config` blocks), and everything about the answer is bounded:
//! one deadline for request and body, a byte cap on the body read.

use std::collections::HashSet;

use reqwest::header::ACCEPT;
use tokio::sync::mpsc;

use super::Refresh;
use super::groups::{Format, Found};
use crate::config::HttpSdConfig;
use mcp_client::mcp::McpError;
use mcp_client::net::body::{media_type, read_capped};
use mcp_client::target_http::TargetHttp;

/// Poll `cfg` and send each outcome as source `id`, until the receiver is gone.
pub(super) async fn run(cfg: HttpSdConfig, id: u64, tx: mpsc::Sender<Refresh>) {
    let who = format!("http_sd {}", cfg.name);
    let client = TargetHttp::new(&who, &cfg.http, &cfg.url)
        .map_err(|e| format!("{}: {}", e.step.as_str(), e.detail));
    let mut tick = tokio::time::interval(cfg.refresh_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let outcome = match &client {
            Ok(http) => fetch(http, &cfg).await,
            Err(e) => Err(format!("cannot build the HTTP client: {e}")),
        };
        if tx.send(Refresh { id, outcome }).await.is_err() {
            return;
        }
    }
}

/// One poll: the groups the URL answers now.
async fn fetch(http: &TargetHttp, cfg: &HttpSdConfig) -> Result<Found, String> {
    let request = async {
        let interval = cfg.refresh_interval.as_secs_f64().to_string();
        let mut resp = http
            .send(|c| {
                c.get(cfg.url.clone())
                    .header(ACCEPT, "application/json")
                    .header("X-Prometheus-Refresh-Interval-Seconds", interval.as_str())
            })
            .await
            .map_err(|e| McpError::from_send(e).to_string())?;
        let status = resp.status();
        if status != reqwest::StatusCode::OK {
            return Err(format!("answered HTTP {}", status.as_u16()));
        }
        let media = media_type(resp.headers());
        if media != "application/json" {
            return Err(format!(
                "answered Content-Type {:?}; target groups must be application/json",
                mcp_client::mcp::truncate(&media, 64)
            ));
        }
        let body = read_capped(&mut resp, cfg.max_response_bytes)
            .await
            .map_err(|e| McpError::from_reqwest(&e).to_string())?
            .ok_or_else(|| {
                format!(
                    "answer larger than max_response_bytes ({} bytes)",
                    cfg.max_response_bytes
                )
            })?;
        let text = String::from_utf8(body).map_err(|_| "answer is not UTF-8".to_string())?;
        let mut found = Found::default();
        found.add(
            &text,
            Format::Json,
            &cfg.template,
            &mut HashSet::new(),
            "answer",
        )?;
        Ok(found)
    };
    tokio::time::timeout(cfg.timeout, request)
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "no complete answer within the timeout ({})",
                humantime::format_duration(cfg.timeout)
            ))
        })
}
