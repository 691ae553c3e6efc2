//! The lists beyond tools: prompts, resources and resource templates, one row each.
//!
//! A client caches every list the server declares, and each goes stale the way the tool list
//! does: a cursor loop, a duplicated key, a listing that changes under it with no
//! notification. So `check` walks each declared list with the same walker, limits and recorder
//! as tools, twice, and says what it saw in one row per list (`prompts_list`, `resources_list`,
//! `resource_templates_list`): pages and count, duplicates, and the second walk against the
//! first, classified by the list's own rules. One row rather than the tools' four keeps the
//! report readable; the statuses are those of the tool rows (a broken walk, a duplicated key,
//! an unannounced change FAIL), so the exit codes mean what they always meant. Lists the server
//! does not declare are not asked for: a client must not list them.
//!
//! One leniency: `capabilities.resources` covers both resource lists, yet servers built on a
//! low-level SDK often answer `resources/templates/list` with -32601 (method not found) when
//! they have no templates. A client that lists templates gets an error and copes (it has none
//! to offer), so that is a WARN, not a FAIL, and the list counts as listing nothing.

use super::recorder::{Recorded, compare, names, nouns};
use super::{Checker, ItemWalk, ListSummary, Status};
use mcp_client::listing::items::ItemSet;
use mcp_client::listing::list::List;
use mcp_client::listing::walker::{WalkError, WalkReport};
use mcp_client::mcp::jsonrpc::METHOD_NOT_FOUND;

/// What `check` knows of one list's listing, for the pins.
pub(super) enum Listed {
    /// The server does not declare the list: nothing is listed.
    Undeclared,
    /// Declared, but its method is not implemented (resource templates, -32601): nothing is
    /// listed.
    NotImplemented,
    /// The first walk did not complete: nothing can be judged.
    Incomplete,
    /// The first walk's items.
    Complete(ItemSet),
}

/// The row id of `list`'s listing row.
fn row_id(list: List) -> &'static str {
    match list {
        List::Tools => "tools_list",
        List::Prompts => "prompts_list",
        List::Resources => "resources_list",
        List::ResourceTemplates => "resource_templates_list",
    }
}

/// A declared list whose listing method the server does not implement: its first page answered
/// -32601. Only resource templates are excused (see the module docs).
pub(super) fn templates_not_implemented(list: List, report: &WalkReport) -> bool {
    list == List::ResourceTemplates
        && matches!(
            &report.result,
            Err(WalkError::Request { error, with_cursor: false })
                if error.rpc_code == Some(METHOD_NOT_FOUND)
        )
}

fn item_walk(r: &Recorded, walk: &'static str) -> ItemWalk {
    ItemWalk {
        walk,
        pages: r.page_sizes(),
        items: r.items() as u32,
        complete: r.report.result.is_ok(),
    }
}

impl Checker<'_> {
    /// Walk every list but tools that the server declares, twice, with one row each; what each
    /// first walk listed (every list but tools, in [`List::ALL`] order).
    pub(super) async fn other_lists(&mut self) -> Vec<(List, Listed)> {
        let info = self.session.info().clone();
        let mut out = Vec::new();
        for list in List::ALL.into_iter().filter(|l| *l != List::Tools) {
            let listed = match info.declares(list) {
                None => Listed::Undeclared,
                Some(_) => self.list_row(list).await,
            };
            out.push((list, listed));
        }
        out
    }

    /// The `<list>_list` row: first walk, duplicates, second walk.
    async fn list_row(&mut self, list: List) -> Listed {
        let notified_before = self.inbox.changed_count(list);
        let first = self.walk_list(list).await;
        let mut summary = ListSummary {
            list: list.as_str(),
            walks: vec![item_walk(&first, "first")],
        };
        if templates_not_implemented(list, &first.report) {
            self.report.lists.push(summary);
            self.report.row(
                Status::Warn,
                row_id(list),
                "resources/templates/list answered -32601 (method not found) although the \
                 resources capability covers it: clients that list templates get an error; \
                 counted as no templates",
            );
            return Listed::NotImplemented;
        }
        let (mut status, walked) = first.verdict(self.opts.max_pages);
        let mut parts = vec![walked];
        let (one, _) = nouns(list);
        let key = list.key_field();
        let dups = first.duplicate_names();
        if dups.is_empty() {
            parts.push(format!("no {key} listed twice"));
        } else {
            status = status.max(Status::Fail);
            parts.push(format!(
                "listed more than once: {}; a client keeps one {one} per {key}, and with \
                 offset cursors a shifted list also skips one (F11)",
                names(&dups)
            ));
        }
        let listed = match &first.report.result {
            Err(_) => Listed::Incomplete,
            Ok(w) => {
                let items = w.items.clone();
                let second = self.walk_list(list).await;
                summary.walks.push(item_walk(&second, "second"));
                let notified = self.inbox.changed_count(list) > notified_before;
                let (s, detail) = match &second.report.result {
                    Err(e) => (
                        Status::Fail,
                        format!("the second walk failed where the first completed: {e}"),
                    ),
                    Ok(_) => compare(&first, &second, notified, &self.definitions),
                };
                status = status.max(s);
                parts.push(detail);
                Listed::Complete(items)
            }
        };
        self.report.lists.push(summary);
        self.report.row(status, row_id(list), parts.join("; "));
        listed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_client::mcp::{McpError, Reason};

    fn failed(code: i64, with_cursor: bool) -> WalkReport {
        let mut error = McpError::new(Reason::JsonrpcError, "Method not found");
        error.rpc_code = Some(code);
        WalkReport {
            result: Err(WalkError::Request { error, with_cursor }),
            requests: 1,
            answered: 0,
            duplicates: 0,
            long_names: 0,
            rejected: 0,
            bytes: 0,
        }
    }

    #[test]
    fn only_an_unimplemented_template_list_is_excused() {
        let missing = failed(METHOD_NOT_FOUND, false);
        assert!(templates_not_implemented(List::ResourceTemplates, &missing));
        assert!(!templates_not_implemented(List::Resources, &missing));
        assert!(!templates_not_implemented(List::Prompts, &missing));
        // A cursor the server rejects, or another error, is a failure as ever.
        assert!(!templates_not_implemented(
            List::ResourceTemplates,
            &failed(METHOD_NOT_FOUND, true)
        ));
        assert!(!templates_not_implemented(
            List::ResourceTemplates,
            &failed(-32602, false)
        ));
    }
}
