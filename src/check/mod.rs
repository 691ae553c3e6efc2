//! `mcp_exporter check URL`: one pass of the probe's client against one server, for server
//! authors to run in CI.
//!
//! The exporter finds a broken pagination contract or a lost `list_changed` hours after a
//! deploy, on a dashboard. A server author wants the same verdict before the deploy, as an exit
//! code. So this module runs the exporter's own client once — the same [`Session`], the same
//! [`walker`] with its page cap and repeated-cursor guard, the same fingerprints and the same
//! side-effect guard as functional probes — and turns what it sees into rows a person reads:
//! PASS, WARN (a correct client copes, a careless one may not), FAIL (a correct client hits a
//! problem), INFO, and ERROR (the check itself could not run). Nothing here re-implements the
//! wire or the walk: a difference between `check` and the exporter would make one of them lie.
//!
//! Every wait is bounded: each request by `--timeout`, each walk by `--max-pages` requests,
//! `--listen-for` by its duration. Secrets stay secret: the URL is shown only through
//! [`redact_url`], header values are never printed, and wire errors strip URLs.

pub mod report;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::{Value, json};

use crate::config::{Expect, ProbeConfig, Secret, redact_url, valid_tool_name};
use crate::mcp::http::NotificationStream;
use crate::mcp::{HttpTransport, Inbox, Limits, McpError, ProtocolVersion, Session, truncate};
use crate::probe::functional::{self, ProbeFailure};
use crate::probe::toolset::{Drift, ToolSet, kept_name, tool_fingerprint};
use crate::probe::walker::{self, Pager, WalkError, WalkReport};

/// At most this many names are quoted in one row; the rest are counted.
const MAX_NAMES_SHOWN: usize = 10;

/// What to check and how.
#[derive(Debug, Clone)]
pub struct Options {
    pub url: url::Url,
    /// Extra request headers ('Authorization' …); values are never printed.
    pub headers: Vec<(String, Secret)>,
    /// Deadline of each request.
    pub timeout: Duration,
    /// The protocol version offered in `initialize` (default: the newest this client speaks).
    pub protocol_version: Option<ProtocolVersion>,
    /// Page cap of each walk.
    pub max_pages: u32,
    /// Byte cap of each walk's listing, across its pages.
    pub max_listing_bytes: usize,
    /// Keep the session this long waiting for `notifications/tools/list_changed`.
    pub listen_for: Option<Duration>,
    /// Call one tool, behind the side-effect guard.
    pub call: Option<Call>,
}

/// `--call TOOL --arguments JSON [--allow-side-effects]`.
#[derive(Debug, Clone)]
pub struct Call {
    pub tool: String,
    pub arguments: serde_json::Map<String, Value>,
    pub allow_side_effects: bool,
}

/// Parse `--arguments`: a JSON object. The error never echoes the text (it may hold secrets).
pub fn parse_arguments(text: &str) -> Result<serde_json::Map<String, Value>, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err("--arguments must be a JSON object, like {} or {\"q\": \"x\"}".into()),
        Err(e) => Err(format!(
            "--arguments is not JSON (line {}, column {})",
            e.line(),
            e.column()
        )),
    }
}

/// Check a `--protocol-version` value against the versions this client speaks.
pub fn parse_protocol_version(v: &str) -> Result<ProtocolVersion, String> {
    ProtocolVersion::parse(v).ok_or_else(|| {
        format!(
            "--protocol-version {:?} is not one this client speaks ({})",
            truncate(v, 40),
            ProtocolVersion::list()
        )
    })
}

/// The verdict of one row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Info,
    Warn,
    Fail,
    /// The check could not run (unreachable, no session, refused by the guard).
    Error,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Pass => "PASS",
            Status::Info => "INFO",
            Status::Warn => "WARN",
            Status::Fail => "FAIL",
            Status::Error => "ERROR",
        }
    }
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckRow {
    pub id: &'static str,
    pub status: Status,
    pub detail: String,
}

/// What `initialize` and the GET request told us.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ServerSummary {
    pub name: String,
    pub version: String,
    pub protocol_version: String,
    /// `capabilities.tools` is present.
    pub tools: bool,
    /// `capabilities.tools.listChanged` is true.
    pub tools_list_changed: bool,
    /// The GET notification stream opened (`false`: 405 or an error; `null`: not tried).
    pub notification_stream: Option<bool>,
}

