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
//!
//! The run (this file) drives the session and the checks; `options` is what was asked,
//! `model` the report it fills, [`report`] its rendering, `listen` the wait for
//! `list_changed`, `recorder` the walks it records and compares.

mod listen;
mod model;
mod options;
mod recorder;
pub mod report;

pub use model::{CheckRow, Report, ServerSummary, Status, Verdict, WalkSummary};
pub use options::{Call, Options, parse_arguments, parse_protocol_version};

use std::sync::Arc;
use std::time::Instant;

use crate::config::{Expect, ProbeConfig};
use crate::mcp::{HttpTransport, Inbox, Limits, ProtocolVersion, Session};
use crate::probe::functional::{self, ProbeFailure};
use crate::probe::toolset::ToolSet;
use listen::Listener;
use recorder::{compare, elapsed, names};

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
}
