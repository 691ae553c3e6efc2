//! One long-lived probe connection: the reference client's state machine, in either era.
//!
//! ```text
//! connect (era: detected or pinned) ──► open channel ──► walk (initial | reconnect) ──► loop {
//!     list_changed          → walk(notification) of the lists it announces
//!                                                     (single-flight: one more walk if mid-walk)
//!     channel ended         → re-open with backoff → walk(stream_gap)
//!     audit tick            → walk(audit), diff against the cache, never written into it
//!     liveness tick         → ping (legacy) | server/discover (modern); repeated failure → new session
//!     404 on the session id → session expired → new session → walk(reconnect)
//!     probe due (conn. 0)   → side-effect guard → tools/call → judge (after the first walk)
//! }
//! ```
//!
//! Every list the connection watches goes through this one loop: the tools always, and each of
//! prompts, resources and resource templates that the session's server declares and the target
//! watches (`lists`). Each list has its own view ([`super::list_view`]: cache, server view,
//! audit and TTL watches) and its own schedule; walks stay one at a time per connection (one
//! request connection), the tool list's first.
//!
//! The channel is the legacy GET stream or a modern `subscriptions/listen` stream
//! ([`mcp_client::channel`]); which walk runs next is [`super::schedule`]; whether a difference was
//! announced is [`super::audit`]; recording is [`super::events`]. This module only sequences.
//!
//! A session is *up* only once a request after connecting has been answered (a page, a liveness
//! check or a tool call): a server that accepts `initialize` and then answers nothing, or 404 to
//! everything, never shows as up. Likewise the reconnect backoff is reset only by such an
//! answer, so a server whose sessions die right after opening is retried ever more slowly.
//!
//! Everything that waits is a future the loop polls beside the others, so a slow server never
//! stops the connection from hearing a notification, and each connection is its own task, so it
//! never delays another.

use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use tokio::time::MissedTickBehavior;
use tracing::Instrument;

use super::Trigger;
use super::change_watch::TargetChanges;
use super::contract::Contract;
use super::events::Events;
use super::functional::{self, Failed, ProbeClock};
use super::legacy_watch::{LegacyVerdict, LegacyWatch};
use super::list_view::{ListView, Walked};
use super::schedule::WalkSchedule;
use super::status::ConnStatusHandle;
use crate::config::{Endpoint, HttpTransportKind, ProbeConfig, Secret, TargetConfig};
use crate::probe::metrics::ConnMetrics;
use mcp_client::backoff::Backoff;
use mcp_client::channel::{ChannelEvent, ChannelKeeper};
use mcp_client::listing::list::List;
use mcp_client::listing::walker::{self, Pager, WalkLimits, WalkReport};
use mcp_client::mcp::{
    Client, Dialer, Era, HttpTransport, Inbox, Limits, McpError, Reason, Responder, ServerInfo,
    SseEndpoint, stdio,
};
use mcp_client::target_http::TargetHttp;
use mcp_client::task::{Slot, poll_slot, sleep_opt};

/// Consecutive failed liveness checks after which the session is considered dead and re-opened.
const LIVENESS_FAILURES_BEFORE_RECONNECT: u32 = 3;

/// A finished probe run: its index, how long it took, the verdict.
type ProbeRun = (usize, Duration, Result<(), Failed>);
/// A finished walk: which of the connection's lists, its trigger, report, duration and when it
/// was requested.
type WalkRun = (usize, Trigger, WalkReport, Duration, tokio::time::Instant);

/// A watched list's walks in the current session.
struct ListSession {
    schedule: WalkSchedule,
    walking: Option<Walking>,
    /// A notification arrived while a refresh walk of this list was running.
    overlapped: bool,
    /// The list's notification count last seen.
    seen: u64,
}

/// The walk in flight, and the notifications it answers.
#[derive(Clone, Copy)]
struct Walking {
    trigger: Trigger,
    /// The `list_changed` count when it started: notifications already received then are
    /// covered by it (a burst of them is one walk).
    covers: u64,
    /// For a notification walk: whether a re-walk that finds nothing new is noise (F14). Not
    /// when its notifications arrived during the refresh before it: that one may have covered
    /// them already.
    noise_countable: bool,
}

