//! Two things done to glibc's allocator: a fixed mmap threshold, set at start, and a trim of
//! the heap's free pages every [`TRIM_EVERY`].
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
//!
//! The threshold does nothing for the many small blocks of a burst (a fleet re-listing after a
//! redeploy: answers, JSON trees, request connections' buffers). Most are freed within a second,
//! but the few kept from the same burst (a status event, a changed definition) sit between them,
//! so the heap cannot shrink from its top and the freed pages stay in the process: RSS grew to
//! about 1.6× the live heap under churn. `malloc_trim` hands every free page inside the heaps back
//! (`MADV_DONTNEED`). It runs on the blocking pool every 10 s, a few milliseconds each at 1,000
//! connections, holding each arena's lock in turn; measured in `docs/performance.md`.

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

/// How often the heap's free pages are handed back ([`trim`]).
pub const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Hand the free pages inside glibc's heaps back to the kernel (`malloc_trim`). Without it,
/// memory freed between long-lived blocks stays in the process: after a burst of refreshes the
/// freed pages of their answers are kept, pinned by the few blocks kept from the same burst.
pub fn trim() {
    glibc_trim();
}

/// Trim every [`TRIM_EVERY`] on the blocking pool, for as long as the runtime runs.
pub async fn trim_periodically() {
    let mut every = tokio::time::interval(TRIM_EVERY);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let _ = tokio::task::spawn_blocking(trim).await;
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn glibc_trim() {
    // SAFETY: malloc_trim takes each arena's lock in turn and only returns free pages.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn glibc_trim() {}

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
