//! Render benchmark (not a test): the cost of `/metrics` for a fleet, without any network.
//!
//! Builds the exporter's telemetry for `--targets T --connections C` (per target), records what a
//! healthy connection records over a while (a session, pings, requests by method, walks and
//! refreshes), then renders the exposition repeatedly and prints the median and p90 render time,
//! the size in total and per connection, and the memory the series take.
//!
//! Each scrape is taken three ways: in one string (`render`), chunk by chunk with each chunk
//! dropped once taken (`scrape`), and batch by batch as `/metrics` sends it (`Scrape`, each batch
//! of families rendered once the one before is taken). `scrape peak` is the most heap one scrape held
//! at once beyond what was live before it, counted by this binary's global allocator (below):
//! what a `/metrics` request costs in memory on top of the series, whatever the RSS does
//! afterwards.
//!
//! ```sh
//! cargo bench --bench render                                  # 1,000 targets x 1
//! cargo bench --bench render -- --targets 1000 --connections 10
//! cargo bench --bench render -- --exclude mcp_probe_request_duration_seconds,...
//! cargo bench --bench render -- --lists  # every connection also watches three other lists
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mcp_client::listing::items::ItemSet;
use mcp_client::listing::list::List;
use mcp_client::listing::walker::WalkReport;
use mcp_client::mcp::{Era, Reason, ServerInfo};
use mcp_exporter::probe::Trigger;
use mcp_exporter::telemetry::{SCRAPE_BATCH_BYTES, Scrape, Telemetry, parse_exclusions};

/// The system allocator, counting the bytes live and the most live since [`Counting::reset`].
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

impl Counting {
    fn grew(by: usize) {
        let live = LIVE.fetch_add(by, Ordering::Relaxed) + by;
        PEAK.fetch_max(live, Ordering::Relaxed);
    }

    /// Start a measurement: the bytes live now.
    fn reset() -> usize {
        let live = LIVE.load(Ordering::Relaxed);
        PEAK.store(live, Ordering::Relaxed);
        live
    }

    /// The most bytes live since `reset` returned `base`, beyond `base`.
    fn peak_since(base: usize) -> usize {
        PEAK.load(Ordering::Relaxed).saturating_sub(base)
    }
}

// SAFETY: every call is passed to `System` unchanged; only the counters are added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            Counting::grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            Counting::grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            // Counted as the new block before the old one goes: a moving realloc holds both.
            Counting::grew(new_size);
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn rss() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))?
                .split_whitespace()
                .nth(1)?
                .parse::<u64>()
                .ok()
        })
        .unwrap_or(0)
        * 1024
}