/// Why a session ended.
enum SessionEnd {
    Shutdown,
    Expired,
    Dead(McpError),
}

/// The state one connection task owns.
pub struct Connection {
    /// The target's, shared by its connections.
    config: Arc<TargetConfig>,
    events: Events,
    /// The functional probes this connection runs (connection 0 runs the target's probes).
    probes: Vec<ProbeConfig>,
    dialer: Dialer,
    /// The lists watched: the tools first, then those of the other lists the session's server
    /// declares and the target watches.
    lists: Vec<ListView>,
    /// Its tools' `x-mcp-header` parameters (mirrored into headers when a probe calls them).
    param_headers: walker::ParamHeaders,
    /// The open session's era and what its server declares.
    declared: Option<(Era, ServerInfo)>,
    /// What a 2025-era client of this modern server hears (connection 0 of a modern session).
    /// Boxed: the other connections of a fleet would each hold its space.
    legacy: Option<Box<LegacyWatch>>,
    sessions: u64,
    /// Whether the current session has answered a request after connecting.
    alive: bool,
    /// Wait before the first session, so that many targets starting together are spread out.
    start_delay: Duration,
    index: u16,
    /// The target's definitions and pins, shared by its connections.
    changes: Option<Arc<TargetChanges>>,
}

/// Pages one list, counting every page through the connection's metrics.
struct ClientPager {
    list: List,
    client: Arc<Client>,
    metrics: Arc<ConnMetrics>,
    /// Where definitions are kept to classify changes.
    changes: Option<Arc<TargetChanges>>,
}

impl Pager for ClientPager {
    fn list(&self) -> List {
        self.list
    }

    fn drops_invalid_header_annotations(&self) -> bool {
        self.client.era() == Era::Modern
    }

    fn definition(&mut self, fingerprint: u64, tool: &serde_json::Value) {
        if let Some(c) = &self.changes {
            c.definitions.keep(fingerprint, tool);
        }
    }

    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(serde_json::Value, usize), McpError> {
        // Counted, not timed by method: a listing is timed as the walk a client waits for
        // (the tool list's).
        if self.list == List::Tools {
            self.metrics.tools_list_request();
        }
        let page = self.client.list_page(self.list, cursor, max_bytes);
        counted(&self.metrics, self.list.method(), page).await
    }
}

/// How a request ended, as the metrics record it.
fn outcome<T>(r: &Result<T, McpError>) -> Result<(), Reason> {
    r.as_ref().map(|_| ()).map_err(|e| e.reason)
}

/// Run a request and record it, timed by method.
async fn timed<T>(
    metrics: &ConnMetrics,
    method: &'static str,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let start = Instant::now();
    let r = fut.await;
    metrics.request(method, start.elapsed(), outcome(&r));
    r
}

/// Run a request and count it by method, its time left to the histogram of what it is part of
/// (see `ConnMetrics::request_untimed`).
async fn counted<T>(
    metrics: &ConnMetrics,
    method: &'static str,
    fut: impl Future<Output = Result<T, McpError>>,
) -> Result<T, McpError> {
    let r = fut.await;
    metrics.request_untimed(method, outcome(&r));
    r
}

/// How to reach an endpoint with the configured headers (the probe's targets and `check`).
/// `net`: the target's client and credentials, made once per target (see [`target_http`]) and
/// shared by its connections; unused for a command target.
pub fn dialer(
    endpoint: &Endpoint,
    headers: &[(String, Secret)],
    net: &Arc<TargetHttp>,
) -> Result<Dialer, McpError> {
    let headers: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.clone(), v.expose().to_string()))
        .collect();
    let limits = Limits::default();
    let sse = |url: &url::Url| SseEndpoint {
        net: net.clone(),
        url: url.clone(),
        headers: headers.clone(),
        limits,
    };
    Ok(match endpoint {
        Endpoint::Http { url, transport } => match transport {
            HttpTransportKind::Sse => Dialer::Sse(sse(url)),
            kind => Dialer::Http {
                transport: Arc::new(HttpTransport::with_net(
                    url.clone(),
                    &headers,
                    limits,
                    net.clone(),
                )?),
                sse_fallback: (*kind == HttpTransportKind::Auto).then(|| sse(url)),
            },
        },
        Endpoint::Command(spec) => Dialer::Stdio {
            command: stdio::Command {
                program: spec.command.to_string_lossy().into_owned(),
                args: spec.args.clone(),
                env: spec
                    .env
                    .iter()
                    .map(|(k, v)| (k.clone(), v.expose().to_string()))
                    .collect(),
                cwd: spec.cwd.clone(),
            },
            limits,
        },
    })
}

