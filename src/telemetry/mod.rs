//! Metrics: the registry a scrape reads, the catalog of families, and the daemon's own series.
//!
//! The probe's and the proxies' series are atomics owned by their capability
//! (`probe::metrics`, `proxy::metrics`) and written into the text format when scraped
//! ([`exposition`]) — Prometheus' advice for exporters. The registry holds them only as [`Series`]:
//! it knows no MCP type, and dropping a removed target's series is what makes them disappear.
//!
//! A scrape ([`Telemetry::scrape`]) is one buffer per family, filled from every target and
//! reserved at the last scrape's size, handed out as [`Chunks`] to be written one by one and
//! freed once sent. `/metrics` takes it in batches of families ([`Scrape`]): a batch is rendered
//! when the one before has been written, so a scrape holds one batch (about
//! [`SCRAPE_BATCH_BYTES`]), not the whole exposition.
//!
//! The daemon's own few series (`mcp_exporter_*`, `process_*`) keep `metrics-exporter-prometheus`
//! and `metrics-process`, where a registry fits: they are few, fixed, and the process collector
//! speaks the `metrics` facade.

pub mod families;
pub mod otlp;
mod scrape;

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock, RwLock};

use metrics::{Gauge, Key, Label, Metadata, Recorder};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusRecorder};

pub use exposition::{Chunks, DURATION_BUCKETS, Exclusions, Exposition};
pub use scrape::{SCRAPE_BATCH_BYTES, Scrape};

/// `--metrics.exclude`: probe families left out of the exposition (a histogram by its family
/// name, without `_bucket`). Only `mcp_probe_*` families can be left out; the daemon's own few
/// series always stay. Errors name the first unknown or daemon family.
pub fn parse_exclusions(names: &[String]) -> Result<Exclusions, String> {
    let names: Vec<&str> = names
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    let unknown = |name: &str| {
        format!(
            "--metrics.exclude: {name:?} is not a metric family of this exporter (docs/metrics.md lists them)"
        )
    };
    // In the order given: the first unknown or daemon name is the error.
    for name in &names {
        match families::find(name) {
            None => return Err(unknown(name)),
            Some(_) if !name.starts_with("mcp_probe_") => {
                return Err(format!(
                    "--metrics.exclude: {name} is a series of the exporter itself; only mcp_probe_* families can be left out"
                ));
            }
            Some(_) => {}
        }
    }
    Exclusions::of(&families::CATALOG, names).map_err(unknown)
}

