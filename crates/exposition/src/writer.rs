//! The text exposition, written straight from a program's cells at scrape time.
//!
//! Prometheus' advice for exporters is a collector that reads current state when scraped, not a
//! registry of its own kept in step. Every sample goes into its family's buffer (the format
//! wants a family's samples together, and one target writes many families); `into_chunks` puts
//! each non-empty family under its HELP and TYPE from the catalog, in catalog order, as a
//! sequence of chunks whose samples are those buffers, moved: a server writes them out one by one
//! and frees each once written, so a scrape never holds a second copy of the text (`finish`
//! concatenates them, for those who want one string). Label values are escaped here, once, as
//! the format requires.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::OnceLock;

use crate::catalog::{Catalog, Kind, Slot};
use crate::cells::{ABSENT, Cell, DURATION_BUCKETS, HistogramSnapshot};

/// Write `k="v"` with `v` escaped as the text format requires.
pub fn label(out: &mut String, k: &str, v: &str) {
    out.push_str(k);
    out.push_str("=\"");
    if v.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        for c in v.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
    } else {
        out.push_str(v);
    }
    out.push('"');
}

/// Labels written once and reused for every sample: `k="v",k2="v2"`.
pub fn labels<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut out = String::new();
    for (k, v) in pairs {
        if !out.is_empty() {
            out.push(',');
        }
        label(&mut out, k, v);
    }
    out
}

/// A sample's value.
#[derive(Debug, Clone, Copy)]
pub enum Value {
    Count(u64),
    Float(f64),
}

impl Value {
    /// A cell of a family of `kind`: counters hold counts, gauges `f64` bits. `None` for a
    /// gauge that was never set ([`ABSENT`]).
    pub fn of(kind: Kind, raw: u64) -> Option<Value> {
        match kind {
            Kind::Counter => Some(Value::Count(raw)),
            _ if raw == ABSENT => None,
            _ => Some(Value::Float(f64::from_bits(raw))),
        }
    }
}

impl Value {
    /// A gauge that always has a value.
    pub fn of_gauge(c: &Cell) -> Value {
        Value::Float(f64::from_bits(c.raw()))
    }

    /// A counter of events that most series never see (an anomaly, a failure reason): written
    /// from its first event, `None` while it is 0. It costs no bytes until it happens; the price
    /// is that Prometheus' `increase()` and `rate()` see its first event only from the second
    /// (the series is born at 1), so an alert that must fire on a single event reads a counter
    /// written from the start instead.
    pub fn from_first_event(c: &Cell) -> Option<Value> {
        match c.raw() {
            0 => None,
            n => Some(Value::Count(n)),
        }
    }
}

fn write_value(out: &mut String, v: Value) {
    match v {
        Value::Count(n) => write_count(out, n),
        Value::Float(f) if f.is_nan() => out.push_str("NaN"),
        Value::Float(f) if f == f64::INFINITY => out.push_str("+Inf"),
        Value::Float(f) if f == f64::NEG_INFINITY => out.push_str("-Inf"),
        // Flags, counts and fingerprints are whole numbers below 2^53: written as integers.
        Value::Float(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
            if f < 0.0 {
                out.push('-');
            }
            write_count(out, f.abs() as u64);
        }
        Value::Float(f) => {
            let _ = write!(out, "{f}");
        }
    }
}

/// A whole number without going through `fmt` (most samples are 0 or 1).
fn write_count(out: &mut String, n: u64) {
    if n == 0 {
        out.push('0');
        return;
    }
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    let mut v = n;
    while v > 0 {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
    out.push_str(std::str::from_utf8(&buf[i..]).expect("ASCII digits"));
}

/// The `le` label values of the histogram buckets, formatted once.
fn bucket_bounds() -> &'static [String] {
    static BOUNDS: OnceLock<Vec<String>> = OnceLock::new();
    BOUNDS.get_or_init(|| {
        DURATION_BUCKETS
            .iter()
            .map(|b| b.to_string())
            .chain(std::iter::once("+Inf".to_string()))
            .collect()
    })
}