/// The client and credentials of a target, made once and shared by all its connections (one
/// token); a target with several connections has a connection pool for each, so each stays on
/// the instance its TCP connection reached (see [`TargetHttp::connection`]). A command target
/// gets a plain one it never uses.
pub fn target_http(config: &TargetConfig) -> Result<Arc<TargetHttp>, McpError> {
    match config.url() {
        None => Ok(TargetHttp::plain()),
        Some(url) => TargetHttp::with_pools(
            &config.name,
            &config.http,
            url,
            usize::from(config.settings.connections),
        )
        .map_err(|e| McpError::new(Reason::Auth, format!("{}: {}", e.step.as_str(), e.detail))),
    }
}

impl Connection {
    /// `net`: the target's [`target_http`], shared by its connections (this one sends through
    /// its pool).
    pub fn new(
        config: Arc<TargetConfig>,
        index: u16,
        metrics: ConnMetrics,
        status: ConnStatusHandle,
        net: &Arc<TargetHttp>,
    ) -> Result<Self, McpError> {
        let dialer = dialer(&config.endpoint, &config.headers, &net.connection(index))?;
        let probes = if index == 0 {
            config.probes.clone()
        } else {
            Vec::new()
        };
        Ok(Connection {
            events: Events::new(metrics, status, probes.len()),
            lists: vec![ListView::new(
                List::Tools,
                config.settings.notification_grace,
            )],
            config,
            probes,
            dialer,
            param_headers: Default::default(),
            declared: None,
            legacy: None,
            sessions: 0,
            alive: false,
            start_delay: Duration::ZERO,
            index,
            changes: None,
        })
    }

    /// Keep definitions in, and report listings to, the target's shared change state.
    pub fn with_changes(mut self, changes: Arc<TargetChanges>) -> Self {
        self.changes = Some(changes);
        self
    }

    /// Open the first session only after `delay`.
    pub fn starting_after(mut self, delay: Duration) -> Self {
        self.start_delay = delay;
        self
    }

    /// Run until `shutdown` turns true. Every log line of the connection carries its target
    /// and connection index from this span.
    ///
    /// Not an `async fn`: one would hold `self` beside the future it hands `self` to, and every
    /// idle connection of a fleet would keep both (4 KiB more per connection in a release
    /// build).
    pub fn run(self, shutdown: watch::Receiver<bool>) -> impl Future<Output = ()> + use<> {
        let span =
            tracing::info_span!("probe", target = %self.config.name, connection = self.index);
        self.run_sessions(shutdown).instrument(span)
    }

