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
//! `list_changed`, `recorder` the walks of any list it records and compares, `lists` the rows
//! of the lists beyond tools (prompts, resources, resource templates), [`pin`] the pinned
//! baseline, `legacy` what a 2025-era client of a modern server hears.

mod legacy;
mod listen;
mod lists;
mod model;
mod options;
pub mod pin;
mod recorder;
pub mod report;

pub use model::{
    CheckRow, ItemWalk, ListSummary, Report, ServerSummary, Status, Verdict, WalkSummary,
};
pub use options::{Call, Options, parse_arguments, parse_protocol_version};

use std::sync::Arc;
use std::time::Instant;

use crate::config::{Expect, ProbeConfig};
use crate::probe::contract::Contract;
use crate::probe::functional::{self, ProbeFailure};
use legacy::LegacyCheck;
use listen::Listener;
use mcp_client::channel::{ChannelEvent, ChannelKeeper};
use mcp_client::listing::changes::Definitions;
use mcp_client::listing::items::ItemSet;
use mcp_client::listing::list::{List, ListSet};
use mcp_client::mcp::{Client, Dialer, Era, Inbox, Responder};
use recorder::{compare, elapsed, names};

/// An open session of `check` or `pin`.
pub(crate) struct Opened {
    pub(crate) dialer: Dialer,
    pub(crate) session: Arc<Client>,
    pub(crate) inbox: Arc<Inbox>,
    pub(crate) requests: mcp_client::mcp::Requests,
}

/// Connect to `opts.endpoint` as the exporter's connections do. The error is a sentence for the
/// `initialize` row (no secrets: wire errors strip URLs).
pub(crate) async fn open(opts: &Options) -> Result<Opened, String> {
    let net = match opts.endpoint {
        crate::config::Endpoint::Http { ref url, .. } => {
            mcp_client::target_http::TargetHttp::new("check", &opts.http, url)
                .map_err(|e| format!("no HTTP client: {}: {}", e.step.as_str(), e.detail))?
        }
        crate::config::Endpoint::Command(_) => mcp_client::target_http::TargetHttp::plain(),
    };
    let dialer = crate::probe::connection::dialer(&opts.endpoint, &opts.headers, &net)
        .map_err(|e| format!("no HTTP client: {e}"))?;
    let (inbox, requests) = Inbox::new();
    let inbox = Arc::new(inbox);
    let observe = |_: &'static str, _, _| {};
    let session = Client::connect(
        &dialer,
        opts.protocol_version,
        inbox.clone(),
        opts.timeout,
        &observe,
    )
    .await
    .map_err(|e| format!("could not connect: {e}; nothing else was checked"))?;
    Ok(Opened {
        dialer,
        session: Arc::new(session),
        inbox,
        requests,
    })
}

/// Run every check once against `opts.endpoint`.
pub async fn run(opts: &Options) -> Report {
    let mut report = Report::new(&opts.endpoint);
    let Opened {
        dialer,
        session,
        inbox,
        requests,
    } = match open(opts).await {
        Ok(o) => o,
        Err(e) => {
            report.row(Status::Error, "initialize", e);
            return report;
        }
    };
    // A correct client answers the server's requests (ping) while it works.
    let answering = tokio::spawn(Responder::new(requests).run(session.clone()));
    let started = Instant::now();
    let stream = session_rows(&session, &inbox, opts, &mut report).await;
    let legacy = match (opts.legacy_clients, &dialer, session.era()) {
        (true, Dialer::Http { transport, .. }, Era::Modern) => {
            Some(LegacyCheck::open(transport.clone(), opts.timeout).await)
        }
        _ => None,
    };
    // Every list's walks are kept under one cap: twice a listing per list walked.
    let declared: ListSet = List::ALL
        .into_iter()
        .filter(|l| session.info().declares(*l).is_some())
        .collect();
    let changed = Checker {
        session: &session,
        definitions: Definitions::for_lists(opts.max_listing_bytes, 1, declared),
        param_headers: Default::default(),
        inbox: &inbox,
        opts,
        started,
        saw_change: false,
        report: &mut report,
    }
    .run(stream.as_ref())
    .await;
    if let Some(legacy) = legacy {
        legacy.row(changed, opts.timeout, &mut report).await;
    }
    if let Some(s) = stream {
        s.task.abort();
    }
    answering.abort();
    session.close().await;
    report
}

