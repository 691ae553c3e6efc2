//! OTLP push: the measurements `/metrics` shows, sent to an OpenTelemetry collector.
//!
//! OpenTelemetry-first shops ingest through a collector rather than by scraping. The bridge
//! keeps one source of truth: counters and gauges are observable instruments whose callbacks
//! read the same exposition the scrape renders (see [`exposition::samples`]), so an OTLP point and a
//! scraped sample can never disagree. Histograms cannot be observed after the fact in
//! OpenTelemetry, so their samples are recorded into OTel histograms at the moment the
//! Prometheus histogram records them (with the same bucket bounds), through
//! [`OtelHistograms`]. Names, label names and label values are the Prometheus ones.
//!
//! The SDK's periodic reader runs on a thread of its own with a blocking HTTP client; start and
//! shutdown therefore run outside the async runtime (`spawn_blocking`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter, MeterProvider as _};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::metrics::data::ResourceMetrics;
use opentelemetry_sdk::metrics::exporter::PushMetricExporter;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider, Temporality};

use super::Telemetry;
use super::families;
use crate::config::{Secret, redact_url};
use exposition::{DURATION_BUCKETS, Kind, samples};

/// How the collector is reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OtlpProtocol {
    /// OTLP/HTTP with a protobuf body (the OTLP default for HTTP).
    #[value(name = "http/protobuf")]
    HttpProtobuf,
    /// OTLP/HTTP with a JSON body.
    #[value(name = "http/json")]
    HttpJson,
}

/// What `--otlp.*` flags configure.
#[derive(Debug, Clone)]
pub struct OtlpOptions {
    /// Full URL of the metrics endpoint; a URL with an empty path gets `/v1/metrics`.
    pub endpoint: url::Url,
    pub protocol: OtlpProtocol,
    /// Sent with every export; values are secrets.
    pub headers: Vec<(String, Secret)>,
    pub interval: Duration,
    pub timeout: Duration,
}

impl OtlpOptions {
    fn url(&self) -> url::Url {
        let mut u = self.endpoint.clone();
        if u.path() == "/" || u.path().is_empty() {
            u.set_path("/v1/metrics");
        }
        u
    }
}

/// A running OTLP push; [`OtlpPush::shutdown`] sends the last measurements.
pub struct OtlpPush {
    provider: SdkMeterProvider,
}

impl OtlpPush {
    /// Flush and stop. Blocks; call from `spawn_blocking`.
    pub fn shutdown(self) {
        if let Err(e) = self.provider.shutdown() {
            tracing::warn!(error = %e, "OTLP push did not shut down cleanly");
        }
    }
}

/// Start pushing. Blocks while the HTTP client is built; call from `spawn_blocking` (or before
/// the async runtime exists). Must run before targets are added, so that their histograms are
/// mirrored.
pub fn start(telemetry: &Arc<Telemetry>, opts: &OtlpOptions) -> Result<OtlpPush, String> {
    let url = opts.url();
    let headers: HashMap<String, String> = opts
        .headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_string()))
        .collect();
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_endpoint(url.as_str())
        .with_protocol(match opts.protocol {
            OtlpProtocol::HttpProtobuf => Protocol::HttpBinary,
            OtlpProtocol::HttpJson => Protocol::HttpJson,
        })
        .with_timeout(opts.timeout)
        .with_headers(headers)
        .build()
        .map_err(|e| format!("--otlp.endpoint {}: {e}", redact_url(&url)))?;
    let counted = Counted {
        inner: exporter,
        ok: telemetry.daemon_counter(families::OTLP_EXPORTS, &[("result", "success".into())]),
        failed: telemetry.daemon_counter(families::OTLP_EXPORTS, &[("result", "failure".into())]),
        endpoint: redact_url(&url),
    };
    counted.ok.absolute(0);
    counted.failed.absolute(0);
    let reader = PeriodicReader::builder(counted)
        .with_interval(opts.interval)
        .build();
    let provider = SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource())
        .build();
    let meter = provider.meter("mcp_exporter");
    register_observed(&meter, telemetry);
    telemetry.mirror_histograms(OtelHistograms::new(&meter));
    tracing::info!(endpoint = %redact_url(&url), protocol = ?opts.protocol, interval = ?opts.interval, headers = opts.headers.len(), "OTLP push started");
    Ok(OtlpPush { provider })
}

/// `service.name` = `mcp_exporter` unless `OTEL_SERVICE_NAME` says otherwise; `service.version`;
/// anything in `OTEL_RESOURCE_ATTRIBUTES` (the SDK's environment detector).
fn resource() -> Resource {
    let mut b = Resource::builder()
        .with_attribute(KeyValue::new("service.version", env!("CARGO_PKG_VERSION")));
    if std::env::var_os("OTEL_SERVICE_NAME").is_none() {
        b = b.with_service_name("mcp_exporter");
    }
    b.build()
}

/// The parsed exposition, shared by all callbacks of one collection.
struct Snapshot {
    telemetry: Arc<Telemetry>,
    cached: Mutex<Option<(Instant, Arc<Families>)>>,
}

/// Family name → (attributes, value) per series.
type Families = HashMap<String, Vec<(Vec<KeyValue>, f64)>>;

/// Callbacks of one collection run within milliseconds of each other; one render serves them.
const SNAPSHOT_REUSE: Duration = Duration::from_secs(1);

