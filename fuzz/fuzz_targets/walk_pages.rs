//! The cursor walker on a page script read from the fuzzer's bytes.
//!
//! Byte 0 is `max_pages` (1..=32). Then each page starts with an op byte:
//! - `op % 8 == 0`: the request fails, with `Reason::ALL[next % 17]`;
//! - `op % 8 == 7`: a malformed `ListToolsResult` (kind from the next byte);
//! - otherwise a page of `(op >> 3) & 7` tools, one name byte each (6-name alphabet, so names
//!   repeat), then a cursor byte: absent, null, `""`, one of 3 fixed strings, a fresh string, or
//!   one over the 4 KiB cap.
//!
//! Once the bytes run out the server answers a last page without `nextCursor`.
#![no_main]

use std::collections::HashSet;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

use libfuzzer_sys::fuzz_target;
use mcp_client::listing::walker::{Pager, WalkError, WalkLimits, walk};
use mcp_client::mcp::{McpError, Reason};
use serde_json::{Value, json};

const NAMES: [&str; 6] = ["a", "b", "c", "d", "e", "f"];
const FIXED: [&str; 3] = ["p", "q", ""];

struct BytePager<'a> {
    data: &'a [u8],
    pos: usize,
    asked: Vec<Option<String>>,
}

impl BytePager<'_> {
    fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    fn next_page(&mut self) -> Result<Value, McpError> {
        if self.pos >= self.data.len() {
            return Ok(json!({"tools": []}));
        }
        let index = self.asked.len();
        let op = self.byte();
        match op % 8 {
            0 => {
                let reason = Reason::ALL[usize::from(self.byte()) % Reason::ALL.len()];
                Err(McpError::new(reason, "scripted"))
            }
            7 => Ok(match self.byte() % 4 {
                0 => json!({}),
                1 => json!({"tools": [{"description": "no name"}]}),
                2 => json!({"tools": [], "nextCursor": 3}),
                _ => json!({"tools": {"name": "x"}}),
            }),
            _ => {
                let count = (op >> 3) & 7;
                let tools: Vec<Value> = (0..count)
                    .map(|k| {
                        let name = NAMES[usize::from(self.byte()) % NAMES.len()];
                        json!({"name": name, "inputSchema": {"type": "object"}, "k": k})
                    })
                    .collect();
                let mut page = json!({ "tools": tools });
                let c = self.byte();
                match c % 6 {
                    0 => {}
                    1 => page["nextCursor"] = Value::Null,
                    2 => page["nextCursor"] = json!(""),
                    3 => page["nextCursor"] = json!(FIXED[usize::from(c >> 3) % FIXED.len()]),
                    4 => page["nextCursor"] = json!(format!("fresh-{index}")),
                    _ => page["nextCursor"] = json!("x".repeat(4097)),
                }
                Ok(page)
            }
        }
    }
}

impl Pager for BytePager<'_> {
    async fn page(
        &mut self,
        cursor: Option<&str>,
        _max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        assert!(self.asked.len() < 1000, "the walk does not stop");
        self.asked.push(cursor.map(str::to_string));
        // The byte budget is not what this target explores: the walk gets all it asks for.
        self.next_page().map(|page| {
            let bytes = page.to_string().len();
            (page, bytes)
        })
    }
}

/// The pager never waits, so the walk completes on the first poll; loop anyway.
fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
            return out;
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let max_pages = 1 + u32::from(first % 32);
    let mut pager = BytePager {
        data: rest,
        pos: 0,
        asked: vec![],
    };
    let limits = WalkLimits {
        max_pages,
        max_bytes: usize::MAX,
    };
    let report = block_on(walk(&mut pager, limits));

    assert!(report.requests >= 1 && report.requests <= max_pages);
    assert_eq!(report.requests as usize, pager.asked.len());
    assert_eq!(pager.asked[0], None, "the first request carries no cursor");
    let sent: Vec<&String> = pager.asked.iter().flatten().collect();
    let distinct: HashSet<&String> = sent.iter().copied().collect();
    assert_eq!(sent.len(), distinct.len(), "a cursor was sent twice");
    assert_eq!(
        sent.len() + 1,
        pager.asked.len(),
        "only the first request lacks a cursor"
    );
    match &report.result {
        Ok(w) => {
            assert_eq!(w.pages, report.requests);
            assert!(w.items.len() <= NAMES.len());
        }
        Err(WalkError::LoopCap) => assert_eq!(report.requests, max_pages),
        Err(e @ WalkError::Request { .. }) => {
            assert_eq!(e.is_cursor_error(), report.requests > 1);
        }
        Err(WalkError::RepeatedCursor) => assert!(report.requests > 1),
        Err(WalkError::TooManyItems { .. }) => panic!("at most {} distinct names", NAMES.len()),
        Err(WalkError::ListingTooLarge { .. }) => panic!("the byte budget is unbounded here"),
    }
});