    /// The sessions, one after another, until shutdown. An `async` block, not an `async fn`:
    /// an `async fn` keeps its arguments twice in its future (as passed and as moved into the
    /// body), and `self` is 2 KiB that every idle connection of a fleet would hold again.
    #[allow(clippy::manual_async_fn)]
    fn run_sessions(
        mut self,
        mut shutdown: watch::Receiver<bool>,
    ) -> impl Future<Output = ()> + use<> {
        async move {
            let mut backoff = Backoff::default();
            tokio::select! {
                _ = shutdown.changed() => return,
                _ = tokio::time::sleep(self.start_delay) => {}
            }
            loop {
                if *shutdown.borrow() {
                    return;
                }
                let (inbox, requests) = Inbox::new();
                let inbox = Arc::new(inbox);
                let pinned = self.config.protocol_version.pinned();
                let metrics = self.events.metrics.clone();
                let observe =
                    move |method, elapsed, outcome| metrics.request(method, elapsed, outcome);
                let opened = tokio::select! {
                    _ = shutdown.changed() => return,
                    // Boxed: opening a session is the largest future of a connection's life and
                    // lasts a moment; inline, every idle connection would hold its space. The
                    // client is shared from here on: `opened` lives as long as the session, and
                    // a client inline would be 200 bytes of it.
                    r = Box::pin(async {
                        let client = Client::connect(
                            &self.dialer,
                            pinned,
                            inbox.clone(),
                            self.config.settings.request_timeout,
                            &observe,
                        );
                        client.await.map(Arc::new)
                    }) => r,
                };
                let end = match opened {
                    Ok(client) => {
                        let trigger = if self.sessions == 0 {
                            Trigger::Initial
                        } else {
                            Trigger::Reconnect
                        };
                        self.events.session_opened(&client, trigger);
                        self.declared = Some((client.era(), client.info().clone()));
                        self.watch_declared_lists();
                        self.judge();
                        self.sessions += 1;
                        // Not up until this session answers a request after connecting.
                        self.alive = false;
                        let mut responder = Responder::new(requests);
                        let end = self
                            .run_session(&client, &inbox, &mut responder, trigger, &mut shutdown)
                            .await;
                        self.legacy = None;
                        if self.alive {
                            // The session worked: whatever ended it is news, not a storm.
                            backoff.reset();
                        }
                        self.events.session_closed(!self.probes.is_empty());
                        if matches!(end, SessionEnd::Shutdown) {
                            Box::pin(client.close()).await;
                        }
                        end
                    }
                    Err(e) => {
                        self.events.session_failed(&e);
                        SessionEnd::Dead(e)
                    }
                };
                let delay = match end {
                    SessionEnd::Shutdown => return,
                    SessionEnd::Expired => {
                        // Re-initialize at once after a session that worked; sessions that expire
                        // before answering anything back off (a load balancer without affinity).
                        let d = if backoff.attempts() == 0 {
                            backoff.next_delay();
                            Duration::ZERO
                        } else {
                            backoff.next_delay()
                        };
                        self.events.session_expired(d);
                        d
                    }
                    SessionEnd::Dead(e) => {
                        let d = backoff.next_delay();
                        self.events.session_dead(&e, d);
                        d
                    }
                };
                tokio::select! {
                    _ = shutdown.changed() => return,
                    _ = tokio::time::sleep(delay) => {}
                }
            }
        }
    }

