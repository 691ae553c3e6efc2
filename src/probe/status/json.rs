//! `/status.json` under a byte cap, and still valid JSON.
//!
//! Every string in the snapshot is already bounded, but a fleet is not: many targets × many
//! connections × 100 events can outgrow any page. When the whole does not fit, every target that
//! fits is sent in a light form (its newest events and a few drift names; counts, causes and the
//! sticky facts stay), the worst targets get their full form back while the budget lasts, and the
//! healthiest targets that still do not fit are left out. The top-level `truncated`,
//! `targets_trimmed` and `targets_omitted` say what happened.

use std::io;

use super::{Snapshot, TargetSnapshot};

/// Events per connection in the light form: the latest few tell what happened last.
const LIGHT_EVENTS: usize = 5;
/// Drift names per kind in the light form; the counts say how many there are.
const LIGHT_NAMES: usize = 5;
/// Bytes kept for the envelope (`version`, `generated_at`, the truncation fields, brackets).
const ENVELOPE: usize = 512;

/// A writer that keeps at most `limit` bytes and fails past it: serializing into it costs at
/// most the limit, however large the value is.
struct Capped {
    buf: Vec<u8>,
    limit: usize,
    /// Only count, do not keep.
    count_only: bool,
    bytes: usize,
}

impl Capped {
    fn new(limit: usize, count_only: bool) -> Self {
        Capped {
            buf: Vec::new(),
            limit,
            count_only,
            bytes: 0,
        }
    }
}

impl io::Write for Capped {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.bytes += buf.len();
        if self.bytes > self.limit {
            return Err(io::Error::other("over the limit"));
        }
        if !self.count_only {
            self.buf.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// The serialized size of `t`, or `None` when it is over `limit`.
fn size(t: &TargetSnapshot, limit: usize) -> Option<usize> {
    let mut m = Capped::new(limit, true);
    serde_json::to_writer(&mut m, t).ok().map(|()| m.bytes)
}

fn light(t: &TargetSnapshot) -> TargetSnapshot {
    let mut l = TargetSnapshot {
        connections: Vec::new(),
        ..t.clone()
    };
    l.connections = t
        .connections
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.trim(LIGHT_EVENTS, LIGHT_NAMES);
            c
        })
        .collect();
    l.trimmed = true;
    l
}

impl Snapshot {
    /// This snapshot as JSON of at most `max_bytes` (see the module docs); `max_bytes` must leave
    /// room for the envelope.
    pub fn to_json(mut self, max_bytes: usize) -> String {
        // Fast path: the whole fits.
        let mut out = Capped::new(max_bytes, false);
        if serde_json::to_writer(&mut out, &self).is_ok() {
            return String::from_utf8(out.buf).expect("serde_json writes UTF-8");
        }
        self.fit(max_bytes.saturating_sub(ENVELOPE));
        serde_json::to_string(&self).expect("status serializes")
    }

    /// Light forms for as many targets as fit (in order), then full forms back for the first
    /// ones while the budget lasts.
    fn fit(&mut self, budget: usize) {
        let full: Vec<Option<usize>> = self.targets.iter().map(|t| size(t, budget)).collect();
        let lights: Vec<TargetSnapshot> = self.targets.iter().map(light).collect();
        let mut used = 0;
        let mut light_sizes = Vec::new();
        for l in &lights {
            match size(l, budget) {
                // `<`: one more byte for the comma between array elements.
                Some(n) if used + n < budget => {
                    used += n + 1;
                    light_sizes.push(n);
                }
                _ => break,
            }
        }
        let kept = light_sizes.len();
        let mut trimmed = 0;
        let targets = std::mem::take(&mut self.targets);
        self.targets = targets
            .into_iter()
            .zip(lights)
            .take(kept)
            .enumerate()
            .map(|(i, (t, l))| match full[i] {
                Some(f) if used + f.saturating_sub(light_sizes[i]) <= budget => {
                    used += f.saturating_sub(light_sizes[i]);
                    t
                }
                _ => {
                    trimmed += 1;
                    l
                }
            })
            .collect();
        self.targets_omitted = full.len() - kept;
        self.targets_trimmed = trimmed;
        self.truncated = trimmed + self.targets_omitted > 0;
    }
}