/// One walk of `tools/list`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WalkSummary {
    /// Why it ran: `first`, `second`, `list_changed`.
    pub walk: &'static str,
    /// Tools on each page served, in order.
    pub pages: Vec<u32>,
    /// Distinct tools (a complete walk) or tools served before the walk stopped.
    pub tools: u32,
    pub complete: bool,
}

/// The whole result.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub url_redacted: String,
    pub server: Option<ServerSummary>,
    pub checks: Vec<CheckRow>,
    pub walks: Vec<WalkSummary>,
}

/// The overall verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Warn,
    Fail,
    Error,
}

impl Report {
    fn new(url: &url::Url) -> Report {
        Report {
            url_redacted: redact_url(url),
            server: None,
            checks: Vec::new(),
            walks: Vec::new(),
        }
    }

    fn row(&mut self, status: Status, id: &'static str, detail: impl Into<String>) {
        self.checks.push(CheckRow {
            id,
            status,
            detail: detail.into(),
        });
    }

    /// A FAIL outranks an ERROR: the server was reached and a correct client would hit that
    /// problem, whatever else could not be checked.
    pub fn verdict(&self) -> Verdict {
        let any = |s: Status| self.checks.iter().any(|c| c.status == s);
        if any(Status::Fail) {
            Verdict::Fail
        } else if any(Status::Error) {
            Verdict::Error
        } else if any(Status::Warn) {
            Verdict::Warn
        } else {
            Verdict::Pass
        }
    }

    /// 0: a correct client is fine (warnings allowed); 1: it hits a problem; 2: not checked.
    pub fn exit_code(&self) -> u8 {
        match self.verdict() {
            Verdict::Pass | Verdict::Warn => 0,
            Verdict::Fail => 1,
            Verdict::Error => 2,
        }
    }
}

/// Run every check once against `opts.url`.
pub async fn run(opts: &Options) -> Report {
    let mut report = Report::new(&opts.url);
    let headers: Vec<(String, String)> = opts
        .headers
        .iter()
        .map(|(n, v)| (n.clone(), v.expose().to_string()))
        .collect();
    let transport = match HttpTransport::new(opts.url.clone(), &headers, Limits::default()) {
        Ok(t) => Arc::new(t),
        Err(e) => {
            report.row(Status::Error, "initialize", format!("no HTTP client: {e}"));
            return report;
        }
    };
    let (inbox, mut requests) = Inbox::new();
    let inbox = Arc::new(inbox);
    let offered = opts.protocol_version.unwrap_or(ProtocolVersion::NEWEST);
    let session = match Session::open(transport, offered, inbox.clone(), opts.timeout).await {
        Ok(s) => Arc::new(s),
        Err(e) => {
            report.row(
                Status::Error,
                "initialize",
                format!("no session: {e}; nothing else was checked"),
            );
            return report;
        }
    };
    // A correct client answers the server's requests (ping) while it works.
    let answering = {
        let session = session.clone();
        tokio::spawn(async move {
            while let Some(req) = requests.recv().await {
                let _ = session.answer(&req.id, &req.method).await;
            }
        })
    };
    let started = Instant::now();
    let stream = session_rows(&session, &inbox, offered, &mut report).await;
    Checker {
        session: &session,
        inbox: &inbox,
        opts,
        started,
        report: &mut report,
    }
    .run(stream.as_ref())
    .await;
    if let Some(s) = stream {
        s.task.abort();
    }
    answering.abort();
    session.close().await;
    report
}

