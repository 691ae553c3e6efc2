//! The stdio transport: the exporter launches the server as a child process and speaks
//! newline-delimited JSON-RPC on its stdin and stdout (transports spec, "stdio").
//!
//! Why it looks the way it does:
//! - No shell: the program and its arguments are passed as they are, so nothing in a config is
//!   ever interpreted by `sh`.
//! - Its own process group: servers are often wrappers (`npx`, `uvx`, shell scripts) whose real
//!   server is a grandchild; ending the group ends all of them.
//! - The whole tree dies with it, not only the group: a descendant that calls `setsid()` or
//!   double-forks leaves the group (and its parent), and used to outlive the target. Each launch
//!   puts a marker unique to it in the server's environment ([`TREE_MARKER`]), which every
//!   descendant inherits; when the server's process ends, or the target is removed, the group
//!   is killed and then (on Linux) every process whose `/proc/<pid>/environ` carries the marker
//!   (see [`kill_tree`]); at the exporter's exit, every tree it launched ([`end_every_tree`]).
//!   Why not `PR_SET_CHILD_SUBREAPER`: it makes the exporter the parent of every orphan of
//!   every tree, which must then be reaped (`waitpid`) beside the runtime's own reaping of the
//!   children it waits for, and tells no more about which target an orphan came
//!   from than the marker does. Why not a cgroup: it needs a delegated cgroup (systemd
//!   `Delegate=yes`), which the exporter cannot count on; under systemd the unit's cgroup already
//!   ends everything when the service stops. What still escapes: a descendant that execs with
//!   a cleared environment or under another user (docs/security.md).
//! - A trimmed environment: the exporter's own environment may hold credentials for other
//!   targets, so a server sees only a few variables programs need to run ([`INHERITED_ENV`]) plus
//!   what its config sets (the official SDKs' stdio clients do the same).
//! - Shutdown as the spec orders it: close stdin, wait a grace, then SIGTERM and SIGKILL to the
//!   group.
//! - Bounded: each stdout line is capped (a longer one fails the channel: a reader cannot
//!   resynchronise inside it), stdout that is not JSON-RPC fails the channel (the spec forbids
//!   it, and it means the framing cannot be trusted), stderr is kept only as its last
//!   [`STDERR_TAIL_BYTES`] for diagnosis.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use tokio::io::{AsyncBufRead, AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::watch;

use super::duplex::{Duplex, Feed, Outlet, Teardown};
use super::error::{McpError, Reason};
use super::http::Limits;
use super::inbox::Inbox;

/// How to launch a stdio server.
#[derive(Clone, PartialEq, Eq)]
pub struct Command {
    /// The executable: a path, or a name looked up in `PATH`.
    pub program: String,
    pub args: Vec<String>,
    /// Set on top of [`INHERITED_ENV`].
    pub env: Vec<(String, String)>,
    /// Working directory; the exporter's own when `None`.
    pub cwd: Option<PathBuf>,
}

/// Environment values are left out: they are where servers take their API keys.
impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let env: Vec<&str> = self.env.iter().map(|(k, _)| k.as_str()).collect();
        f.debug_struct("Command")
            .field("program", &self.program)
            .field("args", &self.args)
            .field("env_names", &env)
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// Variables passed on from the exporter's environment, when set.
pub const INHERITED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR",
];

/// The environment variable that marks every process of one launch's tree: its value is the
/// exporter's pid and a launch number, unique to the launch.
pub const TREE_MARKER: &str = "MCP_EXPORTER_STDIO_TREE";
/// Rounds of [`kill_tree`]'s sweep: a process that forks while the sweep runs is found by the
/// next round; a tree still forking after this many is left to its killed parents' fate.
const SWEEP_ROUNDS: usize = 8;
/// Processes one sweep looks at at most (`/proc` entries), and bytes of one environment read.
const SWEEP_MAX_PROCESSES: usize = 1 << 20;
const SWEEP_MAX_ENVIRON_BYTES: u64 = 4 << 20;

/// How much of the server's stderr is kept (the end of it).
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// After stdin is closed, how long the server has to exit on its own.
const STDIN_GRACE: Duration = Duration::from_secs(2);
/// After SIGTERM, how long before SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(1);
/// After SIGKILL, how long to wait for the reap (a process in uninterruptible sleep).
const KILL_WAIT: Duration = Duration::from_secs(2);
/// At the end of stdout, how long to wait for the exit status that explains it.
const EXIT_STATUS_WAIT: Duration = Duration::from_secs(1);
/// A line buffer grown past this by one long line is released afterwards.
const KEEP_LINE_CAPACITY: usize = 64 * 1024;

