//! One setting of glibc's allocator, made at start: a fixed mmap threshold.
//!
//! glibc serves blocks of at least its mmap threshold with `mmap` and gives them back to the
//! kernel when freed. By default that threshold moves: each time a large mmapped block is freed,
//! the threshold rises to the block's size, up to 32 MiB. From then on, the exporter's large
//! transient buffers come from the heap instead: a scrape's family buffers, a listing's pages, a
//! status snapshot. Once freed they stay in the process as memory glibc keeps, so the process
//! grows to its busiest moment and stays there. Fixing the threshold at 256 KiB keeps those
//! buffers on `mmap`. Measured with `benches/scale` at 4,000 × 1, two back-to-back pairs: peak
//! RSS 356–357 → 327–329 MiB, for about 20 ms more per `/metrics` at that size (the page faults of
//! fresh mappings; `docs/performance.md`).
//!
//! An operator who sets the threshold (`GLIBC_TUNABLES=glibc.malloc.mmap_threshold=…`, or the
//! older `MALLOC_MMAP_THRESHOLD_`) keeps their own. Other C libraries (musl) are left alone.

/// The threshold set at start, unless the operator set one.
pub const MMAP_THRESHOLD: usize = 256 << 10;

/// Set the mmap threshold, before the runtime's threads start.
pub fn tune() {
    if operator_set(|name| std::env::var(name).ok()) {
        return;
    }
    set_mmap_threshold(MMAP_THRESHOLD);
}

/// Whether the operator chose an mmap threshold through glibc's own environment variables.
fn operator_set(env: impl Fn(&str) -> Option<String>) -> bool {
    env("MALLOC_MMAP_THRESHOLD_").is_some()
        || env("GLIBC_TUNABLES").is_some_and(|t| {
            t.split(':')
                .any(|setting| setting.starts_with("glibc.malloc.mmap_threshold="))
        })
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_mmap_threshold(bytes: usize) {
    let bytes = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    // SAFETY: mallopt sets one parameter of glibc's allocator; it takes the allocator's own lock
    // and is called before any other thread of this process exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, bytes);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_mmap_threshold(_bytes: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn an_operators_threshold_is_kept_and_other_tunables_are_not_one() {
        assert!(!operator_set(env(&[])));
        assert!(operator_set(env(&[("MALLOC_MMAP_THRESHOLD_", "131072")])));
        assert!(operator_set(env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.arena_max=2:glibc.malloc.mmap_threshold=65536"
        )])));
        assert!(!operator_set(env(&[(
            "GLIBC_TUNABLES",
            "glibc.malloc.arena_max=2:glibc.malloc.trim_threshold=1"
        )])));
    }
}
