//! End to end: the other lists a client caches (prompts, resources, resource templates) are
//! walked, cached, audited and judged as the tool list is, in both eras, against the lab (whose
//! every redeploy retires `summarize_legacy`, `kb://collections/legacy-index` and the template
//! `kb://search/legacy{?q}`). The tool list's series are not touched by them.

mod common;

use common::series::{C0, checks, counter, t};
use common::{Harness, Scrape, churn_then_audits, lab_and_probe, start_lab, target};
use mcp_client::listing::list::{List, ListSet};
use mcp_lab::{Behaviour, Era as LabEra};

/// The lists with series of their own.
const OTHERS: [&str; 3] = ["prompts", "resources", "resource_templates"];

/// Items the lab lists at every generation: 10 prompts, 12 resources, 3 templates.
fn items_listed(list: &str) -> f64 {
    match list {
        "prompts" => 10.0,
        "resources" => 12.0,
        _ => 3.0,
    }
}

fn scenario(name: &str) -> Behaviour {
    mcp_lab::scenarios::find(name)
        .expect("scenario exists")
        .behaviour
}

fn items(s: &Scrape, name: &str, list: &str, view: &str) -> Option<f64> {
    s.get(
        "mcp_probe_list_items",
        &[t(name), C0, ("list", list), ("view", view)],
    )
}

/// A list's drift of `kind`, 0 while absent (written from the first audit that finds the kind).
fn drift(s: &Scrape, name: &str, list: &str, kind: &str) -> f64 {
    s.get(
        "mcp_probe_list_cache_drift_items",
        &[t(name), C0, ("list", list), ("kind", kind)],
    )
    .unwrap_or(0.0)
}

/// A `list`-labelled series of connection 0 (a counter reads 0 while absent).
fn of(s: &Scrape, metric: &str, name: &str, list: &str) -> f64 {
    s.value(metric, &[t(name), C0, ("list", list)])
}

/// Every list walked once and cached whole.
async fn walked(h: &Harness, name: &str) -> Scrape {
    h.until("every list walked", |s| {
        OTHERS
            .iter()
            .all(|l| items(s, name, l, "cache") == Some(items_listed(l)))
    })
    .await
}