/// Launch `cmd` and open the channel. Each stdout line may be at most `limits.max_body_bytes`.
/// Fails with `connect` when the program cannot be started.
pub async fn connect_stdio(
    cmd: &Command,
    inbox: Arc<Inbox>,
    limits: Limits,
) -> Result<Duplex, McpError> {
    let marker = new_marker();
    let mut process = tokio::process::Command::new(&cmd.program);
    process
        .args(&cmd.args)
        .env_clear()
        .envs(
            INHERITED_ENV
                .iter()
                .filter_map(|k| Some((k, std::env::var_os(k)?))),
        )
        .envs(cmd.env.iter().map(|(k, v)| (k, v)))
        .env(TREE_MARKER, &marker)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(dir) = &cmd.cwd {
        process.current_dir(dir);
    }
    #[cfg(unix)]
    process.process_group(0);
    let mut child = process.spawn().map_err(|e| {
        McpError::new(
            Reason::Connect,
            format!(
                "could not start {}: {e}",
                crate::text::bounded(&cmd.program, 200)
            ),
        )
    })?;
    let stdin = child.stdin.take().expect("stdin is piped");
    let stdout = child.stdout.take().expect("stdout is piped");
    let stderr = child.stderr.take().expect("stderr is piped");
    // With `process_group(0)` the group id is the child's pid.
    let group = child.id();

    let (mut duplex, feed) = Duplex::new(inbox, StdinOutlet(stdin));
    let (exit_tx, exit_rx) = watch::channel(None);
    let (done_tx, done_rx) = watch::channel(false);
    let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_BYTES)));
    duplex.own(tokio::spawn(read_stdout(
        stdout,
        feed.clone(),
        limits.max_body_bytes,
        exit_rx,
    )));
    duplex.own(tokio::spawn(read_stderr(stderr, tail.clone())));
    // Not owned: the supervisor outlives a dropped `Duplex` to end the process group.
    let tree = Tree {
        group,
        marker: format!("{TREE_MARKER}={marker}"),
    };
    tokio::spawn(supervise(child, tree, feed, exit_tx, done_tx));
    duplex.set_teardown(Box::new(Process {
        done: done_rx,
        tail,
    }));
    Ok(duplex)
}

struct StdinOutlet(ChildStdin);

impl Outlet for StdinOutlet {
    async fn write(&mut self, mut body: Vec<u8>, _feed: &Feed) -> Result<(), McpError> {
        if body.contains(&b'\n') {
            return Err(McpError::new(
                Reason::Transport,
                "a stdio message must not contain a newline",
            ));
        }
        body.push(b'\n');
        let io = |e: std::io::Error| {
            McpError::new(
                Reason::Transport,
                format!("writing to the server's stdin: {e}"),
            )
        };
        self.0.write_all(&body).await.map_err(io)?;
        self.0.flush().await.map_err(io)
    }
}

async fn read_stdout(
    stdout: ChildStdout,
    feed: Feed,
    max_line: usize,
    mut exit: watch::Receiver<Option<ExitStatus>>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let why = loop {
        line.clear();
        if line.capacity() > KEEP_LINE_CAPACITY {
            line = Vec::new();
        }
        match read_line(&mut reader, &mut line, max_line).await {
            Err(e) => break e,
            Ok(Line::Whole) => {
                let msg = line.strip_suffix(b"\r").unwrap_or(&line);
                if msg.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                if let Err(e) = feed.message(msg) {
                    let shown = String::from_utf8_lossy(&msg[..msg.len().min(80)]);
                    break McpError::new(
                        e.reason,
                        format!(
                            "stdout line is not a JSON-RPC message ({}): {}",
                            crate::text::bounded(&shown, 100),
                            e.detail
                        ),
                    );
                }
            }
            Ok(Line::End { unterminated }) => {
                let status =
                    tokio::time::timeout(EXIT_STATUS_WAIT, exit.wait_for(Option::is_some)).await;
                let mut detail = match status {
                    Ok(Ok(s)) => format!("server process exited ({})", s.expect("waited for Some")),
                    _ => "server closed its stdout".to_string(),
                };
                if unterminated > 0 {
                    detail.push_str(&format!(
                        "; {unterminated} bytes of an unterminated last line dropped"
                    ));
                }
                break McpError::new(Reason::StreamClosed, detail);
            }
        }
    };
    feed.end(why);
}