/// The connection (era, protocol version), capabilities and the notification channel. Returns
/// its listener.
async fn session_rows(
    session: &Arc<Client>,
    inbox: &Arc<Inbox>,
    opts: &Options,
    report: &mut Report,
) -> Option<Listener> {
    let info = session.info().clone();
    let era = session.era();
    let declared: Vec<&'static str> = List::ALL
        .into_iter()
        .filter(|l| info.declares(*l).is_some())
        .map(List::as_str)
        .collect();
    let opened_how = match era {
        Era::Legacy => "session open",
        Era::Modern => "modern era (no session): server/discover answered",
    };
    report.row(
        Status::Pass,
        "initialize",
        format!(
            "{opened_how}; server {:?} version {:?}",
            info.name, info.version
        ),
    );
    let chosen = &info.protocol_version;
    let how = match opts.protocol_version {
        Some(v) if v.as_str() == chosen => format!("pinned {v}; the server accepted it"),
        Some(v) => format!("offered {v}; the server counter-offered a version this client speaks"),
        None => format!("auto: the newest era the server serves is {}", era.as_str()),
    };
    report.row(
        Status::Pass,
        "protocol_version",
        format!("{chosen} ({how})"),
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
    let others: Vec<&str> = declared.iter().copied().filter(|l| *l != "tools").collect();
    let detail = if others.is_empty() {
        detail.to_string()
    } else {
        format!("{detail}; also lists {}", others.join(", "))
    };
    report.row(status, "capabilities", detail);
    let mut keeper = ChannelKeeper::new();
    let (opened, task) = match (keeper.open_now(session, inbox).await, era) {
        (
            ChannelEvent::Opened {
                tools_list_changed: true,
                ..
            },
            Era::Legacy,
        ) => {
            let detail = match session.channel_name() {
                "GET stream" => "GET answered with text/event-stream",
                _ => "notifications arrive on the session's own channel (stdio or HTTP+SSE)",
            };
            report.row(Status::Pass, "notification_stream", detail);
            (
                true,
                Some(Listener::start(session.clone(), inbox.clone(), keeper)),
            )
        }
        (
            ChannelEvent::Opened {
                tools_list_changed: true,
                ..
            },
            Era::Modern,
        ) => {
            report.row(
                Status::Pass,
                "notification_stream",
                "subscriptions/listen acknowledged with toolsListChanged",
            );
            (
                true,
                Some(Listener::start(session.clone(), inbox.clone(), keeper)),
            )
        }
        (ChannelEvent::Opened { .. }, _) => {
            let status = if info.list_changed {
                Status::Warn
            } else {
                Status::Info
            };
            report.row(
                status,
                "notification_stream",
                "subscriptions/listen acknowledged without toolsListChanged: the server will \
                 not announce tool list changes",
            );
            (false, None)
        }
        (ChannelEvent::Unavailable, era) if info.list_changed => {
            let detail = match era {
                Era::Legacy => {
                    "GET answered 405 (no stream) although tools.listChanged is declared: \
                     list_changed can only ride on POST answers, and a client between requests \
                     never hears it (F3)"
                }
                Era::Modern => {
                    "subscriptions/listen is not implemented although tools.listChanged is \
                     declared: no client can hear a change (F3)"
                }
            };
            report.row(Status::Warn, "notification_stream", detail);
            (false, None)
        }
        (ChannelEvent::Unavailable, _) => {
            report.row(
                Status::Info,
                "notification_stream",
                "the server offers no notification channel (none is needed without listChanged)",
            );
            (false, None)
        }
        (ChannelEvent::Lost { error, .. }, _) => {
            let e = error.map_or("ended at once".to_string(), |e| e.to_string());
            report.row(
                Status::Warn,
                "notification_stream",
                format!(
                    "{} failed: {e}; a client hears no unsolicited notification",
                    session.channel_name()
                ),
            );
            (false, None)
        }
        (ChannelEvent::Closed(e), _) => {
            report.row(
                Status::Warn,
                "notification_stream",
                format!("the session's channel ended: {e}"),
            );
            (false, None)
        }
        (ChannelEvent::Expired, _) => {
            report.row(
                Status::Warn,
                "notification_stream",
                "the session expired while opening the GET stream",
            );
            (false, None)
        }
    };
    report.server = Some(ServerSummary {
        channel: session.channel_name(),
        name: info.name,
        version: info.version,
        protocol_version: info.protocol_version,
        tools: info.tools,
        tools_list_changed: info.list_changed,
        notification_stream: Some(opened),
        lists: declared,
    });
    task
}

/// The checks that run on an open session.
struct Checker<'a> {
    session: &'a Client,
    /// Definitions of every walk, by fingerprint: what changes are classified with.
    definitions: Definitions,
    /// The first walk's `x-mcp-header` parameters, mirrored into headers by `--call`.
    param_headers: mcp_client::listing::walker::ParamHeaders,
    inbox: &'a Inbox,
    opts: &'a Options,
    started: Instant,
    /// The list changed while the check listened (`--listen-for`).
    saw_change: bool,
    report: &'a mut Report,
}