/// initialize, protocol version, capabilities and the GET stream. Returns its listener.
async fn session_rows(
    session: &Arc<Session>,
    inbox: &Arc<Inbox>,
    offered: ProtocolVersion,
    report: &mut Report,
) -> Option<Listener> {
    let info = session.info().clone();
    report.row(
        Status::Pass,
        "initialize",
        format!(
            "session open; server {:?} version {:?}",
            info.name, info.version
        ),
    );
    let chosen = &info.protocol_version;
    let how = if chosen == offered.as_str() {
        "the server accepted it"
    } else {
        "the server counter-offered a version this client speaks"
    };
    report.row(
        Status::Pass,
        "protocol_version",
        format!("{chosen} (offered {offered}; {how})"),
    );
    let (status, detail) = match (info.tools, info.list_changed) {
        (true, true) => (Status::Pass, "tools, tools.listChanged: true"),
        (true, false) => (
            Status::Info,
            "tools without listChanged: clients see changes only by re-listing",
        ),
        (false, _) => (
            Status::Warn,
            "no tools capability: a client must not list or call tools; tool checks skipped",
        ),
    };
    report.row(status, "capabilities", detail);
    let (opened, task) = match session.open_stream().await {
        Ok(Some(stream)) => {
            report.row(
                Status::Pass,
                "notification_stream",
                "GET answered with text/event-stream",
            );
            let listener = Listener::start(session.clone(), inbox.clone(), stream);
            (true, Some(listener))
        }
        Ok(None) if info.list_changed => {
            report.row(
                Status::Warn,
                "notification_stream",
                "GET answered 405 (no stream) although tools.listChanged is declared: \
                 list_changed can only ride on POST answers, and a client between requests \
                 never hears it (F3)",
            );
            (false, None)
        }
        Ok(None) => {
            report.row(
                Status::Info,
                "notification_stream",
                "GET answered 405: the server offers no stream (none is needed without listChanged)",
            );
            (false, None)
        }
        Err(e) => {
            report.row(
                Status::Warn,
                "notification_stream",
                format!(
                    "GET failed: {e}; the spec allows text/event-stream or 405, and a client \
                     hears no unsolicited notification"
                ),
            );
            (false, None)
        }
    };
    report.server = Some(ServerSummary {
        name: info.name,
        version: info.version,
        protocol_version: info.protocol_version,
        tools: info.tools,
        tools_list_changed: info.list_changed,
        notification_stream: Some(opened),
    });
    task
}

/// The checks that run on an open session.
struct Checker<'a> {
    session: &'a Session,
    inbox: &'a Inbox,
    opts: &'a Options,
    started: Instant,
    report: &'a mut Report,
}

