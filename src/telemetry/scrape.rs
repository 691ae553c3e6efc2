//! One `/metrics` scrape taken batch by batch, so its memory does not grow with the fleet.
//!
//! The text format wants each family's samples together, and every target writes into many
//! families, so one pass over the targets fills every family before the first can be sent: a
//! transient copy of the whole exposition (about 100 MB at 10,000 connections). A [`Scrape`]
//! splits the catalog into contiguous batches of about [`SCRAPE_BATCH_BYTES`] by the last
//! scrape's sizes, and renders the next batch only when the one before has been taken. It trades
//! one pass over the targets' series per batch, which costs little because a pass skips the
//! samples of other families before formatting them. The series are snapshotted once, at the
//! start, so a target removed during a scrape is still rendered whole, and one added is not
//! half-rendered. The daemon's own families come last, with the last batch.

use std::collections::VecDeque;
use std::sync::Arc;

use exposition::Batch;

use super::{Chunks, Series, Telemetry, families};

/// About the most bytes of samples one batch of a scrape holds, by the last scrape's sizes (a
/// family larger than this is sliced by targets). 8 MiB, measured with `benches/render`: at
/// 10,000 × 1 a scrape holds 9.4 MB instead of 141 MB and takes 20 batches, 176 ms instead of
/// 109 ms of CPU; 4 MiB held 4.8 MB but took 38 batches and 255 ms.
pub const SCRAPE_BATCH_BYTES: usize = 8 << 20;

/// A scrape in progress: what is left to render.
pub struct Scrape {
    telemetry: Arc<Telemetry>,
    series: Vec<Arc<dyn Series>>,
    /// The last scrape's size of each family, to reserve buffers at.
    last: Vec<usize>,
    /// This scrape's, filled in as batches are rendered.
    sizes: Vec<usize>,
    /// The families whose HELP and TYPE are written (a sliced family's first slice with samples).
    headed: Vec<bool>,
    batches: VecDeque<Batch>,
}

impl Scrape {
    /// Start a scrape of `telemetry` in batches of about `budget` bytes each.
    pub fn new(telemetry: Arc<Telemetry>, budget: usize) -> Box<Scrape> {
        let n = families::CATALOG.defs().len();
        let last = telemetry.last_sizes();
        let batches = exposition::batches(n, &last, budget).into();
        Box::new(Scrape {
            series: telemetry.series(),
            telemetry,
            last,
            sizes: vec![0; n],
            headed: vec![false; n],
            batches,
        })
    }

    /// Batches not yet rendered.
    pub fn batches_left(&self) -> usize {
        self.batches.len()
    }

    /// Render the next batch: its families' chunks, and after the last one the daemon's own
    /// families. `None` once everything has been rendered. Takes a while of CPU on a large
    /// fleet: call it off the async workers.
    pub fn next_batch(&mut self) -> Option<Chunks> {
        let Batch { families, slice } = self.batches.pop_front()?;
        let t = &self.telemetry;
        let (i, k) = slice;
        let n = self.series.len();
        let series = &self.series[i * n / k..(i + 1) * n / k];
        // A slice of a family holds about its share of the family's last size.
        let last: Vec<usize> = self.last.iter().map(|n| n / k).collect();
        let mut out = t.exposition(&last, families.clone());
        for s in series {
            s.render(&mut out);
        }
        let sizes = out.sizes();
        for f in families {
            self.sizes[f] += sizes[f];
        }
        let mut chunks = out.into_chunks_after(&mut self.headed);
        if self.batches.is_empty() {
            *t.sizes.lock().expect("metrics lock poisoned") = std::mem::take(&mut self.sizes);
            self.series = Vec::new();
            chunks.push(t.daemon_families());
        }
        Some(chunks)
    }
}
