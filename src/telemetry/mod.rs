//! Metrics: the probe's series rendered straight from its state, the daemon's through a recorder.
//!
//! The probe's series (every `mcp_probe_*` family) are atomics owned by [`TargetMetrics`] and
//! its connections, written into the text format when scraped ([`expo`]) — Prometheus' advice
//! for exporters, and what keeps a scrape of 10,000 connections in the hundreds of milliseconds:
//! no per-target registry to render and re-parse, no keys built on the hot path. Dropping a
//! removed target's `TargetMetrics` is what makes its series disappear.
//!
//! The daemon's own few series (`mcp_exporter_*`, `process_*`) keep `metrics-exporter-prometheus`
//! and `metrics-process`, where a registry fits: they are few, fixed, and the process collector
//! speaks the `metrics` facade.

mod cells;
mod conn;
mod expo;
pub mod families;
pub mod otlp;
pub mod proxy;
mod render;
mod samples;
mod target;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use metrics::{Gauge, Key, Label, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};

pub use cells::DURATION_BUCKETS;
pub use conn::ConnMetrics;
pub use expo::Exclusions;
pub use target::TargetMetrics;

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

fn key(name: &'static str, labels: &[(&'static str, String)]) -> Key {
    Key::from_parts(
        name,
        labels
            .iter()
            .map(|(k, v)| Label::new(*k, v.clone()))
            .collect::<Vec<_>>(),
    )
}

/// The process-wide metrics registry.
pub struct Telemetry {
    daemon: PrometheusRecorder,
    process: metrics_process::Collector,
    targets: RwLock<BTreeMap<String, Arc<TargetMetrics>>>,
    /// The reverse proxies' series (`mcp_proxy_*`), by proxy name.
    proxies: RwLock<BTreeMap<String, Arc<proxy::ProxyMetrics>>>,
    /// Set when OTLP push runs: histogram samples are recorded there too.
    otel: OnceLock<otlp::OtelHistograms>,
    /// Bytes per family at the last scrape: the next one reserves them up front.
    sizes: std::sync::Mutex<Vec<usize>>,
    exclusions: Exclusions,
}

impl Telemetry {
    pub fn new() -> Arc<Self> {
        Self::excluding(Exclusions::default())
    }

    /// A registry whose exposition leaves out `exclusions` (`--metrics.exclude`).
    pub fn excluding(exclusions: Exclusions) -> Arc<Self> {
        let daemon = PrometheusBuilder::new().build_recorder();
        let process = metrics_process::Collector::default();
        metrics::with_local_recorder(&daemon, || process.describe());
        let t = Telemetry {
            daemon,
            process,
            targets: RwLock::new(BTreeMap::new()),
            proxies: RwLock::new(BTreeMap::new()),
            otel: OnceLock::new(),
            sizes: std::sync::Mutex::new(Vec::new()),
            exclusions,
        };
        let build = key(
            families::BUILD_INFO,
            &[
                ("version", env!("CARGO_PKG_VERSION").to_string()),
                (
                    "revision",
                    option_env!("MCP_EXPORTER_REVISION")
                        .unwrap_or("unknown")
                        .to_string(),
                ),
            ],
        );
        t.daemon.register_gauge(&build, &METADATA).set(1.0);
        Arc::new(t)
    }

    /// A gauge or counter of the daemon itself.
    pub fn daemon_gauge(&self, name: &'static str) -> Gauge {
        self.daemon.register_gauge(&key(name, &[]), &METADATA)
    }

    /// A daemon gauge with labels (shard, discovery source).
    pub fn daemon_gauge_with(
        &self,
        name: &'static str,
        labels: &[(&'static str, String)],
    ) -> Gauge {
        self.daemon.register_gauge(&key(name, labels), &METADATA)
    }

    pub fn daemon_counter(
        &self,
        name: &'static str,
        labels: &[(&'static str, String)],
    ) -> metrics::Counter {
        self.daemon.register_counter(&key(name, labels), &METADATA)
    }

    /// Series for a target; replaces any earlier series of the same name.
    pub fn add_target(
        &self,
        name: &str,
        connections: u16,
        probes: &[String],
    ) -> Arc<TargetMetrics> {
        let t = Arc::new(TargetMetrics::new(
            name,
            connections,
            probes,
            self.otel.get().cloned(),
        ));
        self.targets
            .write()
            .expect("metrics lock poisoned")
            .insert(name.to_string(), t.clone());
        t
    }

    /// Mirror the histograms of targets added from now on into OTel instruments.
    fn mirror_histograms(&self, h: otlp::OtelHistograms) {
        let _ = self.otel.set(h);
    }

    /// Drop a target's series.
    pub fn remove_target(&self, name: &str) {
        self.targets
            .write()
            .expect("metrics lock poisoned")
            .remove(name);
    }

    /// Series for a proxy; replaces any earlier series of the same name.
    pub fn add_proxy(&self, name: &str) -> Arc<proxy::ProxyMetrics> {
        let p = Arc::new(proxy::ProxyMetrics::new(name));
        self.proxies
            .write()
            .expect("metrics lock poisoned")
            .insert(name.to_string(), p.clone());
        p
    }

    /// Drop a proxy's series (when `current` is still the registered one: a restarted proxy's
    /// new series are not removed by its old instance).
    pub fn remove_proxy(&self, current: &Arc<proxy::ProxyMetrics>) {
        let mut proxies = self.proxies.write().expect("metrics lock poisoned");
        if proxies
            .get(current.name())
            .is_some_and(|p| Arc::ptr_eq(p, current))
        {
            proxies.remove(current.name());
        }
    }

    /// The current targets, so that rendering never holds the lock.
    fn snapshot(&self) -> Vec<Arc<TargetMetrics>> {
        self.targets
            .read()
            .expect("metrics lock poisoned")
            .values()
            .cloned()
            .collect()
    }

    /// Drain the daemon recorder's histogram samples so memory stays flat between scrapes (the
    /// probe's histograms are bucket counts already).
    pub fn upkeep(&self) {
        self.daemon.handle().run_upkeep();
    }

    /// The text exposition of everything.
    pub fn render(&self) -> String {
        let sizes = self.sizes.lock().expect("metrics lock poisoned").clone();
        let mut out = expo::Exposition::with_sizes(&sizes, &self.exclusions);
        for t in self.snapshot() {
            t.render(&mut out);
        }
        let proxies: Vec<_> = self
            .proxies
            .read()
            .expect("metrics lock poisoned")
            .values()
            .cloned()
            .collect();
        for p in proxies {
            p.render(&mut out);
        }
        *self.sizes.lock().expect("metrics lock poisoned") = out.sizes();
        let mut text = out.finish();
        metrics::with_local_recorder(&self.daemon, || self.process.collect());
        text.push_str(&render::merge(&[self.daemon.handle().render()]));
        text
    }
}