impl Checker<'_> {
    async fn run(mut self, stream: Option<&Listener>) {
        let tools_capable = self.report.server.as_ref().is_some_and(|s| s.tools);
        let first = if tools_capable {
            self.listing().await
        } else {
            None
        };
        self.ping().await;
        if let Some(call) = &self.opts.call {
            self.call(call, first.as_ref()).await;
        }
        if let Some(window) = self.opts.listen_for {
            if tools_capable {
                self.listen(window, first.as_ref(), stream).await;
            } else {
                self.report.row(
                    Status::Info,
                    "list_changed",
                    "not waited for: the server declares no tools capability",
                );
            }
        }
    }

    async fn walk(&mut self, which: &'static str) -> Recorded {
        let mut pager = Recorder {
            session: self.session,
            pages: Vec::new(),
            kept: 0,
        };
        let limits = walker::WalkLimits {
            max_pages: self.opts.max_pages,
            max_bytes: self.opts.max_listing_bytes,
        };
        let report = walker::walk(&mut pager, limits).await;
        let recorded = Recorded {
            report,
            pages: pager.pages,
        };
        self.report.walks.push(recorded.summary(which));
        recorded
    }

    /// First walk, duplicates, names, second walk. Returns the first walk's tools if complete.
    async fn listing(&mut self) -> Option<ToolSet> {
        let notified_before = self.inbox.list_changed_count();
        let first = self.walk("first").await;
        let (status, detail) = first.verdict(self.opts.max_pages);
        self.report.row(status, "tools_list", detail);
        let dups = first.duplicate_names();
        if dups.is_empty() {
            self.report
                .row(Status::Pass, "duplicates", "no tool name listed twice");
        } else {
            self.report.row(
                Status::Fail,
                "duplicates",
                format!(
                    "listed more than once: {}; a client keeps one definition per name, and \
                     with offset cursors a shifted list also skips a tool (F11)",
                    names(&dups)
                ),
            );
        }
        let invalid = first.invalid_names();
        if invalid.is_empty() {
            self.report.row(
                Status::Pass,
                "tool_names",
                format!(
                    "{} name(s) follow the spec's rules (1-128 of A-Z a-z 0-9 _ - .)",
                    first.distinct_names()
                ),
            );
        } else {
            self.report.row(
                Status::Warn,
                "tool_names",
                format!(
                    "outside the spec's naming rules (SHOULD be 1-128 of A-Z a-z 0-9 _ - .): {}",
                    names(&invalid)
                ),
            );
        }
        let Ok(first_walk) = &first.report.result else {
            self.report.row(
                Status::Info,
                "stable_listing",
                "not compared: the first walk did not complete",
            );
            return None;
        };
        let first_tools = first_walk.tools.clone();
        let second = self.walk("second").await;
        let notified = self.inbox.list_changed_count() > notified_before;
        let (status, detail) = match &second.report.result {
            Err(e) => (
                Status::Fail,
                format!("the second walk failed where the first completed: {e}"),
            ),
            Ok(_) => compare(&first, &second, notified),
        };
        self.report.row(status, "stable_listing", detail);
        Some(first_tools)
    }

    async fn ping(&mut self) {
        let t = Instant::now();
        match self.session.request("ping", None).await {
            Ok(_) => self.report.row(
                Status::Pass,
                "ping",
                format!("answered in {}", elapsed(t.elapsed())),
            ),
            Err(e) => self.report.row(
                Status::Fail,
                "ping",
                format!("{e}; the receiver MUST answer ping promptly, and clients treat silence as a dead connection"),
            ),
        }
    }

    async fn call(&mut self, call: &Call, listed: Option<&ToolSet>) {
        let Some(listed) = listed else {
            self.report.row(
                Status::Error,
                "call",
                format!(
                    "{} not called: without a complete listing the side-effect guard cannot judge it",
                    call.tool
                ),
            );
            return;
        };
        let timeout = self.opts.timeout;
        let probe = ProbeConfig {
            tool: call.tool.clone(),
            arguments: call.arguments.clone(),
            interval: timeout,
            timeout,
            expect: Expect::default(),
            allow_side_effects: call.allow_side_effects,
        };
        if let Err((reason, why)) = functional::guard(&probe, listed) {
            let (status, hint) = if reason == ProbeFailure::SideEffectGuard {
                (
                    Status::Error,
                    " (on the command line: --allow-side-effects)",
                )
            } else {
                (Status::Fail, "")
            };
            self.report
                .row(status, "call", format!("{}: {why}{hint}", reason.as_str()));
            return;
        }
        let t = Instant::now();
        let answer = tokio::time::timeout(
            timeout,
            self.session
                .request("tools/call", Some(functional::call_params(&probe))),
        )
        .await;
        match functional::judge(answer, &probe.expect, timeout) {
            Ok(()) => self.report.row(
                Status::Pass,
                "call",
                format!(
                    "{} answered in {} without isError",
                    call.tool,
                    elapsed(t.elapsed())
                ),
            ),
            Err((reason, why)) => {
                self.report
                    .row(Status::Fail, "call", format!("{}: {why}", reason.as_str()))
            }
        }
    }

    /// Wait for list_changed (received at any time in this session) or a gap in the GET stream,
    /// re-walk, and say what changed since the first walk. A notification or gap after which
    /// nothing changed keeps the wait going.
    async fn listen(
        &mut self,
        window: Duration,
        first: Option<&ToolSet>,
        stream: Option<&Listener>,
    ) {
        let stream_gone = stream.is_none_or(|s| s.task.is_finished());
        let mut gaps = stream.map(|s| s.gaps.clone());
        let deadline = tokio::time::Instant::now() + window;
        let mut seen = 0u64;
        let mut gaps_seen = 0u32;
        let mut spurious = 0u32;
        loop {
            let woke = loop {
                if self.inbox.list_changed_count() != seen {
                    break Woke::Notified;
                }
                if gaps.as_ref().is_some_and(|g| *g.borrow() != gaps_seen) {
                    break Woke::Gap;
                }
                let wait = async {
                    tokio::select! {
                        _ = self.inbox.list_changed() => {}
                        _ = next_gap(&mut gaps) => {}
                    }
                };
                if tokio::time::timeout_at(deadline, wait).await.is_err() {
                    break Woke::Deadline;
                }
            };
            let at = self.started.elapsed();
            let (which, heard) = match woke {
                Woke::Deadline => {
                    let mut detail = format!(
                        "no notifications/tools/list_changed within {}",
                        humantime::format_duration(window)
                    );
                    if spurious > 0 {
                        detail.push_str(&format!(
                            " that changed the list ({spurious} arrived without a change, F14)"
                        ));
                    }
                    let lost_stream = !stream_gone && stream.is_some_and(|s| s.task.is_finished());
                    if stream_gone {
                        detail.push_str("; no GET stream was open to carry one");
                    } else if lost_stream {
                        detail.push_str("; the GET stream ended and could not be re-opened");
                    }
                    self.audit_silence(first, detail, lost_stream).await;
                    return;
                }
                Woke::Notified => {
                    seen = self.inbox.list_changed_count();
                    (
                        "list_changed",
                        format!("received {} into the session", elapsed(at)),
                    )
                }
                Woke::Gap => {
                    gaps_seen = gaps.as_ref().map_or(0, |g| *g.borrow());
                    let heard = format!(
                        "no notification, but the GET stream ended {} into the session and was \
                         re-opened",
                        elapsed(at)
                    );
                    ("stream_gap", heard)
                }
            };
            let rewalk = self.walk(which).await;
            let walk = match &rewalk.report.result {
                Ok(w) => w,
                Err(e) => {
                    self.report.row(
                        Status::Fail,
                        "list_changed",
                        format!("{heard}, but the re-walk failed: {e} (F5)"),
                    );
                    return;
                }
            };
            let Some(first) = first else {
                self.report.row(
                    Status::Pass,
                    "list_changed",
                    format!("{heard}; re-walk: {} tools", walk.tools.len()),
                );
                return;
            };
            let drift = ToolSet::diff(&walk.tools, first);
            if drift.is_empty() && tokio::time::Instant::now() < deadline {
                spurious += u32::from(matches!(woke, Woke::Notified));
                continue;
            }
            let status = match (drift.is_empty(), woke) {
                (true, _) => Status::Info,
                (false, Woke::Gap) => Status::Warn,
                (false, _) => Status::Pass,
            };
            let mut detail = format!(
                "{heard}; re-walk: {} tools; since the first walk: {}",
                walk.tools.len(),
                describe(&drift)
            );
            if status == Status::Warn {
                detail.push_str(
                    "; a notification sent in the gap is lost: only a client that re-lists after \
                     re-opening the stream catches up (F4)",
                );
            }
            self.report.row(status, "list_changed", detail);
            return;
        }
    }
}

