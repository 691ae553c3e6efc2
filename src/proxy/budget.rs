//! The file descriptors the proxies may take, so the exporter's own port keeps answering.
//!
//! The proxies share the process's descriptors with the exporter's listener, its scrapes and the
//! probes. Each proxy connection costs up to [`FDS_PER_CONNECTION`]: the client's socket and its
//! upstream connection (held while a request is forwarded, then kept in the client pool at most
//! once per concurrent request). Unbounded, 1,000 requests held on a hanging upstream under
//! `ulimit -n 1024` took every descriptor, and 47 of 52 scrapes of `/metrics` failed.
//!
//! So, whenever the proxies are (re)configured, their caps are checked against the soft
//! `RLIMIT_NOFILE` of the moment: the connections of all proxies together may use at most
//! `limit - RESERVE_FDS` descriptors. If the configured `max_connections` ask for more, every
//! proxy's cap is lowered in proportion (and a warning says so); if not even one connection per
//! proxy fits, the proxies are refused with an error naming the limit. A proxy at its cap
//! refuses new connections (see [`crate::web::serve_detached`]), which costs a descriptor only
//! for the moment of the accept.

/// Descriptors kept for everything that is not a proxy connection: the exporter's listener and
/// its scrapes (its accept loop also frees descriptors at the file limit by closing idle
/// connections), the probes' connections, logs, the configuration file, the runtime's own.
pub const RESERVE_FDS: u64 = 256;

/// Descriptors one proxy connection may hold: its socket and one upstream connection.
pub const FDS_PER_CONNECTION: u64 = 2;

/// The process's soft limit of open files, when it has one.
pub fn open_files_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes one `rlimit` through a valid pointer to a local.
    let ok = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0;
    (ok && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// The connection cap each proxy gets, for the caps `wanted` (in order) under the open-files
/// `limit` (`None`: unlimited). `Err` says why no proxy can run.
pub fn caps(wanted: &[usize], limit: Option<u64>) -> Result<Vec<usize>, String> {
    let Some(limit) = limit else {
        return Ok(wanted.to_vec());
    };
    let available = limit.saturating_sub(RESERVE_FDS) / FDS_PER_CONNECTION;
    let asked: u64 = wanted.iter().map(|w| *w as u64).sum();
    if asked <= available {
        return Ok(wanted.to_vec());
    }
    if available < wanted.len() as u64 {
        return Err(format!(
            "the open-files limit (RLIMIT_NOFILE) is {limit}: after the {RESERVE_FDS} descriptors kept for the exporter's own port and probes, {} proxies need at least {} ({FDS_PER_CONNECTION} per connection); raise the limit (ulimit -n, LimitNOFILE)",
            wanted.len(),
            wanted.len() as u64 * FDS_PER_CONNECTION,
        ));
    }
    // In proportion, rounded down (so the sum stays within `available`), at least 1 each.
    let mut caps: Vec<usize> = wanted
        .iter()
        .map(|w| ((*w as u64 * available / asked).max(1)) as usize)
        .collect();
    // The `max(1)` may push the sum over: take back from the largest.
    while caps.iter().map(|c| *c as u64).sum::<u64>() > available {
        if let Some(c) = caps.iter_mut().max() {
            *c -= 1;
        }
    }
    Ok(caps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps_fit_under_the_limit_with_the_reserve_kept() {
        assert_eq!(caps(&[4096], None), Ok(vec![4096]));
        assert_eq!(caps(&[4096], Some(65_536)), Ok(vec![4096]));
        // ulimit -n 1024: (1024 - 256) / 2.
        assert_eq!(caps(&[4096], Some(1024)), Ok(vec![384]));
        assert_eq!(caps(&[100], Some(1024)), Ok(vec![100]));
        let two = caps(&[3000, 1000], Some(1024)).expect("fits");
        assert_eq!(two, vec![288, 96]);
        let many = caps(&[1; 100], Some(456)).expect("fits");
        assert_eq!(many.iter().sum::<usize>(), 100);
        let tight = caps(&[1000, 1, 1], Some(262)).expect("fits");
        assert!(tight.iter().sum::<usize>() <= 3 && tight.iter().all(|c| *c >= 1));
        let e = caps(&[10, 10], Some(259)).expect_err("no room");
        assert!(e.contains("259") && e.contains("raise the limit"), "{e}");
    }

    #[test]
    fn the_limit_of_this_process_is_read() {
        assert!(open_files_limit().is_none_or(|n| n > 0));
    }
}