/// Families left out of the exposition (an exporter's `--metrics.exclude`): an operator's trade
/// of detail for bytes on a large fleet. Which families may be left out is the program's rule.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exclusions(Vec<bool>);

impl Exclusions {
    /// The families of `catalog` named in `names` (a histogram by its family name); the first
    /// name that is not a family of the catalog is the error.
    pub fn of<'n>(
        catalog: &Catalog,
        names: impl IntoIterator<Item = &'n str>,
    ) -> Result<Exclusions, &'n str> {
        let mut out = vec![false; catalog.defs().len()];
        for name in names {
            let Some(i) = catalog.position(name) else {
                return Err(name);
            };
            out[i] = true;
        }
        Ok(Exclusions(out))
    }

    fn excludes(&self, slot: Slot) -> bool {
        self.0.get(slot.0).copied().unwrap_or(false)
    }

    /// The names left out, in catalog order.
    pub fn names(&self, catalog: &Catalog) -> Vec<&'static str> {
        catalog
            .defs()
            .iter()
            .zip(&self.0)
            .filter(|(_, x)| **x)
            .map(|(d, _)| d.name)
            .collect()
    }
}

/// One scrape being written: every family of the catalog, or a window of them (one batch of a
/// scrape sent batch by batch, see [`batches`]).
pub struct Exposition<'a> {
    catalog: &'static Catalog,
    families: Vec<String>,
    exclusions: &'a Exclusions,
    /// The families written; samples of the others are dropped, as excluded ones are.
    window: Range<usize>,
}

/// One batch of a scrape taken batch by batch: a contiguous run of families, or one slice of a
/// single family too large for the budget on its own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// The families written.
    pub families: Range<usize>,
    /// `(i, k)`: only the `i`-th of `k` equal slices of the writers (the targets), for a
    /// family whose samples alone exceed the budget; `(0, 1)`: all of them.
    pub slice: (usize, usize),
}

/// The families of a catalog in batches of about `budget` bytes each by the last scrape's
/// `sizes`, in catalog order: contiguous runs of families, and a family larger than the budget
/// split into slices of the writers (its samples stay together in the text, as slices are taken
/// in order under one header). A scrape written batch by batch holds one batch at a time instead
/// of the whole text, at the cost of one pass over the writers per run of families. No sizes
/// yet (the first scrape): one batch.
pub fn batches(families: usize, sizes: &[usize], budget: usize) -> Vec<Batch> {
    let budget = budget.max(1);
    let mut out = Vec::new();
    let (mut start, mut bytes) = (0, 0usize);
    let whole = |families| Batch {
        families,
        slice: (0, 1),
    };
    for i in 0..families {
        let size = sizes.get(i).copied().unwrap_or(0);
        if size > budget {
            if i > start {
                out.push(whole(start..i));
            }
            let k = size.div_ceil(budget);
            out.extend((0..k).map(|part| Batch {
                families: i..i + 1,
                slice: (part, k),
            }));
            (start, bytes) = (i + 1, 0);
            continue;
        }
        if i > start && bytes.saturating_add(size) > budget {
            out.push(whole(start..i));
            (start, bytes) = (i, 0);
        }
        bytes = bytes.saturating_add(size);
    }
    if start < families {
        out.push(whole(start..families));
    }
    out
}

impl<'a> Exposition<'a> {
    /// An exposition whose family buffers start at `sizes` (the last scrape's), so a large
    /// one is not built by repeated doubling and copying.
    pub fn with_sizes(
        catalog: &'static Catalog,
        sizes: &[usize],
        exclusions: &'a Exclusions,
    ) -> Self {
        Exposition::window(catalog, sizes, exclusions, 0..catalog.defs().len())
    }