/// What ended a wait of [`Checker::listen`].
#[derive(Debug, Clone, Copy)]
enum Woke {
    Notified,
    Gap,
    Deadline,
}

/// The GET stream, kept the way a correct client keeps it: re-opened after it ends (after the
/// server's `retry` hint, at most [`MAX_REOPENS`] times). Each end counts as a gap in `gaps`.
struct Listener {
    task: tokio::task::JoinHandle<()>,
    gaps: tokio::sync::watch::Receiver<u32>,
}

/// How often one check re-opens the GET stream.
const MAX_REOPENS: u32 = 8;

impl Listener {
    fn start(session: Arc<Session>, inbox: Arc<Inbox>, mut stream: NotificationStream) -> Self {
        let (tx, gaps) = tokio::sync::watch::channel(0u32);
        let task = tokio::spawn(async move {
            for reopens in 0.. {
                let end = stream.run(&inbox).await;
                tx.send_modify(|n| *n += 1);
                if reopens == MAX_REOPENS {
                    return;
                }
                let wait = end.retry.unwrap_or(Duration::from_secs(1));
                tokio::time::sleep(wait.min(Duration::from_secs(10))).await;
                match session.open_stream().await {
                    Ok(Some(next)) => stream = next,
                    _ => return,
                }
            }
        });
        Listener { task, gaps }
    }
}

/// The next gap; never, when there is no stream or it will not be re-opened again.
async fn next_gap(gaps: &mut Option<tokio::sync::watch::Receiver<u32>>) {
    if let Some(g) = gaps
        && g.changed().await.is_ok()
    {
        return;
    }
    std::future::pending().await
}