impl Snapshot {
    fn get(&self) -> Arc<Families> {
        let mut cached = self.cached.lock().expect("snapshot lock poisoned");
        if let Some((at, f)) = cached.as_ref()
            && at.elapsed() < SNAPSHOT_REUSE
        {
            return f.clone();
        }
        // Chunk by chunk (whole lines each), as `/metrics` sends them: no copy of the whole text.
        let mut families = Families::new();
        for chunk in self.telemetry.scrape() {
            for s in samples::parse(&chunk) {
                let attrs = s
                    .labels
                    .into_iter()
                    .map(|(k, v)| KeyValue::new(k.to_string(), v))
                    .collect();
                families
                    .entry(s.name.to_string())
                    .or_default()
                    .push((attrs, s.value));
            }
        }
        let f = Arc::new(families);
        *cached = Some((Instant::now(), f.clone()));
        f
    }
}

/// One observable instrument per counter and gauge family of the catalog.
fn register_observed(meter: &Meter, telemetry: &Arc<Telemetry>) {
    let snapshot = Arc::new(Snapshot {
        telemetry: telemetry.clone(),
        cached: Mutex::new(None),
    });
    for def in families::FAMILIES {
        let snap = snapshot.clone();
        let name = def.name;
        let observe = move |o: &dyn opentelemetry::metrics::AsyncInstrument<f64>| {
            if let Some(series) = snap.get().get(name) {
                for (attrs, v) in series {
                    o.observe(*v, attrs);
                }
            }
        };
        match def.kind {
            Kind::Counter => {
                meter
                    .f64_observable_counter(name)
                    .with_description(def.help)
                    .with_unit(unit(name))
                    .with_callback(observe)
                    .build();
            }
            Kind::Gauge => {
                meter
                    .f64_observable_gauge(name)
                    .with_description(def.help)
                    .with_unit(unit(name))
                    .with_callback(observe)
                    .build();
            }
            Kind::Histogram => {}
        }
    }
}

/// UCUM unit from the Prometheus base-unit suffix.
fn unit(name: &str) -> &'static str {
    let stem = name.strip_suffix("_total").unwrap_or(name);
    if stem.ends_with("_seconds") {
        "s"
    } else if stem.ends_with("_bytes") {
        "By"
    } else {
        "1"
    }
}

/// OTel twins of the catalog's histogram families.
#[derive(Clone)]
pub struct OtelHistograms {
    by_name: Arc<HashMap<&'static str, Histogram<f64>>>,
}

impl OtelHistograms {
    fn new(meter: &Meter) -> Self {
        let by_name = families::FAMILIES
            .iter()
            .filter(|d| d.kind == Kind::Histogram)
            .map(|d| {
                let h = meter
                    .f64_histogram(d.name)
                    .with_description(d.help)
                    .with_unit(unit(d.name))
                    .with_boundaries(DURATION_BUCKETS.to_vec())
                    .build();
                (d.name, h)
            })
            .collect();
        OtelHistograms {
            by_name: Arc::new(by_name),
        }
    }

    /// A `metrics` histogram that records into `prom` and into the OTel twin of `key`'s family.
    /// The OTel instrument of histogram `family` with `attrs`; `None` for a family that is no
    /// histogram.
    pub fn mirror(&self, family: &str, attrs: &[(&str, &str)]) -> Option<Mirror> {
        let otel = self.by_name.get(family)?;
        Some(Mirror {
            otel: otel.clone(),
            attrs: attrs
                .iter()
                .map(|(k, v)| KeyValue::new(k.to_string(), v.to_string()))
                .collect(),
        })
    }
}

/// One histogram series' OTel twin: the same samples, recorded as they happen.
pub struct Mirror {
    otel: Histogram<f64>,
    attrs: Vec<KeyValue>,
}

impl Mirror {
    pub fn record(&self, value: f64) {
        self.otel.record(value, &self.attrs);
    }
}

struct Counted {
    inner: opentelemetry_otlp::MetricExporter,
    ok: metrics::Counter,
    failed: metrics::Counter,
    endpoint: String,
}

impl PushMetricExporter for Counted {
    async fn export(&self, metrics: &ResourceMetrics) -> OTelSdkResult {
        let r = self.inner.export(metrics).await;
        match &r {
            Ok(()) => self.ok.increment(1),
            Err(e) => {
                self.failed.increment(1);
                tracing::warn!(endpoint = %self.endpoint, error = %e, "OTLP export failed");
            }
        }
        r
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.inner.force_flush()
    }

    fn shutdown_with_timeout(&self, timeout: Duration) -> OTelSdkResult {
        self.inner.shutdown_with_timeout(timeout)
    }

    fn temporality(&self) -> Temporality {
        self.inner.temporality()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_follow_the_base_unit_suffix() {
        assert_eq!(unit("mcp_probe_ping_duration_seconds"), "s");
        assert_eq!(unit("process_cpu_seconds_total"), "s");
        assert_eq!(unit("mcp_probe_tools"), "1");
        assert_eq!(unit("process_resident_memory_bytes"), "By");
    }

    #[test]
    fn an_endpoint_without_a_path_gets_the_metrics_path() {
        let mut o = OtlpOptions {
            endpoint: "http://collector:4318".parse().unwrap(),
            protocol: OtlpProtocol::HttpProtobuf,
            headers: vec![],
            interval: Duration::from_secs(60),
            timeout: Duration::from_secs(10),
        };
        assert_eq!(o.url().as_str(), "http://collector:4318/v1/metrics");
        o.endpoint = "http://collector:4318/custom/path".parse().unwrap();
        assert_eq!(o.url().as_str(), "http://collector:4318/custom/path");
    }
}
