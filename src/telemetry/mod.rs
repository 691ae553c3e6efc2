//! Metrics: per-target recorders, per-connection handles, and one merged text exposition.
//!
//! Each target gets its own `metrics-exporter-prometheus` recorder. Dropping a removed target's
//! recorder is what makes its series disappear — the crate has no per-series delete, and
//! Prometheus conventions require removed targets to vanish rather than freeze. `/metrics` renders
//! every recorder and merges the families, taking HELP and TYPE from [`catalog`].

pub mod catalog;
mod conn;
pub mod otlp;
mod render;
mod samples;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::Duration;

use metrics::{Gauge, Key, Label, Metadata, Recorder};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusRecorder};

pub use conn::ConnMetrics;

/// Histogram buckets (seconds) for request, ping and walk durations.
const DURATION_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

static METADATA: Metadata<'static> =
    Metadata::new(module_path!(), metrics::Level::INFO, Some(module_path!()));

fn new_recorder() -> PrometheusRecorder {
    PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), &DURATION_BUCKETS)
        .expect("the bucket list is not empty")
        .build_recorder()
}

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
    /// Set when OTLP push runs: histogram samples are recorded there too.
    otel: OnceLock<otlp::OtelHistograms>,
}

impl Telemetry {
    pub fn new() -> Arc<Self> {
        let daemon = new_recorder();
        let process = metrics_process::Collector::default();
        metrics::with_local_recorder(&daemon, || process.describe());
        let t = Telemetry {
            daemon,
            process,
            targets: RwLock::new(BTreeMap::new()),
            otel: OnceLock::new(),
        };
        let build = key(
            catalog::BUILD_INFO,
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

    /// The current targets, so that rendering never holds the lock.
    fn snapshot(&self) -> Vec<Arc<TargetMetrics>> {
        self.targets
            .read()
            .expect("metrics lock poisoned")
            .values()
            .cloned()
            .collect()
    }

    /// Drain histogram samples into their buckets so memory stays flat between scrapes.
    pub fn upkeep(&self) {
        self.daemon.handle().run_upkeep();
        let targets = self.snapshot();
        for t in targets {
            t.recorder.handle().run_upkeep();
        }
    }

    /// The text exposition of everything.
    pub fn render(&self) -> String {
        metrics::with_local_recorder(&self.daemon, || self.process.collect());
        let targets = self.snapshot();
        let mut parts = Vec::with_capacity(1 + 2 * targets.len());
        parts.push(self.daemon.handle().render());
        for t in &targets {
            parts.push(t.recorder.handle().render());
            for info in t.info.lock().expect("metrics lock poisoned").values() {
                parts.push(info.handle().render());
            }
            if let Some(labels) = t.labels.lock().expect("metrics lock poisoned").as_ref() {
                parts.push(labels.handle().render());
            }
        }
        render::merge(&parts)
    }
}

/// The series of one functional probe.
struct ProbeMetrics {
    tool: String,
    success: Gauge,
    duration: Gauge,
    ok: AtomicBool,
}

impl ProbeMetrics {
    fn new(recorder: &PrometheusRecorder, target: &str, tool: &str) -> Self {
        let labels = [("target", target.to_string()), ("tool", tool.to_string())];
        let success =
            recorder.register_gauge(&key(catalog::TOOL_PROBE_SUCCESS, &labels), &METADATA);
        success.set(0.0);
        let duration =
            recorder.register_gauge(&key(catalog::TOOL_PROBE_DURATION, &labels), &METADATA);
        duration.set(0.0);
        // Every failure reason exists at 0 from the start: an alert on the increase of one
        // (`reason="unknown_tool"`) must see its first failure, not a series born at 1.
        for reason in crate::probe::functional::ProbeFailure::ALL {
            let mut with_reason = labels.to_vec();
            with_reason.push(("reason", reason.as_str().to_string()));
            recorder
                .register_counter(&key(catalog::TOOL_PROBE_FAILURES, &with_reason), &METADATA)
                .absolute(0);
        }
        ProbeMetrics {
            tool: tool.to_string(),
            success,
            duration,
            ok: AtomicBool::new(false),
        }
    }

    fn set_ok(&self, ok: bool) {
        self.ok.store(ok, Ordering::Relaxed);
        self.success.set(if ok { 1.0 } else { 0.0 });
    }
}

/// The series of one target.
pub struct TargetMetrics {
    name: String,
    recorder: PrometheusRecorder,
    up: Gauge,
    ready: Gauge,
    conn_up: Vec<AtomicBool>,
    /// Per connection: the last walk (any trigger) completed.
    walk_ok: Vec<AtomicBool>,
    /// Per configured probe, in config order.
    probes: Vec<ProbeMetrics>,
    /// `session_info` per connection, in a recorder of its own so that a new session with other
    /// label values replaces the old series instead of leaving it behind.
    info: Mutex<BTreeMap<u16, PrometheusRecorder>>,
    /// `target_info` (the target's labels), in a recorder of its own for the same reason.
    labels: Mutex<Option<PrometheusRecorder>>,
    otel: Option<otlp::OtelHistograms>,
}

impl TargetMetrics {
    fn new(
        name: &str,
        connections: u16,
        probes: &[String],
        otel: Option<otlp::OtelHistograms>,
    ) -> Self {
        let recorder = new_recorder();
        let gauge = |metric| {
            let g =
                recorder.register_gauge(&key(metric, &[("target", name.to_string())]), &METADATA);
            g.set(0.0);
            g
        };
        let up = gauge(catalog::UP);
        let ready = gauge(catalog::READY);
        let probes = probes
            .iter()
            .map(|tool| ProbeMetrics::new(&recorder, name, tool))
            .collect();
        let flags = || (0..connections).map(|_| AtomicBool::new(false)).collect();
        TargetMetrics {
            name: name.to_string(),
            recorder,
            up,
            ready,
            conn_up: flags(),
            walk_ok: flags(),
            probes,
            info: Mutex::new(BTreeMap::new()),
            labels: Mutex::new(None),
            otel,
        }
    }

    /// A histogram of this target (mirrored to OTLP when the push runs).
    fn histogram(&self, key: &Key) -> metrics::Histogram {
        let prom = self.recorder.register_histogram(key, &METADATA);
        match &self.otel {
            Some(o) => o.mirror(key, prom),
            None => prom,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Handles for one connection.
    pub fn connection(self: &Arc<Self>, index: u16) -> ConnMetrics {
        ConnMetrics::new(self.clone(), index)
    }

    fn set_connection_up(&self, index: u16, up: bool) {
        if let Some(b) = self.conn_up.get(index as usize) {
            b.store(up, Ordering::Relaxed);
        }
        let any = self.conn_up.iter().any(|b| b.load(Ordering::Relaxed));
        self.up.set(if any { 1.0 } else { 0.0 });
        self.update_ready();
    }

    fn set_walk_ok(&self, index: u16, ok: bool) {
        if let Some(b) = self.walk_ok.get(index as usize) {
            b.store(ok, Ordering::Relaxed);
        }
        self.update_ready();
    }

    /// `ready` = some connection is up with a complete last walk, and every probe passes.
    fn update_ready(&self) {
        let conn = self
            .conn_up
            .iter()
            .zip(&self.walk_ok)
            .any(|(up, walk)| up.load(Ordering::Relaxed) && walk.load(Ordering::Relaxed));
        let probes = self.probes.iter().all(|p| p.ok.load(Ordering::Relaxed));
        self.ready.set(if conn && probes { 1.0 } else { 0.0 });
    }

    /// Record a run of the probe at `index` (config order): `Ok(())` or the failure reason.
    pub fn probe_result(&self, index: usize, elapsed: Duration, result: Result<(), &'static str>) {
        let Some(p) = self.probes.get(index) else {
            return;
        };
        p.duration.set(elapsed.as_secs_f64());
        p.set_ok(result.is_ok());
        if let Err(reason) = result {
            self.recorder
                .register_counter(
                    &key(
                        catalog::TOOL_PROBE_FAILURES,
                        &[
                            ("target", self.name.clone()),
                            ("tool", p.tool.clone()),
                            ("reason", reason.to_string()),
                        ],
                    ),
                    &METADATA,
                )
                .increment(1);
        }
        self.update_ready();
    }

    /// `mcp_probe_auth_failures_total` of this target, every reason created at 0 (an alert on
    /// the increase of one must see its first failure): for targets with credentials (an auth
    /// block or a client certificate).
    pub fn auth_failures(&self) -> crate::net::FailureSink {
        let counters: Vec<(crate::net::refusal::AuthStep, metrics::Counter)> =
            crate::net::refusal::AuthStep::ALL
                .into_iter()
                .map(|step| {
                    let labels = [
                        ("target", self.name.clone()),
                        ("reason", step.as_str().to_string()),
                    ];
                    let c = self
                        .recorder
                        .register_counter(&key(catalog::AUTH_FAILURES, &labels), &METADATA);
                    c.absolute(0);
                    (step, c)
                })
                .collect();
        Arc::new(move |step| {
            if let Some((_, c)) = counters.iter().find(|(s, _)| *s == step) {
                c.increment(1);
            }
        })
    }

    /// An OAuth token acquisition of this target ended. Both `result` series appear at the first
    /// one, so a failure rate can be computed from the start.
    pub fn auth_token_request(&self, ok: bool) {
        for result in ["success", "failure"] {
            let counter = self.recorder.register_counter(
                &key(
                    catalog::AUTH_TOKEN_REQUESTS,
                    &[
                        ("target", self.name.clone()),
                        ("result", result.to_string()),
                    ],
                ),
                &METADATA,
            );
            counter.increment(u64::from((result == "success") == ok));
        }
    }

    /// The target's current OAuth access token expires at `unix_seconds` (0: no stated lifetime).
    pub fn auth_token_expiry(&self, unix_seconds: f64) {
        self.recorder
            .register_gauge(
                &key(catalog::AUTH_TOKEN_EXPIRY, &[("target", self.name.clone())]),
                &METADATA,
            )
            .set(unix_seconds);
    }

    /// The session that runs the probes is gone: none of them is passing now.
    pub fn probes_down(&self) {
        for p in &self.probes {
            p.set_ok(false);
        }
        self.update_ready();
    }

    /// Expose the target's labels as one `mcp_probe_target_info{target, <labels>} 1` series,
    /// replacing the previous one; none for no labels.
    pub fn set_labels(&self, labels: &BTreeMap<String, String>) {
        let series = (!labels.is_empty()).then(|| {
            let r = new_recorder();
            let pairs = std::iter::once(Label::new("target", self.name.clone()))
                .chain(labels.iter().map(|(k, v)| Label::new(k.clone(), v.clone())));
            r.register_gauge(
                &Key::from_parts(catalog::TARGET_INFO, pairs.collect::<Vec<_>>()),
                &METADATA,
            )
            .set(1.0);
            r
        });
        *self.labels.lock().expect("metrics lock poisoned") = series;
    }

    fn set_info(&self, index: u16, labels: Option<Vec<(&'static str, String)>>) {
        let mut info = self.info.lock().expect("metrics lock poisoned");
        match labels {
            None => {
                info.remove(&index);
            }
            Some(labels) => {
                let r = new_recorder();
                r.register_gauge(&key(catalog::SESSION_INFO, &labels), &METADATA)
                    .set(1.0);
                info.insert(index, r);
            }
        }
    }
}
