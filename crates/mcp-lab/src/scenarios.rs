//! Named lab scenarios: one failure mode each, served by `mcp_exporter lab --scenario NAME` so an
//! operator can point a staging exporter at it and watch their alerts fire.

use std::net::SocketAddr;
use std::time::Duration;

use super::behaviour::DefinitionChange;
use super::{Behaviour, Cursors, Instances, Lab};

/// One scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: &'static str,
    /// The failure mode of PRODUCT.md it reproduces.
    pub failure_mode: &'static str,
    pub summary: &'static str,
    pub behaviour: Behaviour,
    /// Redeploy the backend this often (None: never).
    pub churn: Option<Duration>,
    /// End every session this often (None: never).
    pub expire_sessions: Option<Duration>,
    /// How many connections the exporter needs to see it.
    pub connections: u16,
}

const CHURN: Duration = Duration::from_secs(30);

/// Every scenario, healthy first.
pub fn all() -> Vec<Scenario> {
    let healthy = Behaviour::default();
    let s = |name, failure_mode, summary, behaviour, churn| Scenario {
        name,
        failure_mode,
        summary,
        behaviour,
        churn,
        expire_sessions: None,
        connections: 1,
    };
    vec![
        s(
            "healthy",
            "-",
            "14 tools, page size 8, redeployed every 30 s, every change announced",
            healthy.clone(),
            Some(CHURN),
        ),
        s(
            "notification-lost",
            "F1",
            "a gateway drops list_changed; the list changes every 30 s",
            Behaviour {
                deliver_list_changed: false,
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        s(
            "no-list-changed",
            "F2",
            "no listChanged capability, no notifications; the list changes every 30 s",
            Behaviour {
                list_changed_capability: false,
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        s(
            "no-get-stream",
            "F3",
            "declares listChanged but answers the GET stream with 405",
            Behaviour {
                get_stream: false,
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        s(
            "stream-cut-by-proxy",
            "F4",
            "a proxy closes the GET stream after 20 s; the list changes in the gap",
            Behaviour {
                stream_close_after: Some(Duration::from_secs(20)),
                change_in_stream_gap: true,
                ..healthy.clone()
            },
            None,
        ),
        s(
            "relist-fails",
            "F5",
            "after each change the next 2 tools/list requests fail with 503",
            Behaviour {
                failing_lists_after_change: 2,
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        Scenario {
            expire_sessions: Some(Duration::from_secs(60)),
            ..s(
                "session-expiry",
                "F6",
                "every session is ended (404) once a minute",
                healthy.clone(),
                None,
            )
        },
        s(
            "paginated",
            "F7",
            "14 tools over two pages of 8, no churn",
            healthy.clone(),
            None,
        ),
        s(
            "empty-cursor",
            "F7",
            "modern era: page 1's nextCursor is \"\", a valid cursor, not the end (legacy as paginated)",
            Behaviour {
                empty_cursor: true,
                ..healthy.clone()
            },
            None,
        ),
        s(
            "cursor-rejected",
            "F8",
            "two instances behind a round robin, cursors valid only on the instance that issued them",
            Behaviour {
                instances: Instances::RoundRobinLocalCursors,
                ..healthy.clone()
            },
            None,
        ),
        s(
            "repeated-cursor",
            "F9",
            "the second page returns the same nextCursor again",
            Behaviour {
                cursors: Cursors::Repeat,
                ..healthy.clone()
            },
            None,
        ),
        s(
            "endless-cursors",
            "F10",
            "every page has a new nextCursor, forever",
            Behaviour {
                cursors: Cursors::Endless,
                ..healthy.clone()
            },
            None,
        ),
        s(
            "offset-cursor-churn",
            "F11",
            "offset cursors; a tool is inserted at the front between pages",
            Behaviour {
                insert_during_walk: true,
                ..healthy.clone()
            },
            None,
        ),
        Scenario {
            connections: 2,
            ..s(
                "split-instances",
                "F12",
                "two instances with different lists, sessions pinned alternately (use connections: 2)",
                Behaviour {
                    instances: Instances::PinnedDivergent,
                    ..healthy.clone()
                },
                None,
            )
        },
        s(
            "schema-change-unannounced",
            "F13",
            "every 30 s one tool's inputSchema changes, names stay, no notification",
            Behaviour {
                schema_drift: true,
                deliver_list_changed: false,
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        s(
            "schema-change-breaking",
            "F13",
            "the first redeploy (after 30 s) adds a required property to ticket_create, same name, announced",
            Behaviour {
                definition_change: Some(DefinitionChange::Breaking),
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        s(
            "schema-change-compatible",
            "F13",
            "the first redeploy (after 30 s) adds an optional property to ticket_search, announced",
            Behaviour {
                definition_change: Some(DefinitionChange::Compatible),
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        s(
            "description-rug-pull",
            "F13",
            "the first redeploy (after 30 s) rewrites kb_get_document's description only; pin the tools first",
            Behaviour {
                definition_change: Some(DefinitionChange::Description),
                ..healthy.clone()
            },
            Some(CHURN),
        ),
        s(
            "spurious-notifications",
            "F14",
            "list_changed every 10 s although nothing changed",
            Behaviour {
                spurious_list_changed: Some(Duration::from_secs(10)),
                ..healthy.clone()
            },
            None,
        ),
        s(
            "slow-server",
            "F15",
            "every answer after initialize takes 15 s (beyond the default 10 s timeout)",
            Behaviour {
                answer_delay: Duration::from_secs(15),
                ..healthy
            },
            None,
        ),
    ]
}

/// Look a scenario up by name.
pub fn find(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}

/// One line per scenario, for `lab --list`.
pub fn listing() -> String {
    all()
        .iter()
        .map(|s| format!("{:<26} {:<4} {}\n", s.name, s.failure_mode, s.summary))
        .collect()
}

/// Serve `scenario` on `addr` until the process is stopped. Returns the running lab.
pub async fn serve(scenario: &Scenario, addr: SocketAddr) -> std::io::Result<Lab> {
    let lab = Lab::start(
        addr,
        vec![(scenario.name.to_string(), scenario.behaviour.clone())],
    )
    .await?;
    if let Some(period) = scenario.churn {
        lab.spawn_churn(period);
    }
    if let Some(period) = scenario.expire_sessions {
        lab.spawn_expiry(scenario.name, period);
    }
    Ok(lab)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_cover_f1_to_f15() {
        let all = all();
        let names: std::collections::HashSet<_> = all.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), all.len());
        for f in 1..=15 {
            let id = format!("F{f}");
            assert!(
                all.iter().any(|s| s.failure_mode == id),
                "no scenario for {id}"
            );
        }
        assert_eq!(listing().lines().count(), all.len());
        assert!(find("notification-lost").is_some() && find("nope").is_none());
    }
}