impl Checker<'_> {
    /// The window closed without a notification that changed the list: walk once more, the way
    /// the exporter's audit does. A list that changed anyway is what leaves clients stale: a
    /// failure when the server promised `listChanged` (F1), a warning when it never did (F2:
    /// clients can only learn by re-listing).
    ///
    /// When the GET stream ended during the window, the notification may have gone out on it:
    /// a correct client re-opens the stream and re-lists after the gap, as the exporter does,
    /// so it catches up — a warning (F4), not a failure.
    async fn audit_silence(&mut self, first: Option<&ToolSet>, quiet: String, lost_stream: bool) {
        let audit = self.walk("audit").await;
        let (Some(first), Ok(walk)) = (first, &audit.report.result) else {
            self.report.row(Status::Info, "list_changed", quiet);
            return;
        };
        let drift = ToolSet::diff(&walk.tools, first);
        if drift.is_empty() {
            self.report.row(
                Status::Info,
                "list_changed",
                format!("{quiet}; a final walk found the list unchanged"),
            );
            return;
        }
        let declared = self
            .report
            .server
            .as_ref()
            .is_some_and(|s| s.tools_list_changed);
        let (status, why) = if lost_stream {
            (
                Status::Warn,
                "a notification sent meanwhile was lost with the stream; a correct client \
                 re-opens it and re-lists after the gap (F4)",
            )
        } else if declared {
            (
                Status::Fail,
                "the server declares tools.listChanged, so clients wait for a notification that \
                 never came and keep calling a stale list (F1)",
            )
        } else {
            (
                Status::Warn,
                "the server declares no tools.listChanged, so clients only learn of it by \
                 re-listing (F2)",
            )
        };
        self.report.row(
            status,
            "list_changed",
            format!("{quiet}, yet the list changed: {}; {why}", describe(&drift)),
        );
    }
}

/// A pager that lets the walker drive the session and keeps, per page, what was served.
struct Recorder<'a> {
    session: &'a Session,
    pages: Vec<Page>,
    /// Entries kept so far over all pages, at most [`MAX_KEPT`].
    kept: usize,
}

/// At most this many (name, fingerprint) entries are kept per walk, duplicates included: the
/// walker bounds distinct tools, this bounds a server that repeats one name a million times.
const MAX_KEPT: usize = 2 * walker::MAX_TOOLS_PER_WALK;

/// What one page served.
struct Page {
    /// Named tools on the page.
    served: usize,
    /// (name, fingerprint) of each, in the order served, while under [`MAX_KEPT`].
    tools: Vec<(String, u64)>,
}

impl Pager for Recorder<'_> {
    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), McpError> {
        let params = cursor.map(|c| json!({ "cursor": c }));
        let (page, bytes) = self
            .session
            .request_within("tools/list", params, max_bytes)
            .await?;
        let named = page
            .get("tools")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|t| Some((t.get("name")?.as_str()?, t)));
        let mut served = 0;
        let mut tools = Vec::new();
        for (name, t) in named {
            served += 1;
            if self.kept < MAX_KEPT {
                self.kept += 1;
                tools.push((kept_name(name).0.into(), tool_fingerprint(t)));
            }
        }
        self.pages.push(Page { served, tools });
        Ok((page, bytes))
    }
}

/// A walk and what each page served.
struct Recorded {
    report: WalkReport,
    pages: Vec<Page>,
}

impl Recorded {
    fn served(&self) -> impl Iterator<Item = &(String, u64)> {
        self.pages.iter().flat_map(|p| &p.tools)
    }

    fn summary(&self, which: &'static str) -> WalkSummary {
        let tools = match &self.report.result {
            Ok(w) => w.tools.len(),
            Err(_) => self.pages.iter().map(|p| p.served).sum(),
        };
        WalkSummary {
            walk: which,
            pages: self.pages.iter().map(|p| p.served as u32).collect(),
            tools: tools as u32,
            complete: self.report.result.is_ok(),
        }
    }

    fn page_counts(&self) -> String {
        let counts: Vec<String> = self.pages.iter().map(|p| p.served.to_string()).collect();
        if counts.len() > 16 {
            format!("{} + … ({} pages)", counts[..16].join(" + "), counts.len())
        } else {
            counts.join(" + ")
        }
    }

