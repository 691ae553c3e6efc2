//! The probe's series (every `mcp_probe_*` family): atomics owned by a target's
//! [`TargetMetrics`] and its connections, written into the text format when scraped.
//!
//! Prometheus' advice for exporters is a collector that reads current state when scraped, and this
//! is what keeps a scrape of 10,000 connections in the hundreds of milliseconds: no per-target
//! registry to render and re-parse, no keys built on the hot path. They live beside the probe
//! that records them; the registry (`crate::telemetry`) only holds them as [`Series`], and dropping
//! a removed target's `TargetMetrics` is what makes its series disappear.

mod conn;
mod lists;
mod target;

use std::sync::Arc;

pub use conn::ConnMetrics;
pub use target::{ListPins, TargetMetrics};

use crate::telemetry::{Group, Series, Telemetry};

impl Telemetry {
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
            self.otel_histograms(),
        ));
        self.insert(Group::Targets, name, t.clone() as Arc<dyn Series>);
        t
    }

    /// Drop a target's series.
    pub fn remove_target(&self, name: &str) {
        self.remove(Group::Targets, name, None);
    }
}