enum Line {
    Whole,
    End { unterminated: usize },
}

/// Read up to the next `\n` (not included) into `out`, holding at most `max` bytes.
async fn read_line(
    reader: &mut (impl AsyncBufRead + Unpin),
    out: &mut Vec<u8>,
    max: usize,
) -> Result<Line, McpError> {
    loop {
        let buf = reader.fill_buf().await.map_err(|e| {
            McpError::new(
                Reason::Transport,
                format!("reading the server's stdout: {e}"),
            )
        })?;
        if buf.is_empty() {
            return Ok(Line::End {
                unterminated: out.len(),
            });
        }
        let (take, whole) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (i, true),
            None => (buf.len(), false),
        };
        if out.len() + take > max {
            return Err(McpError::new(
                Reason::BodyTooLarge,
                format!("stdout line over {max} bytes"),
            ));
        }
        out.extend_from_slice(&buf[..take]);
        reader.consume(take + usize::from(whole));
        if whole {
            return Ok(Line::Whole);
        }
    }
}

async fn read_stderr(mut stderr: tokio::process::ChildStderr, tail: Arc<Mutex<VecDeque<u8>>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        let mut ring = tail.lock().expect("stderr ring lock");
        ring.extend(&buf[..n]);
        let over = ring.len().saturating_sub(STDERR_TAIL_BYTES);
        ring.drain(..over);
    }
}

/// Wait for the process; once the channel ends, shut it down as the spec orders. Always ends the
/// whole tree, so wrappers' children and daemons they started do not outlive the channel.
async fn supervise(
    mut child: Child,
    tree: Tree,
    feed: Feed,
    exit: watch::Sender<Option<ExitStatus>>,
    done: watch::Sender<bool>,
) {
    let group = tree.group;
    // Dropped last: at the end of this function, or with the task when the runtime shuts down.
    let tree = TreeKill(tree);
    tokio::select! {
        status = child.wait() => {
            if let Ok(s) = status {
                exit.send_replace(Some(s));
            }
            // The server is gone: what it left running has no purpose (and may hold its stdout
            // open, so the channel would never see its end).
            tree.0.kill();
            feed.ended().await;
        }
        _ = feed.ended() => {
            // The writer has stopped, so stdin is closed (or closing): the server's cue to exit.
            let status = match tokio::time::timeout(STDIN_GRACE, child.wait()).await {
                Ok(s) => s.ok(),
                Err(_) => {
                    signal_group(group, &mut child, Signal::Term);
                    match tokio::time::timeout(TERM_GRACE, child.wait()).await {
                        Ok(s) => s.ok(),
                        Err(_) => {
                            signal_group(group, &mut child, Signal::Kill);
                            tokio::time::timeout(KILL_WAIT, child.wait()).await.ok().and_then(Result::ok)
                        }
                    }
                }
            };
            if let Some(s) = status {
                exit.send_replace(Some(s));
            }
        }
    }
    done.send_replace(true);
}

/// One launch's processes: its group, and the marker in the environment of all of them.
struct Tree {
    group: Option<u32>,
    /// `NAME=value`, as it appears in `/proc/<pid>/environ`.
    marker: String,
}

impl Tree {
    /// SIGKILL to the group (a group already gone gives ESRCH), then to every marked process.
    fn kill(&self) {
        if let Some(group) = self.group {
            kill_group(group, Signal::Kill);
        }
        kill_tree(self.marker.as_bytes());
    }
}

/// Whatever the leader did, nothing of its tree outlives the channel.
struct TreeKill(Tree);

impl Drop for TreeKill {
    fn drop(&mut self) {
        self.0.kill();
    }
}

/// A marker value no other launch has: this process's id and a launch number.
fn new_marker() -> String {
    static LAUNCHES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = LAUNCHES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}.{n}", std::process::id())
}

/// SIGKILL every process (but this one) whose environment holds `marker` (`NAME=value`), in
/// rounds until a round finds none (at most [`SWEEP_ROUNDS`]); how many were signalled. Only
/// processes of this user can be read, which is every process a server can start without
/// privileges. Linux only (elsewhere the group kill is all there is).
fn kill_tree(marker: &[u8]) -> usize {
    sweep(|kv| kv == marker)
}

/// Kill what is left of every tree this process launched (the exporter's exit: a runtime shut
/// down in the background may drop a tree's guard too late, or not at all, before the process
/// ends). The daemon calls it after its runtime has stopped; how many were signalled.
pub fn end_every_tree() -> usize {
    let mine = format!("{TREE_MARKER}={}.", std::process::id());
    sweep(|kv| kv.starts_with(mine.as_bytes()))
}

