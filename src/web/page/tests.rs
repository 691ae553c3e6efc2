use super::*;
use crate::probe::status::MAX_RESPONSE_BYTES;
use crate::probe::status::tests::{big_board, hostile_board};
use mcp_client::text::is_hostile;

#[test]
fn hostile_server_strings_reach_the_page_bounded_and_escaped() {
    let page = render(&hostile_board().snapshot());
    assert!(page.len() < 128 * 1024, "{} bytes", page.len());
    let raw: Vec<char> = page
        .chars()
        .filter(|c| is_hostile(*c) && *c != '\n')
        .collect();
    assert!(raw.is_empty(), "raw control/bidi characters: {raw:?}");
    // Visible instead: the escapes, and the original length of a cut name.
    assert!(
        page.contains("ok\\u{0}\\u{1b}\\u{7}\\u{202e}short"),
        "{page}"
    );
    assert!(page.contains("bytes)</code>"));
}

#[test]
fn the_page_stops_at_its_cap_between_elements() {
    let snap = big_board().snapshot();
    let page = render(&snap);
    assert!(page.len() <= MAX_RESPONSE_BYTES, "{}", page.len());
    assert!(page.contains("id=\"truncated\""), "no truncation notice");
    assert!(page.ends_with("</body></html>\n"));
    assert_eq!(
        page.matches("<table").count(),
        page.matches("</table>").count()
    );
    // The summary lists every target; the worst (stale) one is first and has its details.
    assert_eq!(page.matches("<tr class=\"target\"").count(), 41);
    assert!(
        page.contains("the summary shows 41 of 41 targets"),
        "{}",
        &page[page.len() - 600..]
    );
    assert!(page.contains("id=\"target-stale\""));
}

#[test]
fn a_stale_ready_target_is_never_green() {
    let snap = big_board().snapshot();
    let stale = snap.targets.iter().find(|t| t.name == "stale").unwrap();
    assert!(stale.ready && stale.stale);
    let row = summary_row(stale, snap.generated_at, SystemTime::now());
    assert!(
        row.contains("<span class=\"sev stale\">stale</span>"),
        "{row}"
    );
    assert!(row.contains("<td class=\"warn\">stale</td>"), "{row}");
    assert!(row.contains("cache behind the server"), "{row}");
    assert!(row.contains(" UTC<br><small>0 s ago</small>"), "{row}");
}

/// Another list a connection watches has a row of its own: counts, the drift by name (escaped,
/// at most [`crate::probe::status::LIST_DRIFT_NAMES`] of each kind) and the promise's state; it
/// goes when the list is no longer watched.
#[test]
fn other_lists_show_their_counts_drift_and_verdict() {
    use crate::probe::status::StatusBoard;
    use mcp_client::listing::items::Drift;
    use mcp_client::listing::list::List;
    let board = StatusBoard::default();
    let c = board
        .add(&crate::probe::status::tests::target())
        .connection(0);
    c.list_watched(List::Resources, true);
    c.list_watched(List::Prompts, true);
    c.list_walked(List::Prompts, 10, Some(10));
    c.list_walked(List::Prompts, 10, None);
    c.list_drift(
        List::Prompts,
        &Drift {
            extra: (0..25).map(|i| format!("<p{i}>")).collect(),
            ..Drift::default()
        },
    );
    c.list_judged(List::Prompts, "announce", true);
    let page = render(&board.snapshot());
    let prompts = page
        .lines()
        .find(|l| l.contains("<th>List: prompts</th>"))
        .expect("a prompts row");
    assert!(prompts.contains("10 listed, 10 cached"), "{prompts}");
    assert!(prompts.contains("<code>&lt;p0&gt;</code>"), "{prompts}");
    assert!(prompts.contains("… and 15 more"), "{prompts}");
    assert!(prompts.contains("promise announce: <span class=\"warn\">broken</span>"));
    let order: Vec<_> = page.match_indices("<th>List: ").map(|(i, _)| i).collect();
    assert_eq!(order.len(), 2);
    assert!(
        page.find("List: prompts") < page.find("List: resources"),
        "List order"
    );
    c.list_watched(List::Prompts, false);
    assert!(!render(&board.snapshot()).contains("List: prompts"));
}
