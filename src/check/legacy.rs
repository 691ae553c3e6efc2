//! `--legacy-clients`: what a 2025-era client of a modern server hears of tool list changes.
//!
//! The exporter's legacy watch ([`crate::probe::legacy_watch`]) measures it over time; `check`
//! runs once, so it says what it can: a legacy session that declares no `listChanged`, or gets
//! no GET stream, is deaf at once; one that declares and streams is tested only when the list
//! changes while `check` listens (`--listen-for`): a `list_changed` on the legacy GET stream
//! within `--timeout` of the change means its clients hear it.

use std::sync::Arc;
use std::time::Duration;

use super::{Report, Status};
use crate::probe::legacy_watch::LegacyVerdict;
use mcp_client::mcp::client::{self, LegacyPath};
use mcp_client::mcp::{HttpTransport, Inbox, McpError, Session};

/// The legacy session `check` keeps while it runs.
pub(super) enum LegacyCheck {
    Known(LegacyVerdict),
    Streaming {
        session: Box<Session>,
        inbox: Arc<Inbox>,
        reader: tokio::task::JoinHandle<()>,
    },
    Failed(McpError),
}

impl LegacyCheck {
    /// Open the legacy session on the modern session's transport (before the listing, so a
    /// change while `check` listens reaches its stream too).
    pub(super) async fn open(transport: Arc<HttpTransport>, timeout: Duration) -> Self {
        let (inbox, _requests) = Inbox::new();
        let inbox = Arc::new(inbox);
        match client::legacy_path(transport, timeout, inbox.clone()).await {
            Ok(LegacyPath::NotServed) => LegacyCheck::Known(LegacyVerdict::NotServed),
            Ok(LegacyPath::DeclaresNone) => LegacyCheck::Known(LegacyVerdict::DeclaresNone),
            Ok(LegacyPath::NoStream) => LegacyCheck::Known(LegacyVerdict::NoStream),
            Ok(LegacyPath::Streaming { session, stream }) => {
                let reading = inbox.clone();
                let reader = tokio::spawn(async move {
                    stream.run(&reading).await;
                });
                LegacyCheck::Streaming {
                    session,
                    inbox,
                    reader,
                }
            }
            Err(e) => LegacyCheck::Failed(e),
        }
    }

    /// The row, once the rest of the check ran: `changed` says whether the list changed while
    /// it listened; the legacy stream then has `wait` to carry it.
    pub(super) async fn row(self, changed: bool, wait: Duration, report: &mut Report) {
        let verdict = match self {
            LegacyCheck::Known(v) => v,
            LegacyCheck::Failed(e) => {
                report.row(
                    Status::Info,
                    "legacy_clients",
                    format!("the legacy path could not be checked: {e}"),
                );
                return;
            }
            LegacyCheck::Streaming {
                session,
                inbox,
                reader,
            } => {
                let heard = async {
                    while inbox.list_changed_count() == 0 {
                        inbox.list_changed().await;
                    }
                };
                let verdict = if !changed {
                    LegacyVerdict::Untested
                } else if tokio::time::timeout(wait, heard).await.is_ok() {
                    LegacyVerdict::Delivered
                } else {
                    LegacyVerdict::StreamSilent
                };
                reader.abort();
                session.close().await;
                verdict
            }
        };
        let (status, hint) = match verdict {
            LegacyVerdict::Delivered => (Status::Pass, ""),
            LegacyVerdict::NotServed => (Status::Info, ""),
            LegacyVerdict::Untested => (
                Status::Info,
                "; whether it delivers is measured on a change: run with --listen-for while the \
                 list changes, or watch mcp_probe_legacy_path_hears_changes",
            ),
            LegacyVerdict::DeclaresNone | LegacyVerdict::NoStream | LegacyVerdict::StreamSilent => {
                (Status::Warn, "")
            }
        };
        report.row(
            status,
            "legacy_clients",
            format!("{}{hint}", verdict.words()),
        );
    }
}