    /// An exposition of the families in `window` only (one of [`batches`]); samples of the
    /// others are dropped.
    pub fn window(
        catalog: &'static Catalog,
        sizes: &[usize],
        exclusions: &'a Exclusions,
        window: Range<usize>,
    ) -> Self {
        Exposition {
            catalog,
            families: (0..catalog.defs().len())
                .map(|i| match window.contains(&i) {
                    true => String::with_capacity(sizes.get(i).map_or(0, |n| n + n / 8)),
                    false => String::new(),
                })
                .collect(),
            exclusions,
            window,
        }
    }

    /// Whether samples of `family` are written (in the window, not excluded).
    fn writes(&self, family: Slot) -> bool {
        self.window.contains(&family.0) && !self.exclusions.excludes(family)
    }

    /// An exposition of every family of `catalog`, sized as it grows.
    pub fn new(catalog: &'static Catalog) -> Exposition<'static> {
        static NONE: Exclusions = Exclusions(Vec::new());
        Exposition::with_sizes(catalog, &[], &NONE)
    }

    /// The size of each family's samples, for the next scrape's [`Exposition::with_sizes`]
    /// (0 outside the window).
    pub fn sizes(&self) -> Vec<usize> {
        self.families.iter().map(String::len).collect()
    }

    /// One sample: `family{labels,extra...} value`.
    pub fn sample(&mut self, family: Slot, labels: &str, extra: &[(&str, &str)], value: Value) {
        self.sample_of(family, "", labels, extra, value);
    }

    fn sample_of(
        &mut self,
        family: Slot,
        suffix: &str,
        labels: &str,
        extra: &[(&str, &str)],
        value: Value,
    ) {
        if !self.writes(family) {
            return;
        }
        let out = &mut self.families[family.0];
        out.push_str(self.catalog.defs()[family.0].name);
        out.push_str(suffix);
        out.push('{');
        out.push_str(labels);
        for (i, (k, v)) in extra.iter().enumerate() {
            if i > 0 || !labels.is_empty() {
                out.push(',');
            }
            label(out, k, v);
        }
        out.push_str("} ");
        write_value(out, value);
        out.push('\n');
    }

    /// A histogram's `_bucket`, `_sum` and `_count` series.
    pub fn histogram(
        &mut self,
        family: Slot,
        labels: &str,
        extra: &[(&str, &str)],
        h: &HistogramSnapshot,
    ) {
        if !self.writes(family) {
            return;
        }
        let mut with_le: Vec<(&str, &str)> = extra.to_vec();
        with_le.push(("le", ""));
        for (bound, n) in bucket_bounds().iter().zip(h.cumulative) {
            *with_le.last_mut().expect("le was pushed") = ("le", bound);
            self.sample_of(family, "_bucket", labels, &with_le, Value::Count(n));
        }
        self.sample_of(family, "_sum", labels, extra, Value::Float(h.sum));
        let count = h.cumulative[DURATION_BUCKETS.len()];
        self.sample_of(family, "_count", labels, extra, Value::Count(count));
    }

    /// The exposition as it is written out: each family with samples under its HELP and TYPE,
    /// in catalog order, as [`Chunks`] — the samples buffers moved, not copied.
    pub fn into_chunks(self) -> Chunks {
        self.into_chunks_after(&mut Vec::new())
    }

    /// [`Exposition::into_chunks`] for one batch of a scrape: a family already `headed` (by an
    /// earlier slice of it) gets no second HELP and TYPE; those given one here are marked.
    pub fn into_chunks_after(self, headed: &mut Vec<bool>) -> Chunks {
        let defs = self.catalog.defs();
        headed.resize(defs.len(), false);
        let mut chunks = Chunks::default();
        for ((def, samples), headed) in defs.iter().zip(self.families).zip(headed.iter_mut()) {
            if samples.is_empty() {
                continue;
            }
            if !*headed {
                let (name, help, kind) = (def.name, def.help, def.kind.as_str());
                chunks.push(format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
                *headed = true;
            }
            chunks.push(samples);
        }
        chunks
    }

    /// The exposition in one string: [`Exposition::into_chunks`] concatenated.
    pub fn finish(self) -> String {
        self.into_chunks().concat()
    }
}

/// An exposition taken apart for writing, in order: for each family with samples its HELP and
/// TYPE lines, then its samples buffer as it was written. A scrape sent chunk by chunk holds
/// the families not yet written and nothing more — no second copy of the whole text, which
/// [`Chunks::concat`] makes for those who want one string.
#[derive(Debug, Default)]
pub struct Chunks {
    parts: VecDeque<String>,
    bytes: usize,
}

impl Chunks {
    /// Add `text` (whole lines: another writer's families) after the chunks so far.
    pub fn push(&mut self, text: String) {
        if !text.is_empty() {
            self.bytes += text.len();
            self.parts.push_back(text);
        }
    }

    /// Add `other`'s chunks after these (the next batch of a scrape).
    pub fn append(&mut self, other: Chunks) {
        self.bytes += other.bytes;
        self.parts.extend(other.parts);
    }

    /// Bytes in the chunks not yet taken: a response's `Content-Length`.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Every chunk in one string.
    pub fn concat(self) -> String {
        let mut out = String::with_capacity(self.bytes);
        for part in self {
            out.push_str(&part);
        }
        out
    }
}

impl Iterator for Chunks {
    type Item = String;

    fn next(&mut self) -> Option<String> {
        let part = self.parts.pop_front()?;
        self.bytes -= part.len();
        Some(part)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.parts.len(), Some(self.parts.len()))
    }
}

impl ExactSizeIterator for Chunks {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::test_catalog::{self as families, CATALOG};
    use crate::cells::Histogram;

