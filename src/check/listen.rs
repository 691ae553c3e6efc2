//! `--listen-for`: keeping the session open for `notifications/tools/list_changed`.
//!
//! The notification channel (the legacy GET stream or a modern listen stream) is kept by the
//! exporter's own [`ChannelKeeper`] — the same re-open policy — and what was heard is judged by
//! re-walking: a notification that changed
//! nothing, a change that came with no notification, and a change hidden in a stream gap are
//! different findings (F1, F2, F4, F14), so each wake-up says which it was.

use std::sync::Arc;
use std::time::Duration;

use super::recorder::{classified, elapsed};
use super::{Checker, Status};
use mcp_client::channel::{ChannelEvent, ChannelKeeper};
use mcp_client::listing::items::ItemSet;
use mcp_client::mcp::{Client, Era, Inbox};

impl Checker<'_> {
    /// Wait for list_changed (received at any time in this session) or a gap in the channel,
    /// re-walk, and say what changed since the first walk. A notification or gap after which
    /// nothing changed keeps the wait going.
    pub(super) async fn listen(
        &mut self,
        window: Duration,
        first: Option<&ItemSet>,
        stream: Option<&Listener>,
    ) {
        let stream_gone = stream.is_none_or(|s| !*s.open.borrow());
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
                    let lost_stream = !stream_gone && stream.is_some_and(|s| !*s.open.borrow());
                    let channel = self.session.channel_name();
                    if stream_gone {
                        detail.push_str(&format!("; no {channel} was open to carry one"));
                    } else if lost_stream {
                        detail
                            .push_str(&format!("; the {channel} ended and could not be re-opened"));
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
                        "no notification, but the {} ended {} into the session and was \
                         re-opened",
                        self.session.channel_name(),
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
                    format!("{heard}; re-walk: {} tools", walk.items.len()),
                );
                return;
            };
            let drift = ItemSet::diff(&walk.items, first);
            self.saw_change |= !drift.is_empty();
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
                walk.items.len(),
                classified(first, &walk.items, &self.definitions)
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

/// The notification channel, kept by the exporter's [`ChannelKeeper`]: re-opened after it
/// ends (the server's `retry` hint or backoff) for as long as the check runs. Each end counts
/// as a gap in `gaps`; `open` says whether it is open now.
pub(super) struct Listener {
    pub(super) task: tokio::task::JoinHandle<()>,
    gaps: tokio::sync::watch::Receiver<u32>,
    open: tokio::sync::watch::Receiver<bool>,
}

impl Listener {
    /// Keep `keeper`'s channel (opened already) for the rest of the check.
    pub(super) fn start(client: Arc<Client>, inbox: Arc<Inbox>, mut keeper: ChannelKeeper) -> Self {
        let (gap_tx, gaps) = tokio::sync::watch::channel(0u32);
        let (open_tx, open) = tokio::sync::watch::channel(keeper.is_open());
        let task = tokio::spawn(async move {
            loop {
                match keeper.next(&client, &inbox).await {
                    ChannelEvent::Opened { .. } => {
                        let _ = open_tx.send(true);
                    }
                    ChannelEvent::Lost { .. } => {
                        let _ = open_tx.send(false);
                        gap_tx.send_modify(|n| *n += 1);
                    }
                    ChannelEvent::Unavailable | ChannelEvent::Expired | ChannelEvent::Closed(_) => {
                        let _ = open_tx.send(false);
                        return;
                    }
                }
            }
        });
        Listener { task, gaps, open }
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
    /// When the channel ended during the window, the notification may have gone out on it:
    /// a correct client re-opens the stream and re-lists after the gap, as the exporter does,
    /// so it catches up — a warning (F4), not a failure.
    async fn audit_silence(&mut self, first: Option<&ItemSet>, quiet: String, lost_stream: bool) {
        let audit = self.walk("audit").await;
        let (Some(first), Ok(walk)) = (first, &audit.report.result) else {
            self.report.row(Status::Info, "list_changed", quiet);
            return;
        };
        let drift = ItemSet::diff(&walk.items, first);
        if drift.is_empty() {
            self.report.row(
                Status::Info,
                "list_changed",
                format!("{quiet}; a final walk found the list unchanged"),
            );
            return;
        }
        self.saw_change = true;
        let contract = self.contract(walk.cache.unwrap_or_default().hint.ttl);
        let (status, why) = if lost_stream {
            (
                Status::Warn,
                "a notification sent meanwhile was lost with the stream; a correct client \
                 re-opens it and re-lists after the gap (F4)",
            )
        } else if contract.announces {
            (
                Status::Fail,
                "the server declares tools.listChanged, so clients wait for a notification that \
                 never came and keep calling a stale list (F1)",
            )
        } else if contract.era == Era::Modern && !contract.promised() {
            (
                Status::Info,
                "the server promises nothing (no tools.listChanged, ttlMs 0): clients must \
                 re-list before every use; a client that caches anyway is stale after each change",
            )
        } else if contract.era == Era::Modern {
            (
                Status::Warn,
                "the server announces nothing: clients caching for its ttlMs serve the old list \
                 until that runs out (a change inside it breaks the promise)",
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
            format!(
                "{quiet}, yet the list changed: {}; {why}",
                classified(first, &walk.items, &self.definitions)
            ),
        );
    }
}