    async fn run_session(
        &mut self,
        client: &Arc<Client>,
        inbox: &Arc<Inbox>,
        responder: &mut Responder,
        first: Trigger,
        shutdown: &mut watch::Receiver<bool>,
    ) -> SessionEnd {
        // A new session: whatever was announced between the last one and this was not heard.
        for view in &mut self.lists {
            view.ttl.channel_gap();
        }
        // The channel is opened before the first walk, so a change during the walk is heard.
        let mut channel = ChannelKeeper::new();
        let opened = channel.open_now(client, inbox).await;
        if matches!(opened, ChannelEvent::Expired) {
            return SessionEnd::Expired;
        }
        self.events.channel(client, &opened);
        if let ChannelEvent::Closed(e) = opened {
            return SessionEnd::Dead(e);
        }

        let mut sessions: Vec<ListSession> = self
            .lists
            .iter()
            .map(|view| ListSession {
                schedule: WalkSchedule::new(first),
                walking: None,
                overlapped: false,
                seen: inbox.changed_count(view.list),
            })
            .collect();
        let mut walk: Slot<WalkRun> = None;
        let mut liveness: Slot<Result<Duration, McpError>> = None;
        let mut liveness_failures = 0u32;
        let mut probes = ProbeClock::new(self.probes.len());
        // Connection 0 of a modern session: what does a 2025-era client hear here?
        self.legacy = match (&self.dialer, client.era()) {
            (Dialer::Http { transport, .. }, Era::Modern)
                if self.index == 0 && self.config.settings.legacy_clients =>
            {
                Some(Box::new(LegacyWatch::start(
                    transport.clone(),
                    self.config.settings.request_timeout,
                    self.config.settings.notification_grace,
                )))
            }
            _ => None,
        };
        let mut probe: Slot<ProbeRun> = None;

        let start = tokio::time::Instant::now();
        let (ping_at, audit_at) = timer_phases(
            &self.config.name,
            self.index,
            self.config.settings.ping_interval,
            self.config.settings.audit_interval,
        );
        let every = |first, period| {
            let mut t = tokio::time::interval_at(start + first, period);
            t.set_missed_tick_behavior(MissedTickBehavior::Delay);
            t
        };
        let mut liveness_tick = every(ping_at, self.config.settings.ping_interval);
        let mut audit_tick = every(audit_at, self.config.settings.audit_interval);

        loop {
            if walk.is_none() {
                // The tool list's walks first: the lists are in that order.
                let next = sessions
                    .iter_mut()
                    .enumerate()
                    .find_map(|(i, s)| s.schedule.next().map(|t| (i, s, t)));
                if let Some((i, session, trigger)) = next {
                    walk = Some(self.start_walk(client, i, trigger));
                    session.walking = Some(Walking {
                        trigger,
                        covers: inbox.changed_count(self.lists[i].list),
                        noise_countable: !std::mem::take(&mut session.overlapped),
                    });
                }
            }
            // Probes start once a complete listing tells the guard what the tools are.
            let probe_at = (probe.is_none() && self.tools().server.is_some())
                .then(|| probes.next_at())
                .flatten();
            // One timer for every deadline of the loop: a timer of its own each cost 120 bytes
            // of every idle connection's future, five times over.
            let next_deadline = sessions
                .iter()
                .map(|s| s.schedule.retry_at())
                .chain(self.lists.iter().flat_map(ListView::deadlines))
                .chain([probe_at])
                .flatten()
                .min();
            tokio::select! {
                _ = shutdown.changed() => return SessionEnd::Shutdown,
                // The server's requests are answered here, not by a task of their own.
                Some(()) = responder.next(client) => {}
                _ = inbox.list_changed() => {
                    for (view, session) in self.lists.iter().zip(&mut sessions) {
                        let now = inbox.changed_count(view.list);
                        if now == session.seen {
                            continue;
                        }
                        // The resources notification announces both resource lists: each counts it.
                        self.events.list_changed(view.list, now - session.seen);
                        session.seen = now;
                        let refreshing = session.walking.filter(|w| w.trigger.refreshes_cache());
                        match refreshing {
                            // Received before the refresh in flight started: it answers them.
                            Some(w) if now <= w.covers => {}
                            // Coalesce: whatever walk is pending covers this notification too.
                            Some(_) => {
                                session.overlapped = true;
                                session.schedule.notified();
                            }
                            None => session.schedule.notified(),
                        }
                    }
                }
                (i, trigger, report, elapsed, requested) = poll_slot(&mut walk) => {
                    walk = None;
                    let list = self.lists[i].list;
                    let session = &mut sessions[i];
                    let walked = session.walking.take();
                    let noise_countable = walked.is_none_or(|w| w.noise_countable);
                    let heard_now = inbox.changed_count(list);
                    let heard_before = walked.map_or(heard_now, |w| w.covers);
                    let expired = report.result.as_ref().err()
                        .and_then(|e| e.mcp_error())
                        .is_some_and(|e| e.reason == Reason::SessionExpired);
                    if report.answered > 0 {
                        self.confirm_alive();
                    }
                    let complete = self.on_walk(i, trigger, report, elapsed, requested, session.schedule.refresh_pending(), heard_before..heard_now, noise_countable);
                    if expired {
                        return SessionEnd::Expired;
                    }
                    session.schedule.finished(trigger, complete);
                }
                _ = audit_tick.tick() => {
                    for session in &mut sessions {
                        session.schedule.audit_due();
                    }
                }
                _ = liveness_tick.tick(), if liveness.is_none() => {
                    let c = client.clone();
                    let m = self.events.metrics.clone();
                    liveness = Some(Box::pin(async move {
                        // Counted by method, timed once: in the ping histogram
                        // (`Events::liveness`), not a second time by method.
                        let t = Instant::now();
                        counted(&m, c.liveness_method(), c.liveness()).await.map(|_| t.elapsed())
                    }));
                }
                r = poll_slot(&mut liveness) => {
                    liveness = None;
                    self.events.liveness(r.as_ref().copied());
                    match r {
                        Ok(_) => {
                            liveness_failures = 0;
                            // Up again even after a failed check earlier in this session.
                            self.up();
                        }
                        Err(e) => {
                            if e.reason == Reason::SessionExpired {
                                return SessionEnd::Expired;
                            }
                            liveness_failures += 1;
                            if liveness_failures >= LIVENESS_FAILURES_BEFORE_RECONNECT {
                                return SessionEnd::Dead(e);
                            }
                        }
                    }
                }
                event = channel.next(client, inbox) => {
                    if matches!(event, ChannelEvent::Expired) {
                        return SessionEnd::Expired;
                    }
                    self.events.channel(client, &event);
                    if let ChannelEvent::Closed(e) = event {
                        return SessionEnd::Dead(e);
                    }
                    if matches!(event, ChannelEvent::Lost { .. }) {
                        for view in &mut self.lists {
                            view.ttl.channel_gap();
                        }
                    }
                    if let ChannelEvent::Opened { after_gap: true, .. } = event {
                        // Notifications sent while the channel was down are lost: re-list.
                        for session in &mut sessions {
                            session.schedule.refresh(Trigger::StreamGap);
                        }
                    }
                }
                _ = sleep_opt(next_deadline) => {
                    let now = tokio::time::Instant::now();
                    let due = |at: Option<tokio::time::Instant>| at.is_some_and(|t| t <= now);
                    for session in &mut sessions {
                        if due(session.schedule.retry_at()) {
                            session.schedule.retry_wait_over();
                        }
                    }
                    let grace = self.config.settings.notification_grace;
                    let mut judge = false;
                    for view in &mut self.lists {
                        let heard = inbox.changed_count(view.list);
                        if due(view.audit.deadline()) && view.audit.grace_over(heard) {
                            self.events.unannounced(view.list, grace);
                            judge = true;
                        }
                        if due(view.ttl.deadline())
                            && let Some(ttl) = view.ttl.grace_over(heard)
                        {
                            self.events.ttl_violation(view.list, ttl);
                            judge = true;
                        }
                        if due(view.ttl.broken_until()) {
                            // Every client that held the broken promise has re-fetched by now.
                            view.ttl.broken_over();
                            judge = true;
                        }
                    }
                    if judge {
                        self.judge();
                    }
                    if due(probe_at)
                        && let Some(i) = probes.take_due()
                    {
                        let p = self.probes[i].clone();
                        probes.ran(i, p.interval);
                        match self.tools().server.as_ref().map(|s| functional::guard(&p, s)) {
                            Some(Err(refused)) => self.probe_done(i, Duration::ZERO, Err(refused)),
                            _ => {
                                let annotated = self.param_headers.get(p.tool.as_str()).cloned().unwrap_or_default();
                                probe = Some(start_probe(client, &self.events.metrics, i, p, annotated));
                            }
                        }
                    }
                }
                verdict = legacy_next(&mut self.legacy) => {
                    self.events.legacy_path(verdict);
                }
                (i, elapsed, verdict) = poll_slot(&mut probe) => {
                    probe = None;
                    if verdict.is_ok() {
                        self.confirm_alive();
                    }
                    self.probe_done(i, elapsed, verdict);
                }
            }
        }
    }