    fn slot(name: &str) -> Slot {
        CATALOG.slot(name)
    }

    #[test]
    fn samples_are_grouped_under_one_header_per_family() {
        let mut e = Exposition::new(&CATALOG);
        let up = slot(families::UP);
        e.sample(up, r#"target="a""#, &[], Value::Float(1.0));
        e.sample(
            slot(families::REQUESTS),
            r#"target="a",connection="0""#,
            &[("method", "ping")],
            Value::Count(3),
        );
        e.sample(up, r#"target="b""#, &[], Value::Float(0.0));
        let text = e.finish();
        assert_eq!(text.matches("# TYPE demo_up gauge").count(), 1);
        assert!(text.contains("demo_up{target=\"a\"} 1\ndemo_up{target=\"b\"} 0\n"));
        assert!(
            text.contains("demo_requests_total{target=\"a\",connection=\"0\",method=\"ping\"} 3\n")
        );
        assert!(
            !text.contains("demo_ttl_seconds"),
            "empty families are left out"
        );
    }

    /// One target's samples, written out of catalog order and interleaved with other targets':
    /// a latency histogram, a request counter, `up`, and with `ttl` a TTL gauge.
    fn write_target(e: &mut Exposition<'_>, target: &str, h: &Histogram, ttl: bool) {
        let l = labels([("target", target)]);
        e.histogram(slot(families::LATENCY), &l, &[], &h.snapshot());
        e.sample(
            slot(families::REQUESTS),
            &l,
            &[("method", "ping")],
            Value::Count(2),
        );
        e.sample(slot(families::UP), &l, &[], Value::Float(1.0));
        if ttl {
            e.sample(slot(families::TTL), &l, &[], Value::Float(2.0));
        }
    }

    /// The rule `finish` followed before chunks (one string, built in one pass): the reference
    /// the chunks must match byte for byte.
    fn one_string(e: &Exposition<'_>) -> String {
        let mut out = String::new();
        for (def, samples) in e.catalog.defs().iter().zip(&e.families) {
            if samples.is_empty() {
                continue;
            }
            let _ = writeln!(out, "# HELP {} {}", def.name, def.help);
            let _ = writeln!(out, "# TYPE {} {}", def.name, def.kind.as_str());
            out.push_str(samples);
        }
        out
    }

    #[test]
    fn chunks_are_the_exposition_with_one_header_per_family_and_the_buffers_moved() {
        let reserved = 1000;
        let x = Exclusions::default();
        let mut e = Exposition::with_sizes(&CATALOG, &[reserved; 4], &x);
        // Families written out of catalog order, interleaved, one (TTL) left empty.
        let h = Histogram::default();
        h.record(0.3);
        for target in ["a", "b \"quoted\""] {
            write_target(&mut e, target, &h, false);
        }
        let want = one_string(&e);
        let chunks = e.into_chunks();
        assert_eq!(chunks.bytes(), want.len(), "the Content-Length up front");
        let chunks: Vec<String> = chunks.collect();
        assert_eq!(chunks.concat(), want, "byte for byte");

        // A header, then that family's samples; each non-empty family once, in catalog order.
        let names: Vec<&str> = chunks
            .chunks(2)
            .map(|pair| {
                let [head, samples] = pair else {
                    panic!("a header without samples: {pair:?}")
                };
                let name = head
                    .strip_prefix("# HELP ")
                    .and_then(|h| h.split(' ').next())
                    .expect("a HELP line first");
                let def = CATALOG.find(name).expect("a family of the catalog");
                assert_eq!(
                    *head,
                    format!(
                        "# HELP {name} {}\n# TYPE {name} {}\n",
                        def.help,
                        def.kind.as_str()
                    )
                );
                assert!(samples.lines().all(|l| l.starts_with(name)), "{samples}");
                // The buffer reserved for the family, not a copy sized to its text.
                assert!(samples.capacity() >= reserved, "{}", samples.capacity());
                name
            })
            .collect();
        assert_eq!(names, [families::UP, families::REQUESTS, families::LATENCY]);
    }

    #[test]
    fn chunks_count_the_bytes_left_and_take_more_text_after() {
        let mut e = Exposition::new(&CATALOG);
        e.sample(slot(families::TTL), "", &[], Value::Float(2.0));
        let mut chunks = e.into_chunks();
        chunks.push(String::new());
        chunks.push("other_total 1\n".to_string());
        assert_eq!(chunks.len(), 3, "an empty text is no chunk");
        let total = chunks.bytes();
        let head = chunks.next().expect("the header");
        assert_eq!(chunks.bytes(), total - head.len());
        let text = head + &chunks.concat();
        assert!(
            text.ends_with("demo_ttl_seconds{} 2\nother_total 1\n"),
            "{text}"
        );
        assert_eq!(text.len(), total);
    }

    #[test]
    fn batches_are_contiguous_within_the_budget_and_cover_every_family() {
        let runs = |b: Vec<Batch>| -> Vec<(Range<usize>, (usize, usize))> {
            b.into_iter().map(|b| (b.families, b.slice)).collect()
        };
        let whole = (0, 1);
        assert_eq!(
            runs(batches(5, &[], 10)),
            [(0..5, whole)],
            "no sizes yet: one batch"
        );
        assert_eq!(
            runs(batches(4, &[3, 3, 3, 3], 6)),
            [(0..2, whole), (2..4, whole)]
        );
        assert_eq!(
            runs(batches(4, &[1, 25, 1, 1], 10)),
            [
                (0..1, whole),
                (1..2, (0, 3)),
                (1..2, (1, 3)),
                (1..2, (2, 3)),
                (2..4, whole)
            ],
            "a family above the budget is sliced"
        );
        assert_eq!(runs(batches(3, &[5, 5, 5], usize::MAX)), [(0..3, whole)]);
        assert!(batches(0, &[], 10).is_empty());
    }

    /// Written batch by batch, each window over the same writers (or its slice of them), the
    /// scrape is the same text as in one exposition, and each batch holds only its own families.
    #[test]
    fn a_scrape_in_batches_is_the_same_text() {
        let x = Exclusions::default();
        let h = Histogram::default();
        h.record(0.3);
        // Each target a writer, as a target's series are.
        let write = |e: &mut Exposition<'_>, target: &str| write_target(e, target, &h, true);
        let mut whole = Exposition::new(&CATALOG);
        write(&mut whole, "a");
        write(&mut whole, "b");
        let sizes = whole.sizes();
        let want = whole.finish();

        // A budget that slices the large families (the histogram) between the two writers.
        let n = CATALOG.defs().len();
        let plan = batches(n, &sizes, 100);
        assert!(plan.iter().any(|b| b.slice.1 > 1), "{plan:?}");
        let mut all = Chunks::default();
        let mut headed = Vec::new();
        for batch in plan {
            let range = batch.families.clone();
            let mut e = Exposition::window(&CATALOG, &sizes, &x, range.clone());
            let (i, k) = batch.slice;
            for target in &["a", "b"][i * 2 / k..(i + 1) * 2 / k] {
                write(&mut e, target);
            }
            let batch_sizes = e.sizes();
            for (i, size) in batch_sizes.iter().enumerate() {
                if !range.contains(&i) {
                    assert_eq!(*size, 0, "family {i} is outside {range:?}");
                }
            }
            all.append(e.into_chunks_after(&mut headed));
        }
        assert_eq!(all.bytes(), want.len());
        assert_eq!(all.concat(), want);
    }

    #[test]
    fn excluded_families_are_left_out() {
        let x = Exclusions::of(&CATALOG, [families::LATENCY]).expect("a family");
        assert_eq!(x.names(&CATALOG), vec![families::LATENCY]);
        let mut e = Exposition::with_sizes(&CATALOG, &[], &x);
        let h = Histogram::default();
        e.histogram(slot(families::LATENCY), r#"target="a""#, &[], &h.snapshot());
        e.sample(slot(families::UP), r#"target="a""#, &[], Value::Float(1.0));
        let text = e.finish();
        assert!(!text.contains("latency"), "{text}");
        assert!(text.contains("demo_up{target=\"a\"} 1"));
        assert_eq!(Exclusions::of(&CATALOG, ["demo_nope"]), Err("demo_nope"));
    }

    #[test]
    fn label_values_are_escaped() {
        let l = labels([("server_name", "a \"b\" \\ c\nd")]);
        assert_eq!(l, r#"server_name="a \"b\" \\ c\nd""#);
    }

    #[test]
    fn values_use_the_text_format_spelling() {
        let mut e = Exposition::new(&CATALOG);
        let s = slot(families::TTL);
        for v in [f64::INFINITY, f64::NAN, 0.25, 1.7e9, -3.0, 1.5e300] {
            e.sample(s, "", &[], Value::Float(v));
        }
        let text = e.finish();
        for want in [
            "{} +Inf\n",
            "{} NaN\n",
            "{} 0.25\n",
            "{} 1700000000\n",
            "{} -3\n",
        ] {
            assert!(text.contains(want), "{want} in {text}");
        }
        let big = text.lines().last().expect("a sample").split(' ').nth(1);
        assert_eq!(big.and_then(|v| v.parse::<f64>().ok()), Some(1.5e300));
        assert_eq!(Value::of(Kind::Gauge, ABSENT).map(|_| ()), None);
    }

    #[test]
    fn histograms_render_buckets_sum_and_count() {
        let h = Histogram::default();
        h.record(0.02);
        let mut e = Exposition::new(&CATALOG);
        e.histogram(slot(families::LATENCY), r#"target="a""#, &[], &h.snapshot());
        let text = e.finish();
        assert!(text.contains("demo_latency_seconds_bucket{target=\"a\",le=\"0.01\"} 0\n"));
        assert!(text.contains("demo_latency_seconds_bucket{target=\"a\",le=\"0.025\"} 1\n"));
        assert!(text.contains("demo_latency_seconds_bucket{target=\"a\",le=\"+Inf\"} 1\n"));
        assert!(text.contains("demo_latency_seconds_sum{target=\"a\"} 0.02\n"));
        assert!(text.contains("demo_latency_seconds_count{target=\"a\"} 1\n"));
    }
}
