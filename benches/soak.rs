//! Soak benchmark (not a test): many lab targets mixing every scenario, probed by the release
//! binary for a while; prints RSS, CPU and walk rate over time as a Markdown table.
//!
//! ```sh
//! cargo bench --bench soak                       # 200 targets, 10 minutes
//! SOAK_TARGETS=50 SOAK_SECONDS=120 cargo bench --bench soak
//! SOAK_SCENARIOS=healthy,notification-lost SOAK_TARGETS=1000 cargo bench --bench soak
//! ```
//!
//! `SOAK_SCENARIOS` (comma-separated names of `mcp_exporter lab --list`) cycles only those; two
//! runs side by side, one of them `healthy` alone, give the healthy figure a churning fleet is
//! judged against.
//!
//! The lab runs in this process; the exporter is the `mcp_exporter` binary in its own process, so
//! its RSS and CPU are its own.

use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use mcp_lab::{Lab, scenarios};

mod common;
use common::{proc_sample as sample, spawn_exporter, sum};

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The scenarios `SOAK_SCENARIOS` names (all of them when unset); an unknown name stops the run.
fn chosen() -> Vec<scenarios::Scenario> {
    let Ok(names) = std::env::var("SOAK_SCENARIOS") else {
        return scenarios::all();
    };
    names
        .split(',')
        .map(str::trim)
        .map(|name| {
            scenarios::find(name).unwrap_or_else(|| {
                panic!("SOAK_SCENARIOS: no scenario {name:?} (see `mcp_exporter lab --list`)")
            })
        })
        .collect()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 1)]
async fn main() {
    let targets = env_u64("SOAK_TARGETS", 200) as usize;
    let seconds = env_u64("SOAK_SECONDS", 600);
    let all = chosen();
    let profiles: Vec<_> = (0..targets)
        .map(|i| {
            let s = &all[i % all.len()];
            (format!("t{i:03}-{}", s.name), s.behaviour.clone())
        })
        .collect();
    let lab = Lab::start(SocketAddr::from(([127, 0, 0, 1], 0)), profiles.clone())
        .await
        .expect("lab starts");
    lab.spawn_churn(Duration::from_secs(30));

    let dir = std::env::temp_dir().join(format!("mcp_exporter_soak_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("soak.yml");
    let mut yml = String::from(
        "global:\n  audit_interval: 10s\n  ping_interval: 5s\n  request_timeout: 5s\n  notification_grace: 3s\ntargets:\n",
    );
    for (i, (name, _)) in profiles.iter().enumerate() {
        let connections = all[i % all.len()].connections;
        yml.push_str(&format!(
            "  - name: {name}\n    url: {}\n    connections: {connections}\n",
            lab.url(name)
        ));
    }
    std::fs::write(&config, yml).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut child = spawn_exporter(
        std::path::Path::new(env!("CARGO_BIN_EXE_mcp_exporter")),
        &config,
        port,
    );
    let pid = child.id();
    let client = reqwest::Client::new();
    let metrics_url = format!("http://127.0.0.1:{port}/metrics");

    println!(
        "| t (s) | RSS (MiB) | CPU (s) | CPU (%) | walks | walks/s | tools/list req/s | scrape (ms) | scrape (KiB) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let start = Instant::now();
    let mut last = (0.0f64, 0.0f64, 0.0f64, start);
    let mut peak_rss = 0u64;
    let step = Duration::from_secs(env_u64("SOAK_STEP", 30));
    let mut next = start + step;
    while start.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep_until(tokio::time::Instant::from_std(next)).await;
        next += step;
        let t0 = Instant::now();
        let Ok(resp) = client.get(&metrics_url).send().await else {
            continue;
        };
        let Ok(text) = resp.text().await else {
            continue;
        };
        let scrape_ms = t0.elapsed().as_secs_f64() * 1000.0;
        let walks = sum(&text, "mcp_probe_tools_list_walks_total", "");
        let lists = sum(&text, "mcp_probe_tools_list_requests_total", "");
        let Some((rss, cpu)) = sample(pid) else { break };
        peak_rss = peak_rss.max(rss);
        let dt = last.3.elapsed().as_secs_f64();
        println!(
            "| {:.0} | {:.1} | {:.1} | {:.1} | {:.0} | {:.1} | {:.1} | {:.1} | {:.0} |",
            start.elapsed().as_secs_f64(),
            rss as f64 / 1048576.0,
            cpu,
            100.0 * (cpu - last.0) / dt,
            walks,
            (walks - last.1) / dt,
            (lists - last.2) / dt,
            scrape_ms,
            text.len() as f64 / 1024.0,
        );
        std::io::stdout().flush().ok();
        last = (cpu, walks, lists, Instant::now());
    }
    println!(
        "\npeak RSS {:.1} MiB, {targets} targets, {seconds} s",
        peak_rss as f64 / 1048576.0
    );
    let _ = child.kill();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
}
