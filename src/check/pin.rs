//! `check --pins FILE` and `mcp_exporter pin URL`: the pinned baseline from the command line.
//!
//! `pin` lists every list the server declares (tools, prompts, resources, resource templates)
//! once with the exporter's own client and walker (the same caps and guards as `check`) and
//! writes the pins file ([`pins::render_lists`]): every item's canonical fingerprint and
//! definition, a section per list, for review and commit. `check --pins` compares each list's
//! first walk with the file's section for it, one row per pinned list (`pins` for tools, as
//! ever; `prompts_pins`, `resources_pins`, `resource_templates_pins`): any pinned item served
//! with another definition (its class and paths named), missing, or any item nobody pinned
//! fails the check, so a server author's CI notices a changed prompt, resource or template
//! before a deploy does. A list the file has no section for is not judged, so a pins file
//! written before the other lists were pinned is judged exactly as it was.

use serde_json::Value;

use super::lists::Listed;
use super::recorder::{names, nouns, one_change};
use super::{Checker, Options, Status, open};
use mcp_client::listing::changes::{pin_change, pins};
use mcp_client::listing::items::ItemSet;
use mcp_client::listing::list::List;
use mcp_client::listing::walker::{self, Pager, WalkLimits};
use mcp_client::mcp::Responder;

/// The row id of `list`'s pins row (`pins` for tools, as before the other lists were pinned).
fn row_id(list: List) -> &'static str {
    match list {
        List::Tools => "pins",
        List::Prompts => "prompts_pins",
        List::Resources => "resources_pins",
        List::ResourceTemplates => "resource_templates_pins",
    }
}

impl Checker<'_> {
    /// One row per list the pins file pins: each list's first walk against its section.
    /// `listed` has what `check` knows of each list's listing.
    pub(super) fn pins(&mut self, pinned: &pins::Pins, listed: &[(List, Listed)]) {
        for (list, section) in pinned.lists() {
            let listing = listed
                .iter()
                .find(|(l, _)| *l == list)
                .map_or(&Listed::Undeclared, |(_, l)| l);
            self.pins_row(list, section, listing);
        }
    }

    /// The pins row of `list`.
    fn pins_row(&mut self, list: List, pinned: &pins::Pinned, listed: &Listed) {
        let id = row_id(list);
        let (one, many) = nouns(list);
        let empty = ItemSet::new();
        let (listed, undeclared) = match listed {
            Listed::Complete(items) => (items, false),
            Listed::Undeclared => (&empty, true),
            Listed::NotImplemented => (&empty, false),
            Listed::Incomplete => {
                let detail = match list {
                    List::Tools => "not compared: the first walk did not complete".to_string(),
                    _ => format!("not compared: the first walk of the {many} did not complete"),
                };
                self.report.row(Status::Error, id, detail);
                return;
            }
        };
        let r = pins::compare_pinned(list, pinned, listed, |fp| self.definitions.get(fp));
        if r.is_clean() {
            self.report.row(
                Status::Pass,
                id,
                format!(
                    "all {} pinned {many} are served as pinned; no unpinned {one}",
                    pinned.len()
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
            if undeclared {
                text.push_str(&format!(
                    " (the server declares no {} capability)",
                    list.capability()
                ));
            }
            parts.push(text);
        }
        if !r.unpinned.is_empty() {
            parts.push(format!("not pinned: {}", names(&r.unpinned)));
        }
        self.report.row(
            Status::Fail,
            id,
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

/// Keeps every listed definition of one list, in order, for the pins file.
struct Collect<'a> {
    list: List,
    session: &'a mcp_client::mcp::Client,
    items: Vec<Value>,
}

impl Pager for Collect<'_> {
    fn list(&self) -> List {
        self.list
    }

    fn drops_invalid_header_annotations(&self) -> bool {
        self.session.era() == mcp_client::mcp::Era::Modern
    }

    fn definition(&mut self, _fingerprint: u64, item: &Value) {
        self.items.push(item.clone());
    }

    async fn page(
        &mut self,
        cursor: Option<&str>,
        max_bytes: usize,
    ) -> Result<(Value, usize), mcp_client::mcp::McpError> {
        self.session.list_page(self.list, cursor, max_bytes).await
    }
}

/// List every list the server declares once and render its pins file (a `tools` section
/// always, empty when the server declares no tools; no `resource_templates` section when the
/// server does not implement its method). The error says which listing did not complete and
/// why; no file is written then.
pub async fn pin(opts: &Options) -> Result<String, String> {
    let opened = open(opts).await?;
    let session = opened.session.clone();
    let answering = tokio::spawn(Responder::new(opened.requests).run(session.clone()));
    let limits = WalkLimits {
        max_pages: opts.max_pages,
        max_bytes: opts.max_listing_bytes,
    };
    let info = session.info().clone();
    let mut lists: Vec<(List, Vec<Value>)> = Vec::new();
    let mut failed = None;
    for list in List::ALL
        .into_iter()
        .filter(|l| info.declares(*l).is_some())
    {
        let mut pager = Collect {
            list,
            session: &session,
            items: Vec::new(),
        };
        let report = walker::walk(&mut pager, limits).await;
        if super::lists::templates_not_implemented(list, &report) {
            // Not pinned, so not judged (as `check` counts it: no templates).
            continue;
        }
        if let Err(e) = report.result {
            failed = Some(format!("the {list} listing did not complete: {e}"));
            break;
        }
        lists.push((list, pager.items));
    }
    answering.abort();
    session.close().await;
    if let Some(e) = failed {
        return Err(e);
    }
    let sections: Vec<(List, &[Value])> = lists.iter().map(|(l, v)| (*l, &v[..])).collect();
    Ok(pins::render_lists(&sections))
}