impl Checker<'_> {
    /// Returns whether the list changed while the check listened.
    async fn run(mut self, stream: Option<&Listener>) -> bool {
        let tools_capable = self.report.server.as_ref().is_some_and(|s| s.tools);
        // The other lists are walked first and reported after the tools: once the tool list's
        // walks are done, every walk is (a redeploy after them changes no first walk).
        let at = self.report.checks.len();
        let mut listed = self.other_lists().await;
        let other_rows = self.report.checks.len() - at;
        let first = if tools_capable {
            self.listing().await
        } else {
            None
        };
        self.report.checks[at..].rotate_left(other_rows);
        if let Some(pins) = &self.opts.pins {
            let tools = match (&first, tools_capable) {
                (Some(items), _) => lists::Listed::Complete(items.clone()),
                (None, true) => lists::Listed::Incomplete,
                (None, false) => lists::Listed::Undeclared,
            };
            listed.insert(0, (List::Tools, tools));
            self.pins(pins, &listed);
        }
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
        self.saw_change
    }

    /// First walk, duplicates, names, second walk. Returns the first walk's tools if complete.
    async fn listing(&mut self) -> Option<ItemSet> {
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
        let first_tools = first_walk.items.clone();
        self.param_headers = first_walk.param_headers.clone();
        self.contract_row(first_walk.cache.unwrap_or_default().hint.ttl);
        let second = self.walk("second").await;
        let notified = self.inbox.list_changed_count() > notified_before;
        let (status, detail) = match &second.report.result {
            Err(e) => (
                Status::Fail,
                format!("the second walk failed where the first completed: {e}"),
            ),
            Ok(_) => compare(&first, &second, notified, &self.definitions),
        };
        self.report.row(status, "stable_listing", detail);
        Some(first_tools)
    }

    /// What the server promises a caching client (docs/health.md): a promise made passes; a
    /// 2026-07-28 server that promises nothing is information (its clients must re-list before
    /// every use); a legacy one a warning (its clients cache anyway, F2).
    fn contract_row(&mut self, ttl: std::time::Duration) {
        let contract = self.contract(ttl);
        let status = match (contract.promised(), contract.era) {
            (true, _) => Status::Pass,
            (false, Era::Modern) => Status::Info,
            (false, Era::Legacy) => Status::Warn,
        };
        self.report.row(status, "contract", contract.words());
    }

    /// The server's contract with a caching client, `ttl` from a listing.
    fn contract(&self, ttl: std::time::Duration) -> Contract {
        let declared = self
            .report
            .server
            .as_ref()
            .is_some_and(|s| s.tools_list_changed);
        Contract::new(self.session.era(), declared, ttl)
    }

    /// Liveness: `ping` (legacy), `server/discover` (modern, where ping is gone).
    async fn ping(&mut self) {
        let t = Instant::now();
        let method = self.session.liveness_method();
        match self.session.liveness().await {
            Ok(()) => self.report.row(
                Status::Pass,
                "ping",
                format!("{method} answered in {}", elapsed(t.elapsed())),
            ),
            Err(e) => self.report.row(
                Status::Fail,
                "ping",
                format!("{method}: {e}; the server MUST answer promptly, and clients treat silence as a dead connection"),
            ),
        }
    }

    async fn call(&mut self, call: &Call, listed: Option<&ItemSet>) {
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
            self.session.call_tool(
                functional::call_params(&probe),
                self.param_headers
                    .get(probe.tool.as_str())
                    .map_or(&[][..], |p| &p[..]),
            ),
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
