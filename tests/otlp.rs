//! OTLP push through the binary: a receiver decodes what the exporter sends (OTLP/HTTP with a
//! protobuf body) and checks names, attributes, values, the resource and the header — and that
//! the header's secret value never reaches the logs.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::HeaderMap;
use common::{DEADLINE, Exporter, free_port};
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{KeyValue, any_value::Value as Any};
use opentelemetry_proto::tonic::metrics::v1::{
    AggregationTemporality, Metric, metric::Data, number_data_point::Value as Num,
};
use prost::Message;

#[derive(Default)]
struct Received {
    /// `authorization` header and decoded body of each export.
    exports: Vec<(Option<String>, ExportMetricsServiceRequest)>,
}

type Shared = Arc<Mutex<Received>>;

async fn receive(State(rx): State<Shared>, headers: HeaderMap, body: Bytes) -> &'static str {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let req = ExportMetricsServiceRequest::decode(body).expect("an OTLP protobuf body");
    rx.lock().unwrap().exports.push((auth, req));
    ""
}

async fn receiver() -> (u16, Shared) {
    let rx = Shared::default();
    let app = axum::Router::new()
        .route("/v1/metrics", axum::routing::post(receive))
        .with_state(rx.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (port, rx)
}

fn attr<'a>(attrs: &'a [KeyValue], key: &str) -> Option<&'a str> {
    attrs.iter().find(|kv| kv.key == key).and_then(|kv| {
        match kv.value.as_ref()?.value.as_ref()? {
            Any::StringValue(s) => Some(s.as_str()),
            _ => None,
        }
    })
}

fn metrics(req: &ExportMetricsServiceRequest) -> impl Iterator<Item = &Metric> {
    req.resource_metrics
        .iter()
        .flat_map(|r| &r.scope_metrics)
        .flat_map(|s| &s.metrics)
}

fn number(v: &Option<Num>) -> f64 {
    match v {
        Some(Num::AsDouble(d)) => *d,
        Some(Num::AsInt(i)) => *i as f64,
        None => f64::NAN,
    }
}

/// The value of the `target="kb_healthy"` point of a gauge or sum.
fn healthy_point(m: &Metric) -> Option<f64> {
    let points = match m.data.as_ref()? {
        Data::Gauge(g) => &g.data_points,
        Data::Sum(s) => &s.data_points,
        _ => return None,
    };
    points
        .iter()
        .find(|p| attr(&p.attributes, "target") == Some("kb_healthy"))
        .map(|p| number(&p.value))
}

const TOKEN: &str = "otlp-s3cr3t-token";

/// What one export must show once the demo has walked its healthy target.
fn complete(req: &ExportMetricsServiceRequest) -> Result<(), String> {
    let resource = req.resource_metrics[0]
        .resource
        .as_ref()
        .ok_or("no resource")?;
    if attr(&resource.attributes, "service.name") != Some("mcp_exporter") {
        return Err("service.name is not mcp_exporter".into());
    }
    let find = |name: &str| {
        metrics(req)
            .find(|m| m.name == name)
            .ok_or(format!("no {name}"))
    };
    let pages = find("mcp_probe_tools_list_pages")?;
    if healthy_point(pages) != Some(2.0) {
        return Err(format!("pages of kb_healthy: {:?}", healthy_point(pages)));
    }
    let tools = find("mcp_probe_tools")?;
    let Some(Data::Gauge(g)) = &tools.data else {
        return Err("mcp_probe_tools is not a gauge".into());
    };
    let server_view = g.data_points.iter().any(|p| {
        attr(&p.attributes, "target") == Some("kb_healthy")
            && attr(&p.attributes, "connection") == Some("0")
            && attr(&p.attributes, "view") == Some("server")
            && number(&p.value) == 14.0
    });
    if !server_view {
        return Err("mcp_probe_tools{view=server} of kb_healthy is not 14".into());
    }
    let requests = find("mcp_probe_tools_list_requests_total")?;
    let Some(Data::Sum(sum)) = &requests.data else {
        return Err("tools/list requests is not a sum".into());
    };
    if !sum.is_monotonic
        || sum.aggregation_temporality != AggregationTemporality::Cumulative as i32
        || healthy_point(requests).is_none_or(|v| v < 2.0)
    {
        return Err("tools/list requests is not a cumulative monotonic sum ≥ 2".into());
    }
    let ping = find("mcp_probe_ping_duration_seconds")?;
    let Some(Data::Histogram(h)) = &ping.data else {
        return Err("ping duration is not a histogram".into());
    };
    let point = h
        .data_points
        .iter()
        .find(|p| attr(&p.attributes, "target") == Some("kb_healthy"))
        .ok_or("no kb_healthy ping histogram point")?;
    if point.count == 0
        || point.explicit_bounds.len() != mcp_exporter::telemetry::DURATION_BUCKETS.len()
        || ping.unit != "s"
    {
        return Err(format!(
            "ping histogram: count {} bounds {} unit {:?}",
            point.count,
            point.explicit_bounds.len(),
            ping.unit
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_measurements_arrive_over_otlp_http_protobuf() {
    let (port, rx) = receiver().await;
    let e = Exporter::spawn(
        &[
            "--demo".into(),
            format!("--otlp.endpoint=http://127.0.0.1:{port}"),
            "--otlp.interval=1s".into(),
            "--otlp.header=Authorization: Bearer ${OTLP_TEST_TOKEN}".into(),
        ],
        &[("OTLP_TEST_TOKEN", TOKEN)],
    );
    let start = tokio::time::Instant::now();
    loop {
        let last = {
            let r = rx.lock().unwrap();
            r.exports
                .last()
                .map(|(auth, req)| (auth.clone(), complete(req)))
        };
        if let Some((auth, Ok(()))) = &last {
            assert_eq!(auth.as_deref(), Some(format!("Bearer {TOKEN}").as_str()));
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "no complete OTLP export in time; last: {:?}\n{}",
            last.map(|l| l.1),
            e.logs()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    e.until_metrics("an OTLP export counted", |s| {
        s.get("mcp_exporter_otlp_exports_total", &[("result", "success")])
            .is_some_and(|v| v >= 1.0)
    })
    .await;
    assert!(!e.logs().contains(TOKEN), "the OTLP header value leaked");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_collector_counts_failures_and_probing_goes_on() {
    let dead = free_port();
    let e = Exporter::spawn(
        &[
            "--demo".into(),
            format!("--otlp.endpoint=http://127.0.0.1:{dead}/v1/metrics"),
            "--otlp.interval=1s".into(),
            "--otlp.timeout=1s".into(),
        ],
        &[],
    );
    e.until_metrics("failed exports counted while targets stay up", |s| {
        s.get("mcp_exporter_otlp_exports_total", &[("result", "failure")])
            .is_some_and(|v| v >= 1.0)
            && s.get("mcp_probe_up", &[("target", "kb_healthy")]) == Some(1.0)
    })
    .await;
}

#[test]
fn a_bad_header_flag_is_rejected_without_echoing_its_value() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp_exporter"))
        .args([
            "--demo",
            "--otlp.endpoint=http://127.0.0.1:9/v1/metrics",
            &format!("--otlp.header=Bad Name: {TOKEN}"),
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--otlp.header") && err.contains("not a valid HTTP header name"));
    assert!(!err.contains(TOKEN), "{err}");
}