/// What writes series into a scrape: one target's (`probe::metrics`), one proxy's
/// (`proxy::metrics`). The registry holds these and nothing of their insides, so each capability
/// owns its metrics beside it.
pub trait Series: Send + Sync {
    fn render(&self, out: &mut Exposition<'_>);
}

/// The kinds of registered [`Series`], rendered in this order; each keyed by name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Targets,
    Proxies,
}

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
    /// The targets' series (`mcp_probe_*`), by target name.
    targets: RwLock<BTreeMap<String, Arc<dyn Series>>>,
    /// The reverse proxies' series (`mcp_proxy_*`), by proxy name.
    proxies: RwLock<BTreeMap<String, Arc<dyn Series>>>,
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

    fn group(&self, group: Group) -> &RwLock<BTreeMap<String, Arc<dyn Series>>> {
        match group {
            Group::Targets => &self.targets,
            Group::Proxies => &self.proxies,
        }
    }

    /// Render `series` under `name` from the next scrape on; replaces any earlier series of the
    /// same name.
    pub fn insert(&self, group: Group, name: &str, series: Arc<dyn Series>) {
        self.group(group)
            .write()
            .expect("metrics lock poisoned")
            .insert(name.to_string(), series);
    }

    /// Stop rendering `name`'s series, when `only` is `None` or still the registered ones (a
    /// restarted proxy's new series are not removed by its old instance).
    pub fn remove(&self, group: Group, name: &str, only: Option<&Arc<dyn Series>>) {
        let mut map = self.group(group).write().expect("metrics lock poisoned");
        if only.is_none_or(|o| map.get(name).is_some_and(|s| Arc::ptr_eq(s, o))) {
            map.remove(name);
        }
    }

    /// The OTel instruments histograms are mirrored into, when OTLP push runs.
    pub(crate) fn otel_histograms(&self) -> Option<otlp::OtelHistograms> {
        self.otel.get().cloned()
    }

    /// Mirror the histograms of targets added from now on into OTel instruments.
    fn mirror_histograms(&self, h: otlp::OtelHistograms) {
        let _ = self.otel.set(h);
    }

    /// A group's series, so that rendering never holds the lock.
    fn snapshot(&self, group: Group) -> Vec<Arc<dyn Series>> {
        self.group(group)
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

    /// One scrape, as the chunks to write in order: each probe and proxy family under its HELP
    /// and TYPE (its buffer moved out of the scrape, not copied), then the daemon's own families
    /// merged into one. Every family is filled before the first chunk can be taken; `/metrics`
    /// takes a large scrape in batches instead ([`Scrape`]).
    pub fn scrape(&self) -> Chunks {
        let mut out = self.exposition(&self.last_sizes(), 0..families::CATALOG.defs().len());
        for series in self.series() {
            series.render(&mut out);
        }
        *self.sizes.lock().expect("metrics lock poisoned") = out.sizes();
        let mut chunks = out.into_chunks();
        chunks.push(self.daemon_families());
        chunks
    }

    /// Every target's and proxy's series, so that rendering never holds the registry's lock.
    fn series(&self) -> Vec<Arc<dyn Series>> {
        let mut out = self.snapshot(Group::Targets);
        out.extend(self.snapshot(Group::Proxies));
        out
    }

    /// The size of each family in the last scrape (empty before the first).
    fn last_sizes(&self) -> Vec<usize> {
        self.sizes.lock().expect("metrics lock poisoned").clone()
    }

    /// An exposition of the families in `window`, its buffers reserved at the `last` sizes.
    fn exposition(&self, last: &[usize], window: std::ops::Range<usize>) -> Exposition<'_> {
        Exposition::window(&families::CATALOG, last, &self.exclusions, window)
    }

    /// The daemon's own families (`mcp_exporter_*`, `process_*`), merged into one text.
    fn daemon_families(&self) -> String {
        metrics::with_local_recorder(&self.daemon, || self.process.collect());
        exposition::merge::merge(&families::CATALOG, &[self.daemon.handle().render()])
    }

    /// The text exposition of everything in one string: [`Telemetry::scrape`] concatenated, for
    /// tests and readers that parse it whole.
    pub fn render(&self) -> String {
        self.scrape().concat()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_probe_families_can_be_excluded_and_unknown_names_are_named() {
        let x = parse_exclusions(&["mcp_probe_request_duration_seconds".into(), " ".into()])
            .expect("a probe family");
        assert_eq!(
            x.names(&families::CATALOG),
            vec!["mcp_probe_request_duration_seconds"]
        );
        let unknown = parse_exclusions(&["mcp_probe_nope".into()]).unwrap_err();
        assert!(
            unknown.contains("\"mcp_probe_nope\" is not a metric family"),
            "{unknown}"
        );
        let daemon = parse_exclusions(&["mcp_exporter_targets".into()]).unwrap_err();
        assert!(daemon.contains("only mcp_probe_* families"), "{daemon}");
        let first = parse_exclusions(&["mcp_probe_nope".into(), "mcp_exporter_targets".into()])
            .unwrap_err();
        assert!(
            first.contains("\"mcp_probe_nope\""),
            "the first bad name: {first}"
        );
    }

    #[test]
    fn a_scrape_is_each_family_in_chunks_then_the_daemons_and_sizes_the_next() {
        let t = Telemetry::new();
        let _a = t.add_target("a", 1, &[]);
        let _b = t.add_target("b", 2, &[]);
        let scrape = t.scrape();
        let bytes = scrape.bytes();
        let chunks: Vec<String> = scrape.collect();
        let text = chunks.concat();
        assert_eq!(text.len(), bytes);
        let helps: Vec<&str> = text
            .lines()
            .filter_map(|l| l.strip_prefix("# HELP ")?.split(' ').next())
            .collect();
        let unique: std::collections::BTreeSet<&str> = helps.iter().copied().collect();
        assert_eq!(helps.len(), unique.len(), "one HELP per family: {helps:?}");

        // The probe's families as header and samples, the daemon's merged into the last chunk.
        let (daemon, probe) = chunks.split_last().expect("chunks");
        assert!(
            daemon.contains("# TYPE mcp_exporter_build_info gauge\n"),
            "{daemon}"
        );
        for pair in probe.chunks(2) {
            let [head, samples] = pair else {
                panic!("{pair:?}")
            };
            assert!(head.starts_with("# HELP mcp_probe_"), "{head}");
            assert!(!samples.is_empty() && !samples.contains('#'), "{samples}");
        }
        let samples: usize = probe.iter().skip(1).step_by(2).map(String::len).sum();
        let sizes = t.sizes.lock().expect("sizes").clone();
        assert_eq!(
            sizes.iter().sum::<usize>(),
            samples,
            "sizes for the next scrape"
        );
        assert!(
            t.render().starts_with(&probe.concat()),
            "render is the same scrape in one string"
        );
    }

    #[test]
    fn an_excluded_family_is_left_out_of_the_scrape() {
        let t = Telemetry::excluding(
            parse_exclusions(&["mcp_probe_ready".into()]).expect("a probe family"),
        );
        let _target = t.add_target("a", 1, &[]);
        let text = t.render();
        assert!(text.contains("mcp_probe_up{target=\"a\"}"), "{text}");
        assert!(!text.contains("mcp_probe_ready"), "{text}");
    }
}
