//! What one connection keeps, measured: a counting global allocator around the walker fed the
//! worst listings the default `max_listing_bytes` lets through. The numbers printed here are the
//! ones in docs/reliability.md ("hostile server" table); the asserts hold them to the documented
//! bound, so a change that makes a connection keep more fails here.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};

use mcp_client::listing::walker::{self, Pager, WalkLimits};
use mcp_client::mcp::{McpError, Reason};
use mcp_exporter::config::DEFAULT_MAX_LISTING_BYTES;
use serde_json::Value;

/// Live heap bytes and the peak since the last reset.
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now =
                LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed) + layout.size() as isize;
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// What a connection may keep of one complete listing (one `ItemSet`) under the default
/// budget; a connection holds at most two (its cache and the server's last listing).
const KEPT_BOUND: isize = 320 * 1024;
/// What one walk may have allocated at its peak, pages included.
const PEAK_BOUND: isize = 1024 * 1024;

/// Serves pre-built page texts, parsed on demand as the transport would.
struct Pages {
    texts: Vec<String>,
    next: usize,
}

impl Pager for Pages {
    async fn page(
        &mut self,
        _cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let text = &self.texts[self.next];
        self.next += 1;
        if text.len() > max_bytes {
            return Err(McpError::new(Reason::BodyTooLarge, "over the budget"));
        }
        let value = serde_json::from_str(text).expect("valid page");
        Ok((value, text.len()))
    }
}

/// Pages of 100 tools whose names are `name_len` long, as many pages as the budget lets
/// through (charged as the walker charges them: at least 64 bytes a tool), each with its own
/// cursor but the last. When even one page is over the budget, that one page (to be refused).
fn listing(name_len: usize, budget: usize) -> Vec<String> {
    let mut pages: Vec<String> = Vec::new();
    let mut used = 0;
    for page in 0.. {
        let tools: Vec<String> = (0..100)
            .map(|i| {
                let id = format!("{page}_{i}_");
                let pad = "n".repeat(name_len.saturating_sub(id.len()));
                format!(r#"{{"name":"{id}{pad}"}}"#)
            })
            .collect();
        let text = format!(
            r#"{{"tools":[{}],"nextCursor":"c{page}"}}"#,
            tools.join(",")
        );
        let charge = text.len().max(100 * 64);
        if used + charge > budget {
            if pages.is_empty() {
                pages.push(text);
            }
            break;
        }
        used += charge;
        pages.push(text);
    }
    let last = pages.len() - 1;
    let end = pages[last].rfind(r#","nextCursor""#).expect("a cursor");
    pages[last] = format!("{}}}", &pages[last][..end]);
    pages
}

#[test]
fn a_connection_keeps_at_most_the_documented_bytes_of_a_listing() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime");
    let budget = DEFAULT_MAX_LISTING_BYTES;
    let mut worst_kept = 0isize;
    let mut worst_peak = 0isize;
    for name_len in [1, 16, 32, 64, 128, 5_000] {
        let texts = listing(name_len, budget);
        let pages = texts.len();
        let mut pager = Pages { texts, next: 0 };
        let limits = WalkLimits {
            max_pages: 64,
            max_bytes: budget,
        };
        let before = LIVE.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let report = rt.block_on(walker::walk(&mut pager, limits));
        let peak = PEAK.load(Ordering::Relaxed) - before;
        // The page texts (the "server") were there before and still are: what grew is the walk.
        let kept = LIVE.load(Ordering::Relaxed) - before;
        drop(pager);
        let tools = report.result.as_ref().map(|w| w.items.len()).unwrap_or(0);
        let declared = report
            .result
            .as_ref()
            .map(|w| w.items.heap_bytes())
            .unwrap_or(0);
        println!(
            "names of {name_len} bytes: {pages} pages, {tools} tools, kept {kept} B \
             (accounted {declared} B), walk peak {peak} B, {:?}",
            report.result.as_ref().err()
        );
        if name_len <= 128 {
            assert!(report.result.is_ok(), "{:?}", report.result);
        }
        worst_kept = worst_kept.max(kept);
        worst_peak = worst_peak.max(peak);
        drop(report);
    }
    println!("worst: kept {worst_kept} B per listing, walk peak {worst_peak} B");
    assert!(
        worst_kept <= KEPT_BOUND,
        "a listing kept {worst_kept} B, over the documented {KEPT_BOUND} B"
    );
    assert!(
        worst_peak <= PEAK_BOUND,
        "a walk peaked at {worst_peak} B, over the documented {PEAK_BOUND} B"
    );
}