    /// The session answered a request after connecting: up, the first time in a session (a
    /// failed liveness check later takes that back until one passes again).
    fn confirm_alive(&mut self) {
        if !self.alive {
            self.up();
        }
    }

    fn up(&mut self) {
        self.alive = true;
        self.events.up();
    }

    /// The tool list's view.
    fn tools(&self) -> &ListView {
        &self.lists[0]
    }

    /// After a session opened: watch the other lists its server declares and the target
    /// watches, keeping the views of those still declared and dropping the rest.
    fn watch_declared_lists(&mut self) {
        let Some((_, info)) = &self.declared else {
            return;
        };
        let watched = self.config.settings.lists;
        let wanted: Vec<List> = List::ALL
            .into_iter()
            .filter(|l| *l == List::Tools || (watched.contains(*l) && info.declares(*l).is_some()))
            .collect();
        let grace = self.config.settings.notification_grace;
        let mut views = std::mem::take(&mut self.lists).into_iter().peekable();
        let mut kept = Vec::with_capacity(wanted.len());
        for list in &wanted {
            while views.next_if(|v| v.list < *list).is_some_and(|gone| {
                self.events.list_watched(gone.list, false);
                true
            }) {}
            match views.next_if(|v| v.list == *list) {
                Some(view) => kept.push(view),
                None => {
                    self.events.list_watched(*list, true);
                    kept.push(ListView::new(*list, grace));
                }
            }
        }
        for gone in views {
            self.events.list_watched(gone.list, false);
        }
        self.lists = kept;
    }

