//! Startup and signals, through the binary: a SIGHUP during startup is handled, a taken port
//! fails before any target is dialed, a missing file is an error (not a kept configuration),
//! contradictory flags are refused, `--demo` listens on loopback, and SIGTERM is handled while
//! a configuration read is stuck.
//!
//! A FIFO as the configuration file holds the exporter inside its configuration read for as
//! long as the test wants: startup (or a reload) is provably under way when a signal is sent.

mod common;

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use common::{DEADLINE, Exporter, wait_exit};

const BIN: &str = env!("CARGO_BIN_EXE_mcp_exporter");

/// `O_NONBLOCK` on Linux: opening a FIFO for writing then fails unless a reader has it open.
const O_NONBLOCK: i32 = 0o4000;

fn mkfifo(path: &Path) {
    let made = Command::new("mkfifo").arg(path).status().expect("mkfifo");
    assert!(made.success(), "mkfifo {}", path.display());
}

/// The write end of `fifo`, once the exporter has opened it for reading (it then blocks in
/// its read until this end writes or closes).
fn writer_once_read(fifo: &Path) -> std::fs::File {
    let start = Instant::now();
    loop {
        if let Ok(f) = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(O_NONBLOCK)
            .open(fifo)
        {
            return f;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "the exporter never opened {}",
            fifo.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn reload_ok(e: &Exporter) -> impl std::future::Future<Output = common::Scrape> + '_ {
    e.until_metrics("the configuration applied", |s| {
        s.v("mcp_exporter_config_last_reload_successful", &[]) == 1.0
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_during_startup_is_handled_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("mcp_exporter.yml");
    mkfifo(&fifo);
    let mut e = Exporter::spawn(&[format!("--config.file={}", fifo.display())], &[]);
    let mut writer = writer_once_read(&fifo);
    // Startup is under way: the first configuration is being read. The port is already served,
    // but not ready.
    e.signal("HUP");
    let ready = reqwest::get(format!("{}/-/ready", e.base)).await.unwrap();
    assert_eq!(ready.status(), 503);
    let _ = writer.write_all(b"targets: []\n");
    drop(writer);
    reload_ok(&e).await;
    assert!(
        e.child.try_wait().unwrap().is_none(),
        "the SIGHUP ended the process"
    );
    // The SIGHUP's reload now waits on the FIFO; SIGTERM still ends the process cleanly.
    let status = e.terminate();
    assert!(status.success(), "exit status {status:?}\n{}", e.logs());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_is_handled_while_a_reload_reads_a_stuck_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(&path, "targets: []\n").unwrap();
    let mut e = Exporter::spawn(&[format!("--config.file={}", path.display())], &[]);
    reload_ok(&e).await;
    std::fs::remove_file(&path).unwrap();
    mkfifo(&path);
    e.signal("HUP");
    // The reload is now blocked reading a file that never ends.
    let writer = writer_once_read(&path);
    let status = e.terminate();
    assert!(status.success(), "exit status {status:?}\n{}", e.logs());
    drop(writer);
}

/// The binary, killed when dropped (also when a test fails while it runs).
struct Spawned(std::process::Child);

impl Drop for Spawned {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Start the binary with `args`, its stderr going to `err`.
fn spawn(args: &[String], err: &tempfile::NamedTempFile) -> Spawned {
    let child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::from(err.reopen().unwrap()))
        .spawn()
        .unwrap();
    Spawned(child)
}

/// Run the binary with `args` until it exits; its status and stderr.
fn run_to_exit(args: &[String]) -> (ExitStatus, String) {
    let err = tempfile::NamedTempFile::new().unwrap();
    let mut child = spawn(args, &err);
    let status = wait_exit(&mut child.0);
    (status, std::fs::read_to_string(err.path()).unwrap())
}

fn config_with_target(dir: &Path, url: &str) -> PathBuf {
    let path = dir.join("mcp_exporter.yml");
    std::fs::write(
        &path,
        format!("targets:\n  - name: kb\n    url: {url}\n    connections: 4\n"),
    )
    .unwrap();
    path
}

#[test]
fn a_taken_port_fails_before_any_target_is_dialed() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_addr = taken.local_addr().unwrap().to_string();
    let target = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    target.set_nonblocking(true).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_target(
        dir.path(),
        &format!("http://{}/mcp", target.local_addr().unwrap()),
    );
    let (status, stderr) = run_to_exit(&[
        format!("--config.file={}", config.display()),
        format!("--web.listen-address={taken_addr}"),
    ]);
    assert!(!status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("cannot listen on {taken_addr}")),
        "{stderr}"
    );
    assert!(
        !stderr.contains("configuration applied"),
        "targets were started before the port was bound\n{stderr}"
    );
    match target.accept() {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
        other => panic!("the target was dialed: {other:?}"),
    }
}

#[test]
fn a_missing_configuration_file_is_an_error_not_a_kept_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.yml");
    let (status, stderr) = run_to_exit(&[
        format!("--config.file={}", missing.display()),
        "--web.listen-address=127.0.0.1:0".into(),
    ]);
    assert!(!status.success(), "{stderr}");
    assert!(stderr.contains("missing.yml"), "{stderr}");
    assert!(
        !stderr.contains("keeping the running one"),
        "there is no running configuration to keep\n{stderr}"
    );
}

#[test]
fn demo_refuses_a_configuration_file_and_config_check() {
    for conflicting in ["--config.file=mine.yml", "--config.check"] {
        let (status, stderr) = run_to_exit(&[
            "--demo".into(),
            conflicting.into(),
            "--web.listen-address=127.0.0.1:0".into(),
        ]);
        assert!(!status.success(), "--demo {conflicting}: {stderr}");
        let flag = conflicting.split('=').next().unwrap();
        assert!(
            stderr.contains("--demo") && stderr.contains(flag) && stderr.contains("cannot be used"),
            "--demo {conflicting}: {stderr}"
        );
    }
}

#[test]
fn demo_listens_on_loopback_unless_told_otherwise() {
    let err = tempfile::NamedTempFile::new().unwrap();
    let child = spawn(&["--demo".into()], &err);
    // Either it listens, or the port is taken (by another exporter on this machine): both
    // lines name the address it chose.
    let start = Instant::now();
    let logs = loop {
        let logs = std::fs::read_to_string(err.path()).unwrap();
        if logs.contains("listening") || logs.contains("cannot listen") {
            break logs;
        }
        assert!(start.elapsed() < DEADLINE, "no listen line\n{logs}");
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(child);
    assert!(logs.contains("127.0.0.1:10117"), "{logs}");
    assert!(!logs.contains("0.0.0.0"), "{logs}");
}

/// `--metrics.exclude` leaves the named probe families out of /metrics and keeps everything else;
/// a name that is no probe family stops the start with a reason, before anything is dialed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metric_families_can_be_left_out_and_bad_names_are_refused() {
    let lab = common::start_lab([("kb", mcp_lab::Behaviour::default())]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = config_with_target(dir.path(), lab.url("kb").as_str());
    let e = Exporter::spawn(
        &[
            format!("--config.file={}", config.display()),
            "--metrics.exclude=mcp_probe_request_duration_seconds,mcp_probe_tools_list_walks_total"
                .into(),
        ],
        &[],
    );
    let s = e
        .until_metrics("kb walked and pinged", |s| {
            s.get(
                "mcp_probe_cache_refreshes_total",
                &[("target", "kb"), ("trigger", "initial")],
            )
            .unwrap_or(0.0)
                >= 1.0
        })
        .await;
    assert!(
        !s.text.contains("mcp_probe_request_duration_seconds"),
        "{}",
        s.text
    );
    assert!(
        !s.text.contains("mcp_probe_tools_list_walks_total"),
        "{}",
        s.text
    );
    assert!(s.text.contains("mcp_probe_requests_total{"), "{}", s.text);
    assert!(
        s.text.contains("mcp_probe_ping_duration_seconds_bucket{"),
        "{}",
        s.text
    );
    for bad in ["mcp_probe_nope", "mcp_exporter_targets"] {
        let (status, stderr) = run_to_exit(&[
            format!("--config.file={}", config.display()),
            format!("--metrics.exclude={bad}"),
            "--web.listen-address=127.0.0.1:0".into(),
        ]);
        assert_eq!(status.code(), Some(2), "{bad}: {stderr}");
        assert!(
            stderr.contains("--metrics.exclude") && stderr.contains(bad),
            "{stderr}"
        );
    }
}

/// One log line names at most a few targets: "configuration applied" for 2,000 started targets
/// (64-byte names, 134 KB of names) is a line of a few KB that counts the rest.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_of_thousands_of_targets_is_one_short_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    let mut yaml = String::from("global:\n  ping_interval: 1h\n  audit_interval: 1h\ntargets:\n");
    for i in 0..2_000 {
        // Port 9 (discard) on loopback: refused at once, then backoff; nothing is reached.
        yaml.push_str(&format!(
            "  - name: t{i:04}-{}\n    url: http://127.0.0.1:9/mcp\n",
            "x".repeat(58)
        ));
    }
    std::fs::write(&path, yaml).unwrap();
    let mut e = Exporter::spawn(&[format!("--config.file={}", path.display())], &[]);
    reload_ok(&e).await;
    let logs = e.logs();
    let line = logs
        .lines()
        .find(|l| l.contains("configuration applied"))
        .expect("the line is logged");
    assert!(line.contains("started=2000"), "{line}");
    assert!(line.contains("… and 1990 more"), "{line}");
    // 10 names of 64 bytes plus the fixed fields; 2,000 names would be ~134 KB.
    assert!(line.len() < 4096, "{} bytes: {line}", line.len());
    assert!(e.terminate().success());
}

/// Blocks SIGHUP in the process about to exec (the mask is inherited): a SIGHUP sent at once
/// is then pending when the exporter's `main` starts, and is delivered the moment `main`
/// unblocks it — which must be after its handler is installed.
fn exec_with_sighup_blocked(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGHUP);
            if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// A SIGHUP in the first instant after exec (before `main` has done anything) does not kill
/// the exporter, and SIGHUP still reloads afterwards; SIGTERM ends it with status 0. Sent while
/// SIGHUP is blocked across exec, it is delivered exactly when `main` unblocks it, so this
/// holds whatever the timing (a process whose handler came later would die of it, and one
/// that never unblocked SIGHUP would never reload).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sighup_at_exec_is_not_fatal_and_sighup_reloads_after() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(&path, "targets: []\n").unwrap();
    for round in 0..5 {
        let port = common::free_port();
        let err = tempfile::NamedTempFile::new().unwrap();
        let mut cmd = Command::new(BIN);
        cmd.arg(format!("--config.file={}", path.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(err.reopen().unwrap()));
        exec_with_sighup_blocked(&mut cmd);
        let mut child = Spawned(cmd.spawn().unwrap());
        let pid = child.0.id() as i32;
        // SAFETY: kill(2) on our own child.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
        let base = format!("http://127.0.0.1:{port}");
        let reloads = |s: &common::Scrape| {
            s.get(
                "mcp_exporter_config_reloads_total",
                &[("result", "success")],
            )
            .unwrap_or(0.0)
        };
        let start = Instant::now();
        let first = loop {
            if let Some(status) = child.0.try_wait().unwrap() {
                panic!(
                    "round {round}: a SIGHUP at exec ended the process: {status:?}\n{}",
                    std::fs::read_to_string(err.path()).unwrap()
                );
            }
            if let Some(text) = common::get(&format!("{base}/metrics")).await {
                let s = common::Scrape::parse(&text);
                if reloads(&s) >= 1.0 {
                    break reloads(&s);
                }
            }
            assert!(start.elapsed() < DEADLINE, "round {round}: never ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        // SIGHUP is not left blocked: it reloads.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGHUP) }, 0);
        let start = Instant::now();
        loop {
            if let Some(text) = common::get(&format!("{base}/metrics")).await
                && reloads(&common::Scrape::parse(&text)) > first
            {
                break;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "round {round}: SIGHUP did not reload\n{}",
                std::fs::read_to_string(err.path()).unwrap()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let status = wait_exit(&mut child.0);
        assert!(status.success(), "round {round}: {status:?}");
    }
}

/// How often a SIGHUP sent 0–8 ms after `spawn` returns (evenly spread over 30 tries, as in the
/// hostile-input run of issue 22) kills the process. What can remain is the dynamic loader's
/// window before `main`, which no program can close. Prints the count and the latest delay
/// that killed.
#[test]
#[ignore = "a measurement: MCP_EXPORTER_BIN=target/release/mcp_exporter cargo test --test startup measure -- --ignored --nocapture"]
fn measure_sighup_right_after_exec() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp_exporter.yml");
    std::fs::write(&path, "targets: []\n").unwrap();
    let bin = std::env::var("MCP_EXPORTER_BIN").unwrap_or_else(|_| BIN.to_string());
    let tries = 30u32;
    let mut died = Vec::new();
    for i in 0..tries {
        let delay = Duration::from_micros(u64::from(i) * 8_000 / u64::from(tries));
        let port = common::free_port();
        let mut child = Spawned(
            Command::new(&bin)
                .arg(format!("--config.file={}", path.display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let sent = Instant::now();
        while sent.elapsed() < delay {
            std::hint::spin_loop();
        }
        // SAFETY: kill(2) on our own child.
        unsafe { libc::kill(child.0.id() as i32, libc::SIGHUP) };
        let start = Instant::now();
        loop {
            if child.0.try_wait().unwrap().is_some() {
                died.push(delay);
                break;
            }
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                break;
            }
            assert!(start.elapsed() < DEADLINE);
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    println!(
        "SIGHUP 0-8 ms after exec: {} of {tries} processes died (latest at {:?})",
        died.len(),
        died.last()
    );
}

/// Alive: in `/proc` and neither a zombie nor dead.
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
        !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
    })
}

/// The exporter's exit (SIGTERM) leaves no process of a stdio target's tree, also those that
/// left its process group (a daemon and a `setsid()` child of the client core's `tests/fixtures/escaping_server.py`).
/// Before, the background shutdown of the runtime could end the process before the tree's
/// guard had killed them all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_exporters_exit_leaves_no_process_of_a_stdio_tree() {
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/mcp-client/tests/fixtures/escaping_server.py"
    );
    let config = dir.path().join("mcp_exporter.yml");
    std::fs::write(
        &config,
        format!(
            "targets:\n  - name: esc\n    command: python3\n    args: [{script:?}, {:?}, stay]\n",
            dir.path().display().to_string()
        ),
    )
    .unwrap();
    let mut e = Exporter::spawn(&[format!("--config.file={}", config.display())], &[]);
    let files = ["daemon", "setsid"].map(|n| dir.path().join(n));
    let start = Instant::now();
    while !files.iter().all(|f| f.exists()) {
        assert!(start.elapsed() < DEADLINE, "never started\n{}", e.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pids: Vec<u32> = files
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap().parse().unwrap())
        .collect();
    assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
    assert!(e.terminate().success());
    let start = Instant::now();
    while pids.iter().any(|p| alive(*p)) {
        if start.elapsed() > DEADLINE {
            for p in &pids {
                // SAFETY: kill(2) on processes this test started (through the exporter).
                unsafe { libc::kill(*p as i32, libc::SIGKILL) };
            }
            panic!("processes of the tree outlived the exporter: {pids:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