/// A healthy server announces every change of every list: each cache follows, nothing drifts,
/// nothing is unannounced or stale, and the tool list's series are those of a tools-only view.
async fn every_cache_follows_announced_changes(era: LabEra) {
    let b = Behaviour {
        era,
        ..Behaviour::default()
    };
    let (lab, h) = lab_and_probe("kb", b, |_| {}).await;
    let s = walked(&h, "kb").await;
    assert!(
        !s.text.contains("mcp_probe_list_cache_drift_items{"),
        "no list has drifted yet, so no drift series\n{}",
        s.text
    );
    lab.churn();
    let s = h
        .until("every list re-listed after its notification", |s| {
            OTHERS
                .iter()
                .all(|l| of(s, "mcp_probe_list_notifications_total", "kb", l) >= 1.0)
                && OTHERS.iter().all(|l| drift(s, "kb", l, "missing") == 0.0)
        })
        .await;
    let before = checks(&s, "kb");
    let s = h
        .until("two audits after the change", |s| {
            checks(s, "kb") >= before + 2.0
        })
        .await;
    for list in OTHERS {
        for kind in ["missing", "extra", "changed"] {
            assert_eq!(
                drift(&s, "kb", list, kind),
                0.0,
                "{list} {kind}\n{}",
                s.text
            );
        }
        for m in [
            "mcp_probe_list_unannounced_changes_total",
            "mcp_probe_list_ttl_violations_total",
            "mcp_probe_list_cache_stale",
        ] {
            assert_eq!(of(&s, m, "kb", list), 0.0, "{m} {list}\n{}", s.text);
        }
        assert_eq!(
            items(&s, "kb", list, "server"),
            items(&s, "kb", list, "cache")
        );
    }
    // The tool list is judged as before, on its own series.
    assert_eq!(
        counter(&s, "mcp_probe_unannounced_changes_total", "kb"),
        0.0
    );
    assert_eq!(
        s.v("mcp_probe_tools", &[t("kb"), C0, ("view", "cache")]),
        14.0
    );
    assert!(
        !s.text.contains("list=\"tools\""),
        "the tool list has no list-labelled series"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_every_cache_follows_announced_changes() {
    every_cache_follows_announced_changes(LabEra::Legacy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_every_cache_follows_announced_changes() {
    every_cache_follows_announced_changes(LabEra::Modern).await;
}

/// F1 for the other lists: the gateway drops every list_changed. The audits find the retired
/// prompt, resource and template still cached (extra) and their successors unknown (missing),
/// count each change once as unannounced, and the verdict is stale for every list, as for tools.
async fn lost_notifications_leave_every_list_stale(era: LabEra) {
    let b = Behaviour {
        era,
        ..scenario("notification-lost")
    };
    let (lab, h) = lab_and_probe("lossy", b, |_| {}).await;
    walked(&h, "lossy").await;
    churn_then_audits(&lab, &h, "lossy").await;
    let s = h
        .until("every list stale and unannounced", |s| {
            OTHERS.iter().all(|l| {
                of(s, "mcp_probe_list_cache_stale", "lossy", l) == 1.0
                    && of(s, "mcp_probe_list_unannounced_changes_total", "lossy", l) == 1.0
            })
        })
        .await;
    for list in OTHERS {
        assert_eq!(drift(&s, "lossy", list, "extra"), 1.0, "{list}\n{}", s.text);
        assert_eq!(
            drift(&s, "lossy", list, "missing"),
            1.0,
            "{list}\n{}",
            s.text
        );
        assert_eq!(
            of(&s, "mcp_probe_list_notifications_total", "lossy", list),
            0.0
        );
    }
    assert_eq!(counter(&s, "mcp_probe_tool_cache_stale", "lossy"), 1.0);
    // The status page names the retired items a client still offers.
    let snapshot = serde_json::to_value(h.supervisor.status().snapshot()).unwrap();
    let lists = &snapshot["targets"][0]["connections"][0]["lists"];
    let extra = |i: usize| lists[i]["drift"]["extra"].clone();
    assert_eq!(lists[0]["list"], "prompts", "{lists}");
    assert_eq!(extra(0), serde_json::json!(["summarize_legacy"]), "{lists}");
    assert_eq!(
        extra(1),
        serde_json::json!(["kb://collections/legacy-index"])
    );
    assert_eq!(extra(2), serde_json::json!(["kb://search/legacy{?q}"]));
    assert_eq!(lists[0]["stale"], true);
    // The stale caches stay stale: audits never repair them, and count each change once.
    let later = checks(&s, "lossy") + 2.0;
    let s = h
        .until("more audits", |s| checks(s, "lossy") >= later)
        .await;
    for list in OTHERS {
        assert_eq!(drift(&s, "lossy", list, "extra"), 1.0);
        assert_eq!(
            of(
                &s,
                "mcp_probe_list_unannounced_changes_total",
                "lossy",
                list
            ),
            1.0,
            "one change, counted once"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_lost_notifications_leave_every_list_stale() {
    lost_notifications_leave_every_list_stale(LabEra::Legacy).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_lost_notifications_leave_every_list_stale() {
    lost_notifications_leave_every_list_stale(LabEra::Modern).await;
}

/// `lists` narrows what is watched: with only prompts, the resource lists are never walked and
/// have no series; with none but the tools, no list-labelled series at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lists_narrow_what_is_watched() {
    let lab = start_lab([
        ("some", Behaviour::default()),
        ("none", Behaviour::default()),
    ])
    .await;
    let mut some = target("some", lab.url("some"));
    some.settings.lists = ListSet::TOOLS.with(List::Prompts);
    let mut none = target("none", lab.url("none"));
    none.settings.lists = ListSet::TOOLS;
    let mut h = Harness::new();
    h.apply(vec![some, none]);
    let s = h
        .until("both walked and audited", |s| {
            items(s, "some", "prompts", "cache") == Some(10.0)
                && checks(s, "some") >= 2.0
                && checks(s, "none") >= 2.0
        })
        .await;
    for list in ["resources", "resource_templates"] {
        assert_eq!(items(&s, "some", list, "server"), None, "{}", s.text);
    }
    let requests = |name, method| {
        s.get(
            "mcp_probe_requests_total",
            &[t(name), C0, ("method", method)],
        )
    };
    assert_eq!(requests("some", "resources/list"), None);
    assert!(requests("some", "prompts/list").is_some());
    for list in OTHERS {
        assert_eq!(items(&s, "none", list, "server"), None, "{}", s.text);
    }
    assert_eq!(requests("none", "prompts/list"), None);
}

/// A server that declares only tools costs nothing more: no list is walked, no series exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_only_server_has_no_list_series() {
    let b = Behaviour {
        prompts_and_resources: false,
        ..Behaviour::default()
    };
    let (_lab, h) = lab_and_probe("tools", b, |_| {}).await;
    let s = h.until("audited", |s| checks(s, "tools") >= 2.0).await;
    assert!(
        !s.text.contains("mcp_probe_list_items{"),
        "no list series\n{}",
        s.text
    );
    assert_eq!(
        s.get(
            "mcp_probe_requests_total",
            &[t("tools"), C0, ("method", "prompts/list")]
        ),
        None
    );
}

/// Changes to the other lists are classified as tool changes are: the lab's redeploy retires
/// one item of each list for a successor, so each list counts a removal and an addition on the
/// connection that followed the announcement.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_to_every_list_are_classified() {
    let (lab, h) = lab_and_probe("kb", Behaviour::default(), |_| {}).await;
    walked(&h, "kb").await;
    lab.churn();
    let changes = |s: &Scrape, list: &str, change: &str| {
        s.count(
            "mcp_probe_list_changes_total",
            &[t("kb"), C0, ("list", list), ("change", change)],
        )
    };
    let s = h
        .until("a removal and an addition in every list", |s| {
            OTHERS
                .iter()
                .all(|l| changes(s, l, "removed") == 1.0 && changes(s, l, "added") == 1.0)
        })
        .await;
    for list in OTHERS {
        for change in ["breaking", "compatible", "unknown"] {
            assert_eq!(
                changes(&s, list, change),
                0.0,
                "{list} {change}\n{}",
                s.text
            );
        }
    }
}

/// A pins file that pins every list (as `mcp_exporter pin` writes it) judges each against
/// connection 0's listing: after the redeploy each list's retired item is a pinned item gone
/// and its successor an unpinned one; the tool list keeps its own series per pinned tool.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pins_of_every_list_are_judged() {
    use mcp_client::listing::changes::pins;
    use mcp_lab::kb_lists;
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("kb.pins.json");
    let others = [List::Prompts, List::Resources, List::ResourceTemplates];
    let defs: Vec<_> = others.iter().map(|l| kb_lists::items(*l, 0)).collect();
    let sections: Vec<_> = others
        .iter()
        .zip(&defs)
        .map(|(l, d)| (*l, &d[..]))
        .collect();
    std::fs::write(&path, pins::render_lists(&sections)).expect("pins written");
    let (lab, h) = lab_and_probe("kb", Behaviour::default(), |c| c.pins = Some(path)).await;
    let pin = |s: &Scrape, metric: &str, list: &str| s.get(metric, &[t("kb"), ("list", list)]);
    h.until("every list judged and matching its pins", |s| {
        OTHERS.iter().all(|l| {
            pin(s, "mcp_probe_list_pin_mismatches", l) == Some(0.0)
                && pin(s, "mcp_probe_list_unpinned_items", l) == Some(0.0)
                && items(s, "kb", l, "server") == Some(items_listed(l))
        })
    })
    .await;
    lab.churn();
    let s = h
        .until(
            "each retired item pinned and gone, its successor unpinned",
            |s| {
                OTHERS.iter().all(|l| {
                    pin(s, "mcp_probe_list_pin_mismatches", l) == Some(1.0)
                        && pin(s, "mcp_probe_list_unpinned_items", l) == Some(1.0)
                })
            },
        )
        .await;
    for list in OTHERS {
        let changed = pin(&s, "mcp_probe_list_pin_description_changes", list);
        assert_eq!(changed, Some(0.0), "{list}\n{}", s.text);
    }
    let status = serde_json::to_value(h.supervisor.status().snapshot()).unwrap();
    let lists = &status["targets"][0]["pins"]["lists"];
    assert_eq!(lists[0]["list"], "prompts", "{lists}");
    assert_eq!(lists[0]["mismatched"][0]["tool"], "summarize_legacy");
    assert_eq!(lists[0]["mismatched"][0]["change"], "removed");
}
