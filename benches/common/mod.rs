//! What the benches share: reading a process's RSS and CPU, and summing a metric family.

// Each bench uses part of this.
#![allow(dead_code)]

/// (RSS bytes, CPU seconds) of a process, from /proc.
pub fn proc_sample(pid: u32) -> Option<(u64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss_kb: u64 = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((rss_kb * 1024, ticks as f64 / 100.0))
}

/// Sum of every sample of `family` whose labels contain `labels` (empty: all samples).
pub fn sum(text: &str, family: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .filter(|l| l.contains(labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// CPU seconds of a process's live threads from their schedstat (nanoseconds, where /proc's
/// stat counts 10 ms ticks); falls back to `proc_sample`.
pub fn proc_cpu(pid: u32) -> Option<f64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ns = 0u64;
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        if let Some(run) = text
            .split_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        {
            ns += run;
            any = true;
        }
    }
    if any {
        Some(ns as f64 / 1e9)
    } else {
        proc_sample(pid).map(|s| s.1)
    }
}

/// Start the exporter `binary` on `config`, serving on 127.0.0.1:`port`, quiet.
pub fn spawn_exporter(
    binary: &std::path::Path,
    config: &std::path::Path,
    port: u16,
) -> std::process::Child {
    std::process::Command::new(binary)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--log.level=error")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("exporter starts")
}

/// The parsed arguments of bench `name`, or its usage error on stderr and exit 2.
pub fn args_or_exit<T>(name: &str, parsed: Result<T, String>) -> T {
    parsed.unwrap_or_else(|e| {
        eprintln!("{name}: {e}");
        std::process::exit(2);
    })
}

/// A multi-thread tokio runtime with `workers` workers: the box has few cores, and the subject
/// of a bench is the exporter, not its load generator.
pub fn runtime(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .expect("runtime")
}

/// A loopback port nobody listens on right now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// The `q` quantile of `values` (nearest rank); NaN when empty.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    v[((v.len() - 1) as f64 * q).round() as usize]
}

/// The bench's own arguments: the command line without the program and the `--bench` that
/// `cargo bench` passes.
pub fn bench_args() -> impl Iterator<Item = String> {
    std::env::args().skip(1).filter(|a| a != "--bench")
}
