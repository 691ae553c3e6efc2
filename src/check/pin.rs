//! `check --pins FILE` and `mcp_exporter pin URL`: the pinned baseline from the command line.
//!
//! `pin` lists the server once with the exporter's own client and walker (the same caps and
//! guards as `check`) and writes the pins file ([`pins::render`]): every tool's canonical
//! fingerprint and definition, for review and commit. `check --pins` compares the first walk
//! with such a file: any pinned tool served with another definition (its class and paths
//! named), missing, or any tool nobody pinned fails the check, so a server author's CI notices
//! a changed tool before a deploy does.

use serde_json::Value;

use super::recorder::{names, one_change};
use super::{Checker, Options, Status, open};
use mcp_client::listing::changes::{pin_change, pins};
use mcp_client::listing::items::ItemSet;
use mcp_client::listing::walker::{self, Pager, WalkLimits};
use mcp_client::mcp::Responder;

impl Checker<'_> {
    /// The `pins` row: the first walk against `--pins`.
    pub(super) fn pins(&mut self, pinned: &pins::Pins, listed: Option<&ItemSet>) {
        let Some(listed) = listed else {
            self.report.row(
                Status::Error,
                "pins",
                "not compared: the first walk did not complete",
            );
            return;
        };
        let r = pins::compare(pinned, listed, |fp| self.definitions.get(fp));
        if r.is_clean() {
            self.report.row(
                Status::Pass,
                "pins",
                format!(
                    "all {} pinned tools are served as pinned; no unpinned tool",
                    pinned.tools.len()
                ),
            );
            return;
        }
        let mut parts = Vec::new();
        let mismatches: Vec<String> = r
            .mismatches()
            .map(|(name, m)| match m {
                pins::Mismatch::Absent => {
                    format!("{} (pinned, not listed)", names(&[name.to_string()]))
                }
                m => {
                    let mut c = pin_change(name, m);
                    if c.description_changed {
                        c.change = if c.change == "compatible" {
                            "description"
                        } else {
                            c.change
                        };
                    }
                    one_change(&c)
                }
            })
            .collect();
        if !mismatches.is_empty() {
            let shown = mismatches.len().min(10);
            let mut text = format!("differ from the pins: {}", mismatches[..shown].join(", "));
            if mismatches.len() > shown {
                text.push_str(&format!(", and {} more", mismatches.len() - shown));
            }
            parts.push(text);
        }
        if !r.unpinned.is_empty() {
            parts.push(format!("not pinned: {}", names(&r.unpinned)));
        }
        self.report.row(
            Status::Fail,
            "pins",
            format!(
                "{}; approve a change by re-pinning (mcp_exporter pin URL > FILE)",
                parts.join("; ")
            ),
        );
    }
}

/// Read `--pins FILE` before any request; the error names the file and the field.
pub fn load_pins(path: &std::path::Path) -> Result<pins::Pins, String> {
    pins::Pins::load(path).map_err(|e| format!("--pins: {e}"))
}

/// Keeps every listed definition, in order, for the pins file.
struct Collect<'a> {
    session: &'a mcp_client::mcp::Client,
    tools: Vec<Value>,
}

impl Pager for Collect<'_> {
    fn drops_invalid_header_annotations(&self) -> bool {
        self.session.era() == mcp_client::mcp::Era::Modern
    }

    fn definition(&mut self, _fingerprint: u64, tool: &Value) {
        self.tools.push(tool.clone());
    }

    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), mcp_client::mcp::McpError> {
        self.session.tools_list_page(cursor, max_bytes).await
    }
}

/// List the server once and render its pins file. The error says why no file was written.
pub async fn pin(opts: &Options) -> Result<String, String> {
    let opened = open(opts).await?;
    let session = opened.session.clone();
    let answering = tokio::spawn(Responder::new(opened.requests).run(session.clone()));
    let mut pager = Collect {
        session: &session,
        tools: Vec::new(),
    };
    let limits = WalkLimits {
        max_pages: opts.max_pages,
        max_bytes: opts.max_listing_bytes,
    };
    let report = walker::walk(&mut pager, limits).await;
    answering.abort();
    let tools = pager.tools;
    session.close().await;
    match report.result {
        Ok(_) => Ok(pins::render(&tools)),
        Err(e) => Err(format!("the listing did not complete: {e}")),
    }
}
