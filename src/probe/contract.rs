//! What a server promised a client that caches its tool list, and so what "stale" means.
//!
//! A cache is only stale against a promise. The two eras make different ones:
//!
//! - **legacy (2025-11-25 and before):** a correct client caches the list until
//!   `notifications/tools/list_changed`, a reconnect or a notification-stream gap. Declaring
//!   `tools.listChanged` is the promise to announce. A server that declares none promises
//!   nothing, yet its clients cache all the same (the era offers no other rule): every change
//!   leaves them stale (F2), so a difference is stale whatever was declared.
//! - **2026-07-28:** a correct client honours each listing's `ttlMs` (missing or negative = 0) and
//!   lets a `list_changed` on its `subscriptions/listen` stream invalidate it. A listing with
//!   `ttlMs` > 0 promises freshness for that long; a declared `tools.listChanged` promises to
//!   announce. A server with neither promises nothing: its clients must re-list before every
//!   use, so none of them is ever stale — only a client that caches anyway (the passive proxy
//!   sees those). Stale here means a promise broken: the list changed inside a fresh `ttlMs`
//!   without a `list_changed`, or a declared `listChanged` did not arrive within
//!   `notification_grace` (broken even when `ttlMs` 0 spares correct clients).
//!
//! The contract is decided once per listing from what the server declared and read by the probe
//! (its stale gauge), the status verdict and `check` alike; the facts it judges (the drift of a
//! notification-driven cache, unannounced changes, TTL violations) stay measured as they are.

use std::time::Duration;

use mcp_client::mcp::Era;

/// What a server promises a caching client, by era.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Contract {
    pub era: Era,
    /// `tools.listChanged` declared: the server promises to announce changes.
    pub announces: bool,
    /// Freshness the latest listing promised (`ttlMs`); zero in the legacy era, which has none.
    pub ttl: Duration,
}

/// The facts a contract judges, as one connection has them now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Facts {
    /// The notification-driven cache differs from the server's latest listing.
    pub drift: bool,
    /// That difference went unannounced past `notification_grace`.
    pub unannounced: bool,
    /// A change inside a fresh `ttlMs` promise went unannounced, and a client that fetched the
    /// listing just before it still holds it.
    pub ttl_broken: bool,
}

impl Contract {
    pub fn new(era: Era, announces: bool, ttl: Duration) -> Self {
        let ttl = match era {
            Era::Legacy => Duration::ZERO,
            Era::Modern => ttl,
        };
        Contract {
            era,
            announces,
            ttl,
        }
    }

    /// The server promises a caching client something it can be held to.
    pub fn promised(&self) -> bool {
        self.announces || !self.ttl.is_zero()
    }

    /// `announce`, `ttl`, `announce_ttl` or `none`: the closed set `/status.json` shows.
    pub fn promise(&self) -> &'static str {
        match (self.announces, !self.ttl.is_zero()) {
            (true, false) => "announce",
            (false, true) => "ttl",
            (true, true) => "announce_ttl",
            (false, false) => "none",
        }
    }

    /// Whether a correct client of this era, holding the server to its promises, holds a stale
    /// list now.
    pub fn stale(&self, facts: Facts) -> bool {
        match self.era {
            Era::Legacy => facts.drift,
            Era::Modern => facts.ttl_broken || (self.announces && facts.drift && facts.unannounced),
        }
    }

    /// The promise in words, for `check`, the status page and the log.
    pub fn words(&self) -> String {
        let ttl = humantime::format_duration(self.ttl);
        match (self.era, self.announces, !self.ttl.is_zero()) {
            (Era::Legacy, true, _) => {
                "announces changes: tools.listChanged declared; clients cache until list_changed"
                    .into()
            }
            (Era::Legacy, false, _) => "promises nothing: no tools.listChanged declared, yet \
                 2025-era clients cache the list anyway and are stale after each change (F2)"
                .into(),
            (Era::Modern, true, false) => "announces changes: tools.listChanged declared \
                 (subscriptions/listen); ttlMs 0, so clients also re-list before each use"
                .into(),
            (Era::Modern, true, true) => format!(
                "announces changes (tools.listChanged on subscriptions/listen) and promises \
                 listings fresh for {ttl} (ttlMs)"
            ),
            (Era::Modern, false, true) => format!(
                "promises listings fresh for {ttl} (ttlMs); announces nothing, so a change \
                 reaches a caching client only when that runs out"
            ),
            (Era::Modern, false, false) => NO_PROMISE.into(),
        }
    }
}

/// What a 2026-07-28 server that promises nothing means for its clients.
pub const NO_PROMISE: &str = "promises nothing (no tools.listChanged, ttlMs 0): clients must \
     re-list before every use; a client that caches anyway is stale after each change";

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(60);

    fn facts(drift: bool, unannounced: bool, ttl_broken: bool) -> Facts {
        Facts {
            drift,
            unannounced,
            ttl_broken,
        }
    }

    #[test]
    fn legacy_clients_cache_whatever_was_declared() {
        for announces in [true, false] {
            let c = Contract::new(Era::Legacy, announces, S);
            assert_eq!(c.ttl, Duration::ZERO, "the legacy era has no ttl");
            assert!(c.stale(facts(true, false, false)), "F2 stays stale");
            assert!(!c.stale(facts(false, false, false)));
        }
        assert_eq!(Contract::new(Era::Legacy, false, S).promise(), "none");
        assert_eq!(Contract::new(Era::Legacy, true, S).promise(), "announce");
    }

    #[test]
    fn a_modern_server_that_promises_nothing_is_never_stale() {
        let c = Contract::new(Era::Modern, false, Duration::ZERO);
        assert!(!c.promised());
        assert_eq!(c.promise(), "none");
        assert!(
            !c.stale(facts(true, true, false)),
            "drift and silence: no promise"
        );
        assert!(c.words().contains("re-list before every use"));
    }

    #[test]
    fn a_modern_server_is_stale_only_when_a_promise_breaks() {
        let announces = Contract::new(Era::Modern, true, Duration::ZERO);
        assert!(announces.promised());
        assert!(
            !announces.stale(facts(true, false, false)),
            "within the grace"
        );
        assert!(
            announces.stale(facts(true, true, false)),
            "declared, not delivered"
        );
        assert!(!announces.stale(facts(false, true, false)), "healed");

        let ttl = Contract::new(Era::Modern, false, S);
        assert_eq!(ttl.promise(), "ttl");
        assert!(
            !ttl.stale(facts(true, true, false)),
            "announces nothing: a silent change outside a fresh ttl breaks nothing"
        );
        assert!(ttl.stale(facts(false, false, true)), "inside a fresh ttl");
        assert_eq!(
            Contract::new(Era::Modern, true, S).promise(),
            "announce_ttl"
        );
    }
}