fn main() {
    let targets = arg("--targets", 1000);
    let connections = arg("--connections", 1) as u16;
    let rounds = arg("--rounds", 21);
    let args: Vec<String> = std::env::args().collect();
    let exclude: Vec<String> = args
        .iter()
        .position(|a| a == "--exclude")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.split(',').map(str::to_string).collect())
        .unwrap_or_default();
    let exclusions = parse_exclusions(&exclude).expect("--exclude names probe families");
    // `--lists`: each connection's server also lists prompts, resources and resource templates
    // (the `mcp_probe_list_*` series of a healthy connection that watches them).
    let lists = args.iter().any(|a| a == "--lists");
    let listed = {
        let mut items = ItemSet::new();
        for (i, key) in ["a", "b", "c"].into_iter().enumerate() {
            items.insert(key.into(), i as u64);
        }
        WalkReport::listed(items)
    };
    let before = rss();
    let telemetry = Telemetry::excluding(exclusions);
    let info = ServerInfo {
        protocol_version: "2025-11-25".into(),
        name: "bench-server".into(),
        version: "1.0.0".into(),
        tools: true,
        list_changed: true,
        ..Default::default()
    };
    let mut handles = Vec::new();
    for t in 0..targets {
        let target = telemetry.add_target(&format!("t{t:05}"), connections, &[]);
        for c in 0..connections {
            let conn = target.connection(c);
            conn.session_opened(Era::Legacy, &info);
            conn.set_up(true);
            // What a legacy connection records: the session's handshake timed by method, the
            // walks' pages and the liveness checks counted by method (timed as walks and pings).
            for _ in 0..3 {
                conn.request("initialize", Duration::from_millis(3), Ok(()));
                conn.request_untimed("tools/list", Ok(()));
                conn.request_untimed("ping", Ok(()));
                conn.ping(Ok(Duration::from_millis(2)));
            }
            conn.request_untimed("tools/list", Err(Reason::Timeout));
            conn.walk_started(Trigger::Initial);
            conn.cache_refresh(Trigger::Initial, true);
            if lists {
                for list in [List::Prompts, List::Resources, List::ResourceTemplates] {
                    // Counted, not timed, as a connection records them.
                    conn.request_untimed(list.method(), Ok(()));
                    conn.list_walk_finished(list, &listed);
                    if let Ok(w) = &listed.result {
                        conn.list_cache_view(list, &w.items);
                    }
                    conn.list_stale(list, false);
                }
            }
            handles.push(conn);
        }
    }
    let series_bytes = rss().saturating_sub(before);
    if std::env::var_os("RENDER_DUMP").is_some() {
        print!("{}", telemetry.render());
        return;
    }
    // Both ways a scrape can be taken, round for round in turn so that the box's noise falls
    // on both alike: in one string (`render`, what tests and one-string readers get), and as
    // `/metrics` sends it (`scrape`: chunk by chunk, each made a `Bytes` and dropped once taken,
    // as hyper drops it once written to the socket).
    // The first scrape of a process grows each family's buffer by doubling; every later one
    // reserves it at the last size. Measured: the later ones.
    drop(telemetry.scrape());
    // And batch by batch (`Scrape`, what `/metrics` does: a batch of families rendered once the
    // one before is written), at the exporter's batch size.
    let mut whole = Way::default();
    let mut chunked = Way::default();
    let mut batched = Way::default();
    let mut passes = 0;
    for _ in 0..rounds {
        whole.measure(|| telemetry.render().len());
        chunked.measure(|| {
            telemetry
                .scrape()
                .map(|chunk| bytes::Bytes::from(chunk).len())
                .sum()
        });
        batched.measure(|| {
            let mut scrape = Scrape::new(telemetry.clone(), SCRAPE_BATCH_BYTES);
            passes = scrape.batches_left();
            let mut size = 0;
            while let Some(chunks) = scrape.next_batch() {
                size += chunks.map(|c| bytes::Bytes::from(c).len()).sum::<usize>();
            }
            size
        });
    }
    // The same exposition every way, but for the daemon's own values (its memory, CPU), whose
    // digits may change between two scrapes.
    for (way, size) in [("chunks", chunked.size), ("batches", batched.size)] {
        assert!(
            whole.size.abs_diff(size) < 64,
            "the same exposition as {way}: {} vs {size} bytes",
            whole.size
        );
    }
    let batches_label = format!("{passes} batches");
    let total = targets * usize::from(connections);
    println!(
        "| targets | connections | taken | render median | render p90 | size | scrape peak | per connection | series memory per connection |"
    );
    println!("|---:|---:|---|---:|---:|---:|---:|---:|---:|");
    for (taken, way) in [
        ("one string", &mut whole),
        ("chunks", &mut chunked),
        (batches_label.as_str(), &mut batched),
    ] {
        way.times.sort();
        println!(
            "| {targets} | {total} | {taken} | {:.1} ms | {:.1} ms | {:.1} MB | {:.1} MB ({:.2}x) | {} B | {} B |",
            way.times[rounds / 2].as_secs_f64() * 1e3,
            way.times[rounds * 9 / 10].as_secs_f64() * 1e3,
            way.size as f64 / 1e6,
            way.peak as f64 / 1e6,
            way.peak as f64 / way.size.max(1) as f64,
            way.size / total.max(1),
            series_bytes / total.max(1) as u64,
        );
    }
}

/// One way of taking a scrape, measured over rounds.
#[derive(Default)]
struct Way {
    times: Vec<Duration>,
    size: usize,
    /// The most heap any one round held beyond what was live before it.
    peak: usize,
}

impl Way {
    /// One round: `scrape` takes a scrape and returns its size, having freed all of it.
    fn measure(&mut self, scrape: impl FnOnce() -> usize) {
        let base = Counting::reset();
        let start = Instant::now();
        self.size = scrape();
        self.times.push(start.elapsed());
        self.peak = self.peak.max(Counting::peak_since(base));
    }
}
