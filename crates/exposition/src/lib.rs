//! Prometheus text exposition written straight from atomic cells: the metrics floor.
//!
//! It knows no MCP type and nothing of the exporter: a program declares its families once
//! ([`metric_families!`], [`Catalog`]), keeps its values in [`cells`], and writes them into an
//! [`Exposition`] when scraped — Prometheus' advice for exporters, a collector that reads current
//! state, not a registry kept in step — and takes it out as [`Chunks`], one family at a time, to
//! write without a second copy of the whole text; a large scrape is taken in [`batches`], each a
//! window of the families (or a slice of a large one's writers), so it never holds the whole
//! text at all. [`merge`] regroups another exposition (a `metrics`
//! recorder's) under the catalog's HELP and TYPE; [`samples`] reads an exposition back.

pub mod catalog;
pub mod cells;
pub mod merge;
pub mod samples;
pub mod writer;

pub use catalog::{Catalog, Kind, MetricDef, Slot};
pub use cells::{ABSENT, Cell, DURATION_BUCKETS, Histogram, HistogramSnapshot, Lazy};
pub use writer::{Batch, Chunks, Exclusions, Exposition, Value, batches, label, labels};