    fn start_walk(
        &self,
        client: &Arc<Client>,
        index: usize,
        trigger: Trigger,
    ) -> Pin<Box<dyn Future<Output = WalkRun> + Send>> {
        let list = self.lists[index].list;
        self.events.walk_started(list, trigger);
        let mut pager = ClientPager {
            list,
            client: client.clone(),
            metrics: self.events.metrics.clone(),
            changes: self.changes.clone(),
        };
        let limits = WalkLimits {
            max_pages: self.config.settings.max_pages,
            max_bytes: self.config.settings.max_listing_bytes,
        };
        Box::pin(async move {
            let requested = tokio::time::Instant::now();
            let t = Instant::now();
            let report = walker::walk(&mut pager, limits).await;
            (index, trigger, report, t.elapsed(), requested)
        })
    }

    /// Apply a finished walk of the list at `index`. Returns whether it completed.
    #[allow(clippy::too_many_arguments)]
    fn on_walk(
        &mut self,
        index: usize,
        trigger: Trigger,
        report: WalkReport,
        elapsed: Duration,
        requested: tokio::time::Instant,
        notified_meanwhile: bool,
        heard: std::ops::Range<u64>,
        noise_countable: bool,
    ) -> bool {
        let list = self.lists[index].list;
        self.events.walk_finished(list, trigger, &report, elapsed);
        let Ok(walk) = report.result else {
            return false;
        };
        let ttl = walk.cache.unwrap_or_default().hint.ttl;
        let grace = self.config.settings.notification_grace;
        let walked = Walked {
            trigger,
            items: walk.items,
            ttl,
            requested,
            notified_meanwhile,
            heard,
            noise_countable,
        };
        let view = &mut self.lists[index];
        let applied = view.apply(walked, grace);
        let server = view
            .server
            .clone()
            .expect("a complete walk sets the server view");
        match applied.refreshed_unchanged {
            Some(unchanged) => self
                .events
                .cache_replaced(list, trigger, &server, unchanged),
            None => self.events.audited(list),
        }
        if let (Some(before), Some(shared)) = (&applied.before, &self.changes) {
            let defs = &shared.definitions;
            let changes = mcp_client::listing::changes::changes_in(list, before, &server, defs);
            if !changes.is_empty() {
                self.events.tool_changes(list, changes);
            }
        }
        if let Some(shared) = &self.changes {
            shared.listing(self.index, list, &server);
        }
        if list == List::Tools {
            let changed = applied.before.as_ref().is_some_and(|s| *s != server);
            if let (true, Some(legacy)) = (changed, &mut self.legacy) {
                legacy.change_seen();
            }
            self.param_headers = walk.param_headers;
        }
        self.events.drift(list, &applied.drift);
        if applied.diverged {
            self.events.diverged(list, &applied.drift);
        }
        self.judge();
        true
    }

    /// Judge each list by its server's contract: what it promises a caching client, and
    /// whether a promise is broken now (see [`super::contract`]).
    fn judge(&mut self) {
        let Some((era, info)) = &self.declared else {
            return;
        };
        for view in &self.lists {
            let announces = info.declares(view.list).unwrap_or(false);
            let contract = Contract::new(*era, announces, view.listing_ttl);
            self.events
                .judged(view.list, &contract, contract.stale(view.facts()));
        }
    }

    fn probe_done(&mut self, index: usize, elapsed: Duration, verdict: Result<(), Failed>) {
        let tool = &self.probes[index].tool;
        self.events.probe_done(index, tool, elapsed, verdict);
    }
}