/// SIGKILL every process (but this one) with an environment entry that `marks`, in rounds
/// until a round finds none (at most [`SWEEP_ROUNDS`]).
fn sweep(marks: impl Fn(&[u8]) -> bool) -> usize {
    let mut killed = 0;
    for _ in 0..SWEEP_ROUNDS {
        let found = marked_processes(&marks);
        if found.is_empty() {
            break;
        }
        for pid in &found {
            // SAFETY: kill only sends a signal.
            unsafe {
                libc::kill(*pid, libc::SIGKILL);
            }
        }
        killed += found.len();
    }
    killed
}

/// Processes with an environment entry that `marks`, by `/proc` (none where there is no `/proc`).
fn marked_processes(marks: &impl Fn(&[u8]) -> bool) -> Vec<libc::pid_t> {
    use std::io::Read;
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut found = Vec::new();
    let mut environ = Vec::new();
    for entry in dir.flatten().take(SWEEP_MAX_PROCESSES) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        environ.clear();
        let read = std::fs::File::open(entry.path().join("environ"))
            .and_then(|f| f.take(SWEEP_MAX_ENVIRON_BYTES).read_to_end(&mut environ));
        if read.is_ok()
            && environ.split(|b| *b == 0).any(marks)
            && let Ok(pid) = libc::pid_t::try_from(pid)
        {
            found.push(pid);
        }
    }
    found
}

/// Signal a process group; false where there are no groups (not unix) or the id does not fit.
fn kill_group(group: u32, signal: Signal) -> bool {
    #[cfg(unix)]
    if let Ok(pgid) = libc::pid_t::try_from(group) {
        let sig = match signal {
            Signal::Term => libc::SIGTERM,
            Signal::Kill => libc::SIGKILL,
        };
        // SAFETY: killpg only sends a signal.
        unsafe {
            libc::killpg(pgid, sig);
        }
        return true;
    }
    let _ = (group, signal);
    false
}

#[derive(Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

fn signal_group(group: Option<u32>, child: &mut Child, signal: Signal) {
    if !group.is_some_and(|g| kill_group(g, signal)) {
        let _ = child.start_kill();
    }
}

/// What the channel keeps of the process: when it is gone, and its stderr.
struct Process {
    done: watch::Receiver<bool>,
    tail: Arc<Mutex<VecDeque<u8>>>,
}

impl Teardown for Process {
    fn finish(&self) -> BoxFuture<'_, ()> {
        let mut done = self.done.clone();
        Box::pin(async move {
            let bound = STDIN_GRACE + TERM_GRACE + KILL_WAIT + Duration::from_secs(1);
            let _ = tokio::time::timeout(bound, done.wait_for(|d| *d)).await;
        })
    }

    fn stderr_tail(&self, max_bytes: usize) -> Option<String> {
        let bytes: Vec<u8> = self
            .tail
            .lock()
            .expect("stderr ring lock")
            .iter()
            .copied()
            .collect();
        Some(tail_text(&String::from_utf8_lossy(&bytes), max_bytes))
    }
}