    fn verdict(&self, max_pages: u32) -> (Status, String) {
        let n = self.report.requests;
        match &self.report.result {
            Ok(w) => (
                Status::Pass,
                format!(
                    "{} page(s) ({}), {} tools; cursors followed to the end",
                    w.pages,
                    self.page_counts(),
                    w.tools.len()
                ),
            ),
            Err(WalkError::RepeatedCursor) => (
                Status::Fail,
                format!(
                    "repeated cursor: page {n} returned a nextCursor this walk had already \
                     followed; a client without a guard loops forever (F9)"
                ),
            ),
            Err(WalkError::LoopCap) => (
                Status::Fail,
                format!(
                    "loop cap: still a nextCursor after {max_pages} pages (--max-pages); the \
                     cursors never end (F10)"
                ),
            ),
            Err(WalkError::Request {
                error,
                with_cursor: true,
            }) => (
                Status::Fail,
                format!(
                    "cursor error on page {n}: {error}; the server rejected a cursor it issued, \
                     so a client cannot see every tool (F8)"
                ),
            ),
            Err(e) => (Status::Fail, e.to_string()),
        }
    }

    fn distinct_names(&self) -> usize {
        let names: HashSet<&str> = self.served().map(|(n, _)| n.as_str()).collect();
        names.len()
    }

    fn duplicate_names(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        let dups = self
            .served()
            .filter(|(name, _)| !seen.insert(name.as_str()));
        first_of_each(dups.map(|(name, _)| name.as_str()))
    }

    fn invalid_names(&self) -> Vec<String> {
        let bad = self.served().filter(|(name, _)| !valid_tool_name(name));
        first_of_each(bad.map(|(name, _)| name.as_str()))
    }
}

/// Each distinct name once, in the order first seen.
fn first_of_each<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .filter(|n| seen.insert(*n))
        .map(str::to_string)
        .collect()
}

/// The second walk against the first: same names in the same order with the same definitions.
fn compare(first: &Recorded, second: &Recorded, notified: bool) -> (Status, String) {
    let a: Vec<&(String, u64)> = first.served().collect();
    let b: Vec<&(String, u64)> = second.served().collect();
    let (Ok(w1), Ok(w2)) = (&first.report.result, &second.report.result) else {
        unreachable!("compared walks are complete")
    };
    if a == b {
        return (
            Status::Pass,
            format!(
                "second walk: the same {} tools in the same order with the same definitions",
                w1.tools.len()
            ),
        );
    }
    let drift = ToolSet::diff(&w2.tools, &w1.tools);
    if drift.is_empty() {
        let at = a.iter().zip(&b).position(|(x, y)| x != y).unwrap_or(0);
        let name = |s: &[&(String, u64)]| {
            s.get(at)
                .map(|(n, _)| format!("{:?}", truncate(n, 64)))
                .unwrap_or_else(|| "nothing".into())
        };
        return (
            Status::Warn,
            format!(
                "same tools and definitions, another order (position {}: {} then {}); clients \
                 that compare lists or cache by position see a change that is not one",
                at + 1,
                name(&a),
                name(&b)
            ),
        );
    }
    if notified {
        (
            Status::Info,
            format!(
                "the list changed between the walks, and list_changed was received: {}",
                describe(&drift)
            ),
        )
    } else {
        (
            Status::Fail,
            format!(
                "two walks a moment apart differ and no list_changed arrived: {}; a client's \
                 cache is stale as soon as it is filled",
                describe(&drift)
            ),
        )
    }
}

/// "added a; removed b; changed c" (server = the later listing).
fn describe(d: &Drift) -> String {
    if d.is_empty() {
        return "no change".into();
    }
    let mut parts = Vec::new();
    for (what, list) in [
        ("added", &d.missing),
        ("removed", &d.extra),
        ("changed", &d.changed),
    ] {
        if !list.is_empty() {
            parts.push(format!("{what} {}", names(list)));
        }
    }
    parts.join("; ")
}

/// Up to [`MAX_NAMES_SHOWN`] names, quoted when they are not plain, then a count of the rest.
fn names(list: &[String]) -> String {
    let mut shown: Vec<String> = list
        .iter()
        .take(MAX_NAMES_SHOWN)
        .map(|n| {
            if valid_tool_name(n) {
                n.clone()
            } else {
                format!("{:?}", truncate(n, 64))
            }
        })
        .collect();
    if list.len() > MAX_NAMES_SHOWN {
        shown.push(format!("and {} more", list.len() - MAX_NAMES_SHOWN));
    }
    shown.join(", ")
}