/// When a session's first liveness check and first audit are due, after it opened.
///
/// The audit comes at a fraction of its interval in [1/2, 1) drawn from the target's name and
/// the connection's index (FNV-1a: the same on every run and replica, different between
/// connections), so connections opened together do not audit in lockstep. The liveness check
/// runs half its period out of phase with the audits: with an audit interval a multiple of the
/// ping interval (30 s and 15 s by default) a ping never lands on an audit walk, nor on the walk
/// that opens the session; on HTTP/1 the overlap would need a second request connection.
fn timer_phases(target: &str, index: u16, ping: Duration, audit: Duration) -> (Duration, Duration) {
    let mut hash = 0xcbf2_9ce4_8422_2325u64;
    for b in target.bytes().chain(index.to_le_bytes()) {
        hash = (hash ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let fraction = (hash >> 11) as f64 / (1u64 << 53) as f64;
    let audit_at = audit.mul_f64(0.5 + fraction / 2.0);
    let ping_ns = ping.as_nanos().max(1);
    let phase = (audit_at.as_nanos() + ping_ns / 2) % ping_ns;
    // Half a period clear of the session's opening walk too.
    let ping_at = if phase < ping_ns / 2 {
        phase + ping_ns
    } else {
        phase
    };
    (Duration::from_nanos(ping_at as u64), audit_at)
}

fn start_probe(
    client: &Arc<Client>,
    metrics: &Arc<ConnMetrics>,
    index: usize,
    p: ProbeConfig,
    annotated: Box<[mcp_client::mcp::param_headers::HeaderParam]>,
) -> Pin<Box<dyn Future<Output = ProbeRun> + Send>> {
    let c = client.clone();
    let m = metrics.clone();
    Box::pin(async move {
        let t = Instant::now();
        let call = timed(
            &m,
            "tools/call",
            c.call_tool(functional::call_params(&p), &annotated),
        );
        let answer = tokio::time::timeout(p.timeout, call).await;
        let verdict = functional::judge(answer, &p.expect, p.timeout);
        (index, t.elapsed(), verdict)
    })
}

/// The next verdict of the legacy watch; pending forever without one. The watch's future is
/// boxed: the main loop's `select!` holds every branch's future inline, and this one (~380
/// bytes) would be reserved in every connection's future for the one connection of a target
/// that keeps a legacy watch.
async fn legacy_next(watch: &mut Option<Box<LegacyWatch>>) -> LegacyVerdict {
    match watch {
        Some(w) => Box::pin(w.next()).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod footprint {
    use std::time::Duration;

    use crate::config::{Endpoint, ProtocolChoice, TargetConfig, TargetSettings};

    /// An idle connection's task holds its whole future: 10,000 connections hold 10,000 of
    /// them. Opening a session (the largest future) is boxed so that it is not reserved inline
    /// (22 KiB in a debug build before, 6.7 KiB after), and `run` is no `async fn` holding
    /// `self` beside the future it is moved into (10.5 KiB in a release build before, 6.5 KiB
    /// after), nor is `run_sessions` (an `async fn` keeps `self` twice: 6.5 → 4.6 KiB), and the
    /// target's configuration is shared by its connections, not copied into each (→ 3.9 KiB),
    /// and the main loop's five deadlines share one timer (→ 3.4 KiB). Then the log limiters
    /// were allocated at their first line (→ 2.6 KiB), and the legacy watch (its state and its
    /// `select!` branch, used by one connection of a target) and the open session's client
    /// were boxed (→ 2.0 KiB).
    /// The server's requests are answered in the same future, not by a second task.
    #[tokio::test]
    async fn an_idle_connection_future_stays_small() {
        let telemetry = crate::telemetry::Telemetry::new();
        let t = TargetConfig {
            name: "x".into(),
            endpoint: Endpoint::http(url::Url::parse("http://127.0.0.1:1/mcp").expect("URL")),
            protocol_version: ProtocolChoice::Auto,
            headers: vec![],
            settings: TargetSettings {
                request_timeout: Duration::from_secs(5),
                notification_grace: Duration::from_secs(3),
                ..Default::default()
            },
            probes: vec![],
            http: Default::default(),
            labels: Default::default(),
            pins: None,
        };
        let metrics = telemetry.add_target("x", 1, &[]);
        let board = std::sync::Arc::new(crate::probe::status::StatusBoard::default());
        let status = board.add(&t);
        let net = super::target_http(&t).expect("a plain client");
        let conn = super::Connection::new(
            std::sync::Arc::new(t),
            0,
            metrics.connection(0),
            status.connection(0),
            &net,
        )
        .expect("a connection");
        let (_tx, rx) = tokio::sync::watch::channel(false);
        let size = std::mem::size_of_val(&conn.run(rx));
        assert!(size < 2200, "a connection's future is {size} bytes");
    }
}