/// The end of `text`, escaped by [`crate::text::bounded`], at most `max_bytes` long.
fn tail_text(text: &str, max_bytes: usize) -> String {
    let mut start = text.len();
    let mut used = 0usize;
    let mut buf = [0u8; 4];
    for (i, c) in text.char_indices().rev() {
        let w = crate::text::bounded(c.encode_utf8(&mut buf), 16).len();
        if used + w > max_bytes {
            break;
        }
        used += w;
        start = i;
    }
    crate::text::bounded(&text[start..], max_bytes).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn lines(input: &[u8], max: usize) -> Vec<Result<String, Reason>> {
        let mut reader = BufReader::with_capacity(4, input);
        let mut out = Vec::new();
        for _ in 0..100 {
            let mut line = Vec::new();
            match read_line(&mut reader, &mut line, max).await {
                Ok(Line::Whole) => out.push(Ok(String::from_utf8(line).unwrap())),
                Ok(Line::End { unterminated }) => {
                    out.push(Ok(format!("END {unterminated}")));
                    break;
                }
                Err(e) => {
                    out.push(Err(e.reason));
                    break;
                }
            }
        }
        out
    }

    #[tokio::test]
    async fn lines_are_cut_at_newlines_across_reads_and_capped() {
        assert_eq!(
            lines(b"{\"a\":1}\n\n{\"b\":22}\npart", 8).await,
            vec![
                Ok("{\"a\":1}".into()),
                Ok("".into()),
                Ok("{\"b\":22}".into()),
                Ok("END 4".into())
            ]
        );
        assert_eq!(
            lines(b"123456789\n", 8).await,
            vec![Err(Reason::BodyTooLarge)]
        );
        assert_eq!(lines(b"12345678\n", 8).await[0], Ok("12345678".into()));
    }

    /// The server of `tests/fixtures/escaping_server.py`: a daemon and a `setsid()` child.
    const ESCAPING_SERVER: &str = include_str!("../../tests/fixtures/escaping_server.py");

    const DEADLINE: Duration = Duration::from_secs(20);

    /// Alive: in `/proc` and neither a zombie nor dead.
    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start());
            !state.is_some_and(|s| s.starts_with('Z') || s.starts_with('X'))
        })
    }

    async fn until(what: &str, cond: impl Fn() -> bool) {
        let start = std::time::Instant::now();
        while !cond() {
            assert!(start.elapsed() < DEADLINE, "timed out: {what}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The escaping server's two escaped processes, once both have written their pid (each
    /// writes its own, so both ran). Not checked alive here: a server that exits at once may
    /// have its tree ended before the test reads the files.
    async fn escaped(dir: &std::path::Path) -> Vec<u32> {
        let files = ["daemon", "setsid"].map(|n| dir.join(n));
        until("the server started its processes", || {
            files.iter().all(|f| f.exists())
        })
        .await;
        files
            .iter()
            .map(|f| std::fs::read_to_string(f).unwrap().parse().unwrap())
            .collect()
    }

    async fn launch(dir: &std::path::Path, mode: &str) -> Duplex {
        let script = dir.join("server.py");
        std::fs::write(&script, ESCAPING_SERVER).unwrap();
        let cmd = Command {
            program: "python3".into(),
            args: vec![
                script.display().to_string(),
                dir.display().to_string(),
                mode.into(),
            ],
            env: vec![],
            cwd: None,
        };
        let (inbox, _requests) = Inbox::new();
        connect_stdio(&cmd, Arc::new(inbox), Limits::default())
            .await
            .expect("python3 starts")
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_removed_target_leaves_no_process_of_its_tree() {
        let dir = tempfile::tempdir().unwrap();
        let duplex = launch(dir.path(), "stay").await;
        let pids = escaped(dir.path()).await;
        assert!(pids.iter().all(|p| alive(*p)), "{pids:?}");
        duplex.close().await;
        until("the daemon and the setsid child are gone", || {
            !pids.iter().any(|p| alive(*p))
        })
        .await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_server_that_exits_leaves_no_process_of_its_tree() {
        let dir = tempfile::tempdir().unwrap();
        let duplex = launch(dir.path(), "exit").await;
        let pids = escaped(dir.path()).await;
        // Nothing is closed by the client: the server's own exit ends the tree, and then the
        // channel (its stdout, which the escaped processes held open, ends with them).
        until("the daemon and the setsid child are gone", || {
            !pids.iter().any(|p| alive(*p))
        })
        .await;
        let why = tokio::time::timeout(DEADLINE, duplex.closed())
            .await
            .expect("the channel ends");
        assert_eq!(why.reason, Reason::StreamClosed, "{}", why.detail);
    }

    #[test]
    fn markers_are_unique_per_launch_and_other_processes_are_never_matched() {
        assert_ne!(new_marker(), new_marker());
        let nobody = format!("{TREE_MARKER}={}", new_marker());
        assert!(marked_processes(&|kv: &[u8]| kv == nobody.as_bytes()).is_empty());
    }

    #[test]
    fn debug_output_never_shows_environment_values() {
        let cmd = Command {
            program: "server".into(),
            args: vec![],
            env: vec![("API_KEY".into(), "s3cret".into())],
            cwd: None,
        };
        let shown = format!("{cmd:?}");
        assert!(
            shown.contains("API_KEY") && !shown.contains("s3cret"),
            "{shown}"
        );
    }

    #[test]
    fn the_stderr_tail_keeps_the_end_escaped_and_bounded() {
        let t = tail_text("first line\nlast line\n", 12);
        assert!(t.len() <= 12, "{t}");
        assert!(t.ends_with("line\\u{a}"), "{t}");
        assert!(!t.contains('\n'));
        assert_eq!(tail_text("short", 100), "short");
        assert_eq!(tail_text("\u{1b}", 3), "");
    }
}
