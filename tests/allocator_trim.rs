//! `allocator::trim` hands freed heap pages back to the kernel even when blocks still in use
//! sit between them (what a burst of refreshes leaves: most of its memory freed, a few blocks
//! kept). Its own test binary, so no other test allocates while the process's RSS is read.

#![cfg(all(target_os = "linux", target_env = "gnu"))]

/// Resident set size of this process, in bytes.
fn rss() -> usize {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: usize = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf only reads a system constant.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    pages * usize::try_from(page).unwrap()
}

#[test]
fn freed_pages_between_kept_blocks_go_back_to_the_kernel() {
    const BLOCK: usize = 4096;
    const BLOCKS: usize = 16 * 1024; // 64 MiB
    let mut blocks: Vec<Option<Vec<u8>>> = (0..BLOCKS).map(|_| Some(vec![1u8; BLOCK])).collect();
    // Keep one block in 64: the heap cannot shrink from its top, every free page is between
    // blocks in use.
    for (i, b) in blocks.iter_mut().enumerate() {
        if i % 64 != 0 {
            *b = None;
        }
    }
    let before = rss();
    mcp_exporter::allocator::trim();
    let after = rss();
    assert!(
        after + 32 * 1024 * 1024 < before,
        "RSS {before} -> {after} bytes: the freed 63 MiB stayed in the process"
    );
    assert_eq!(blocks.iter().flatten().count(), BLOCKS / 64);
    assert!(blocks.iter().flatten().all(|b| b.iter().all(|&x| x == 1)));
}