/// "2.3 ms" below a second, "29.2 s" above.
fn elapsed(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::probe::walker::Walk;

    fn recorded(pages: &[&[(&str, u64)]], complete: bool) -> Recorded {
        let pages: Vec<Vec<(String, u64)>> = pages
            .iter()
            .map(|p| p.iter().map(|(n, f)| (n.to_string(), *f)).collect())
            .collect();
        let mut tools = ToolSet::new();
        let mut duplicates = 0;
        for (n, f) in pages.iter().flatten() {
            if !tools.insert(n.as_str().into(), *f) {
                duplicates += 1;
            }
        }
        let result = if complete {
            Ok(Walk {
                tools,
                pages: pages.len() as u32,
                cache: None,
            })
        } else {
            Err(WalkError::RepeatedCursor)
        };
        Recorded {
            report: WalkReport {
                result,
                requests: pages.len() as u32,
                answered: pages.len() as u32,
                duplicates,
                long_names: 0,
                bytes: 0,
            },
            pages: pages
                .into_iter()
                .map(|tools| Page {
                    served: tools.len(),
                    tools,
                })
                .collect(),
        }
    }

    #[test]
    fn identical_walks_pass_and_order_changes_warn() {
        let a = recorded(&[&[("a", 1), ("b", 2)], &[("c", 3)]], true);
        let same = recorded(&[&[("a", 1)], &[("b", 2), ("c", 3)]], true);
        assert_eq!(compare(&a, &same, false).0, Status::Pass);
        let swapped = recorded(&[&[("b", 2), ("a", 1)], &[("c", 3)]], true);
        let (s, d) = compare(&a, &swapped, false);
        assert_eq!(s, Status::Warn);
        assert!(d.contains("position 1: \"a\" then \"b\""), "{d}");
    }

    #[test]
    fn changed_walks_fail_unless_announced() {
        let a = recorded(&[&[("a", 1), ("b", 2)]], true);
        let b = recorded(&[&[("a", 9), ("c", 3)]], true);
        let (s, d) = compare(&a, &b, false);
        assert_eq!(s, Status::Fail);
        assert!(d.contains("added c; removed b; changed a"), "{d}");
        assert_eq!(compare(&a, &b, true).0, Status::Info);
    }

    #[test]
    fn duplicates_and_invalid_names_are_named_once() {
        let r = recorded(
            &[&[("a", 1), ("bad name", 2)], &[("a", 1), ("bad name", 2)]],
            false,
        );
        assert_eq!(r.duplicate_names(), vec!["a", "bad name"]);
        assert_eq!(r.invalid_names(), vec!["bad name"]);
        assert_eq!(
            r.summary("first"),
            WalkSummary {
                walk: "first",
                pages: vec![2, 2],
                tools: 4,
                complete: false
            }
        );
        let many: Vec<String> = (0..12).map(|i| format!("t{i}")).collect();
        assert!(names(&many).ends_with("t9, and 2 more"));
    }

    #[test]
    fn fail_outranks_error_and_warnings_exit_zero() {
        let url = url::Url::parse("http://u:pw@h/mcp?token=x").unwrap();
        let mut r = Report::new(&url);
        assert_eq!(r.url_redacted, "http://u:<redacted>@h/mcp?<redacted>");
        r.row(Status::Pass, "ping", "");
        r.row(Status::Info, "capabilities", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Pass, 0));
        r.row(Status::Warn, "tool_names", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Warn, 0));
        r.row(Status::Error, "call", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Error, 2));
        r.row(Status::Fail, "tools_list", "");
        assert_eq!((r.verdict(), r.exit_code()), (Verdict::Fail, 1));
    }

    #[test]
    fn arguments_and_versions_are_validated_without_echoing() {
        assert!(parse_arguments("{}").unwrap().is_empty());
        assert!(parse_arguments("[1]").is_err());
        let e = parse_arguments("{\"token\": secret").unwrap_err();
        assert!(!e.contains("secret"), "{e}");
        assert!(parse_protocol_version("2025-06-18").is_ok());
        assert!(parse_protocol_version("2026-07-28").is_err());
    }
}
