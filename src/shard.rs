//! Horizontal sharding: several replicas share one configuration, each probing the targets whose
//! name it owns.
//!
//! Ownership is rendezvous (highest-random-weight) hashing: every replica scores every
//! (target, shard) pair with a stable hash and a target belongs to the shard with the highest
//! score. No replica talks to another, yet they agree, because the hash is a fixed function
//! (SHA-256, not Rust's per-process randomized SipHash). Going from M to M+1 shards moves a
//! target only when the new shard beats all others for it: 1/(M+1) of the targets, all of them to
//! the new shard, which is the least any scheme can move. Keyed by the target *name*, so a URL
//! change does not move a target, and two replicas that disagree on anything but the name still
//! split the same way.
//!
//! The index comes from `--shard.index`, or (`--shard.auto`) from the ordinal a StatefulSet
//! gives its pods: the trailing `-N` of `$POD_NAME`, else of the host name.

use sha2::{Digest, Sha256};
use std::fmt;

/// Most shards one configuration may be split into: far above any sensible deployment, low
/// enough that scoring a target against every shard stays cheap.
pub const MAX_SHARDS: u32 = 1024;

/// This replica's shard.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    index: u32,
    count: u32,
}

impl Default for Shard {
    /// One shard owning everything.
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl fmt::Display for Shard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard {} of {}", self.index, self.count)
    }
}

impl Shard {
    /// Shard `index` (from 0) of `count`.
    pub fn new(index: u32, count: u32) -> Result<Shard, String> {
        if count == 0 || count > MAX_SHARDS {
            return Err(format!(
                "--shard.count: {count} is out of range; must be between 1 and {MAX_SHARDS}"
            ));
        }
        if index >= count {
            return Err(format!(
                "--shard.index: {index} is not below --shard.count {count} (indexes run from 0 to {})",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// The shard of a StatefulSet pod: the ordinal after the last `-` of `pod` (its name, or
    /// its host name, which a StatefulSet sets to the pod name).
    pub fn from_ordinal(pod: &str, count: u32) -> Result<Shard, String> {
        let ordinal = pod
            .rsplit_once('-')
            .map(|(_, n)| n)
            .filter(|n| !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()))
            .and_then(|n| n.parse::<u32>().ok())
            .ok_or_else(|| {
                format!(
                    "--shard.auto: pod name {pod:?} does not end in -N (a StatefulSet pod's \
                     ordinal, as in mcp-exporter-2); set POD_NAME or use --shard.index"
                )
            })?;
        Shard::new(ordinal, count).map_err(|e| {
            format!("--shard.auto: pod {pod:?} has ordinal {ordinal}, but {e} (replicas and --shard.count disagree?)")
        })
    }

    pub fn index(&self) -> u32 {
        self.index
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// Whether this replica probes the target called `name`.
    pub fn owns(&self, name: &str) -> bool {
        self.count == 1 || owner(name, self.count) == self.index
    }
}

/// The shard (of `count`) that owns the target called `name`.
pub fn owner(name: &str, count: u32) -> u32 {
    (0..count.max(1))
        .max_by_key(|&shard| (weight(name, shard), shard))
        .unwrap_or(0)
}

/// The score of `(name, shard)`: the first 8 bytes of SHA-256 over the shard number and the
/// name. Fixed forever: a change would move targets between running replicas.
fn weight(name: &str, shard: u32) -> u64 {
    let mut h = Sha256::new();
    h.update(shard.to_be_bytes());
    h.update(name.as_bytes());
    let d = h.finalize();
    u64::from_be_bytes(d[..8].try_into().expect("8 bytes"))
}

/// The pod name `--shard.auto` reads: `$POD_NAME` (set from the downward API), else the host
/// name (a StatefulSet pod's host name is its name).
pub fn pod_name() -> Result<String, String> {
    if let Ok(name) = std::env::var("POD_NAME")
        && !name.is_empty()
    {
        return Ok(name);
    }
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return Err(format!(
            "--shard.auto: POD_NAME is not set and the host name cannot be read: {}",
            std::io::Error::last_os_error()
        ));
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8(buf[..end].to_vec())
        .map_err(|_| "--shard.auto: the host name is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("target-{i}")).collect()
    }

    #[test]
    fn shards_are_disjoint_and_cover_every_target() {
        let all = names(3000);
        let shards: Vec<Shard> = (0..3).map(|i| Shard::new(i, 3).unwrap()).collect();
        for name in &all {
            let owners = shards.iter().filter(|s| s.owns(name)).count();
            assert_eq!(owners, 1, "{name} is owned by {owners} shards");
        }
        // Each shard gets about a third (binomial, n=3000, p=1/3: sd ≈ 25.8; 6 sd).
        for s in &shards {
            let n = all.iter().filter(|t| s.owns(t)).count() as f64;
            assert!((n - 1000.0).abs() < 6.0 * 25.9, "{s}: {n}");
        }
    }

    #[test]
    fn the_hash_is_stable_across_builds() {
        // Fixed values: a change here would move targets between running replicas.
        let fixed: Vec<u32> = ["kb", "search", "billing", "a", "b"]
            .iter()
            .map(|n| owner(n, 4))
            .collect();
        assert_eq!(fixed, EXPECTED_OWNERS_OF_4);
        assert_eq!(owner("anything", 1), 0);
    }

    /// `owner(name, 4)` of kb, search, billing, a, b as computed by this version.
    const EXPECTED_OWNERS_OF_4: [u32; 5] = [3, 1, 1, 3, 3];

    #[test]
    fn growing_from_3_to_4_moves_a_quarter_all_to_the_new_shard() {
        let n = 10_000usize;
        let all = names(n);
        let mut moved = 0usize;
        for name in &all {
            let (before, after) = (owner(name, 3), owner(name, 4));
            if before != after {
                assert_eq!(
                    after, 3,
                    "{name} moved between old shards {before} → {after}"
                );
                moved += 1;
            }
        }
        // Each target moves with probability exactly 1/4 (the new shard must beat three
        // independent scores): binomial(n, 1/4), sd = sqrt(n·p·(1−p)) ≈ 43.3; allow 6 sd.
        let p = 0.25;
        let mean = n as f64 * p;
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        assert!(
            (moved as f64 - mean).abs() <= 6.0 * sd,
            "moved {moved}, expected {mean} ± {}",
            6.0 * sd
        );
    }

    #[test]
    fn shrinking_moves_only_the_removed_shards_targets() {
        for name in names(2000) {
            let (before, after) = (owner(&name, 5), owner(&name, 4));
            if before != 4 {
                assert_eq!(before, after, "{name}");
            }
        }
    }

    #[test]
    fn bad_indexes_and_pod_names_are_refused_clearly() {
        assert!(Shard::new(0, 0).unwrap_err().contains("between 1 and"));
        assert!(
            Shard::new(3, 3)
                .unwrap_err()
                .contains("not below --shard.count 3")
        );
        assert_eq!(
            Shard::from_ordinal("mcp-exporter-2", 3),
            Ok(Shard { index: 2, count: 3 })
        );
        assert_eq!(
            Shard::from_ordinal("a-b-10", 11),
            Ok(Shard {
                index: 10,
                count: 11
            })
        );
        for bad in ["mcp-exporter", "mcp-exporter-", "exporter-x1", "7", "a--1x"] {
            let e = Shard::from_ordinal(bad, 3).unwrap_err();
            assert!(e.contains("does not end in -N"), "{bad}: {e}");
        }
        let e = Shard::from_ordinal("mcp-exporter-3", 3).unwrap_err();
        assert!(e.contains("ordinal 3") && e.contains("disagree"), "{e}");
    }
}
