//! The settings `global` gives every target and a target may override (`connections`, the
//! intervals and timeouts, `max_pages`, `max_listing_bytes`, `legacy_clients`): one rule each,
//! applied by one function to `global` (over the built-in defaults) and to each target (over
//! `global`), so both levels accept the same values and say the same thing about a bad one.

use super::error::ConfigError;
use super::model::TargetSettings;
use super::raw::{RawBytes, RawSettings, parse_bytes};
use super::validator::Validator;
use mcp_client::listing::list::{List, ListSet};
use std::time::Duration;

const MAX_PAGES_LIMIT: i64 = 10_000;
const CONNECTIONS_LIMIT: i64 = 16;
/// `max_listing_bytes` range: a page with one tool fits in 4 KiB; past 64 MiB the bound no
/// longer protects anything.
const MIN_LISTING_BYTES: u64 = 4 * 1024;
const MAX_LISTING_BYTES: u64 = 64 * 1024 * 1024;

/// The one rule for a listing budget: `max_listing_bytes` of `global` and a target, and the
/// `--max-listing-bytes` of `check` and `pin`, are between 4 KiB and 64 MiB.
pub fn listing_bytes(n: u64) -> Result<usize, String> {
    if !(MIN_LISTING_BYTES..=MAX_LISTING_BYTES).contains(&n) {
        return Err(format!(
            "{n} bytes is out of range; must be between 4KiB and 64MiB"
        ));
    }
    Ok(usize::try_from(n).expect("checked range"))
}

/// Where a resolved value came from, for messages about combinations of values.
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Origin {
    /// Set at this level (the target, or `global` for the global section).
    Here,
    /// Inherited from `global`.
    Global,
    /// Not set anywhere: the built-in default.
    Default,
}

impl Validator<'_> {
    /// The settings of the level at `p` (`global`, a target) as written in `raw`, each unset one
    /// taken from `base` (which came `from` the built-in defaults for `global`, from `global`
    /// for a target); and the request timeout the level below inherits when it sets none (see
    /// [`Validator::request_timeout`]): the one written here, else `inherited_timeout`.
    pub(super) fn settings(
        &self,
        p: &str,
        raw: RawSettings,
        base: &TargetSettings,
        from: Origin,
        inherited_timeout: Duration,
    ) -> Result<(TargetSettings, Duration), ConfigError> {
        let audit = origin(
            self.duration(p, "audit_interval", raw.audit_interval)?,
            (base.audit_interval, from),
        );
        let ping = origin(
            self.duration(p, "ping_interval", raw.ping_interval)?,
            (base.ping_interval, from),
        );
        let timeout = self.duration(p, "request_timeout", raw.request_timeout)?;
        let notification_grace = self
            .duration(p, "notification_grace", raw.notification_grace)?
            .unwrap_or(base.notification_grace);
        let max_pages = self
            .in_range(p, "max_pages", raw.max_pages, MAX_PAGES_LIMIT)?
            .map_or(base.max_pages, |n| u32::try_from(n).expect("checked range"));
        let max_listing_bytes = self
            .max_listing_bytes(p, raw.max_listing_bytes)?
            .unwrap_or(base.max_listing_bytes);
        let connections = self
            .in_range(p, "connections", raw.connections, CONNECTIONS_LIMIT)?
            .map_or(base.connections, |n| {
                u16::try_from(n).expect("checked range")
            });
        let settings = TargetSettings {
            connections,
            audit_interval: audit.0,
            ping_interval: ping.0,
            request_timeout: self.request_timeout(p, timeout, inherited_timeout, ping, audit)?,
            notification_grace,
            max_pages,
            max_listing_bytes,
            legacy_clients: raw.legacy_clients.unwrap_or(base.legacy_clients),
            lists: self.lists(p, raw.lists)?.unwrap_or(base.lists),
        };
        Ok((settings, timeout.unwrap_or(inherited_timeout)))
    }

    /// `lists`: names of the closed set; the tool list is watched whether named or not.
    fn lists(&self, p: &str, raw: Option<Vec<String>>) -> Result<Option<ListSet>, ConfigError> {
        let Some(names) = raw else {
            return Ok(None);
        };
        let mut set = ListSet::TOOLS;
        for (i, name) in names.iter().enumerate() {
            let list = name
                .parse::<List>()
                .map_err(|why| self.err(format!("{p}.lists[{i}]"), why))?;
            set = set.with(list);
        }
        Ok(Some(set))
    }

    fn max_listing_bytes(
        &self,
        p: &str,
        raw: Option<RawBytes>,
    ) -> Result<Option<usize>, ConfigError> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let field = format!("{p}.max_listing_bytes");
        let n = match raw {
            RawBytes::Number(n) => u64::try_from(n).ok(),
            RawBytes::Text(t) => parse_bytes(&t),
        }
        .ok_or_else(|| {
            self.err(
                &field,
                "not a size; write bytes as a number, or a number with a unit: 256KiB, 1MiB",
            )
        })?;
        listing_bytes(n)
            .map(Some)
            .map_err(|why| self.err(field, why))
    }

    fn in_range(
        &self,
        p: &str,
        key: &str,
        raw: Option<i64>,
        max: i64,
    ) -> Result<Option<i64>, ConfigError> {
        match raw {
            Some(n) if !(1..=max).contains(&n) => Err(self.err(
                format!("{p}.{key}"),
                format!("{n} is out of range; must be between 1 and {max}"),
            )),
            other => Ok(other),
        }
    }

    /// The request timeout of a level (`global` or a target). A request must be able to time
    /// out before the next ping or audit is due. As Prometheus does for `scrape_timeout`: a
    /// timeout set at this level that does not fit an interval is an error; one not set here
    /// (`inherited`: from `global` or the built-in default) is lowered to fit.
    fn request_timeout(
        &self,
        p: &str,
        here: Option<Duration>,
        inherited: Duration,
        ping: (Duration, Origin),
        audit: (Duration, Origin),
    ) -> Result<Duration, ConfigError> {
        let Some(timeout) = here else {
            return Ok(inherited.min(ping.0).min(audit.0));
        };
        let show = |key: &str, (d, origin): (Duration, Origin)| {
            let from = match origin {
                Origin::Here => "",
                Origin::Global => " (from global)",
                Origin::Default => " (default)",
            };
            format!("{key} {}{from}", humantime::format_duration(d))
        };
        let field = format!("{p}.request_timeout");
        let shown = format!("request_timeout {}", humantime::format_duration(timeout));
        if timeout > ping.0 {
            return Err(self.err(
                field,
                format!(
                    "{shown} is longer than {}; a ping must time out before the next one is due",
                    show("ping_interval", ping)
                ),
            ));
        }
        if timeout > audit.0 {
            return Err(self.err(
                field,
                format!(
                    "{shown} is longer than {}; an audit's requests must time out before the next audit is due",
                    show("audit_interval", audit)
                ),
            ));
        }
        Ok(timeout)
    }
}

/// A value set here, or the fallback with where it came from (for precise error messages).
fn origin(value: Option<Duration>, fallback: (Duration, Origin)) -> (Duration, Origin) {
    value.map_or(fallback, |v| (v, Origin::Here))
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::*;

    /// `..RawSettings,` puts the settings where a target always listed them, so serde's list
    /// of expected keys reads as before; `global` lists them in the same order.
    #[test]
    fn the_settings_keys_stand_where_they_did() {
        assert_has(
            &err(&one_target("    nope: 1\n")),
            "expected one of `name`, `url`, `transport`, `command`, `args`, `env`, `cwd`, \
             `protocol_version`, `headers`, `header_files`, `connections`, `audit_interval`, \
             `ping_interval`, `request_timeout`, `notification_grace`, `max_pages`, \
             `max_listing_bytes`, `legacy_clients`, `lists`, `probes`, `labels`, `pins`, \
             `authorization`",
        );
        assert_has(
            &err("global:\n  nope: 1\n"),
            "expected one of `connections`, `audit_interval`, `ping_interval`, \
             `request_timeout`, `notification_grace`, `max_pages`, `max_listing_bytes`, \
             `legacy_clients`, `lists`, `authorization`",
        );
    }

    /// One rule: `global` and a target refuse a value with the same words.
    #[test]
    fn global_and_targets_share_each_rule() {
        for (key, value) in [
            ("connections", "0"),
            ("max_pages", "10001"),
            ("max_listing_bytes", "1KiB"),
            ("max_listing_bytes", "lots"),
            ("notification_grace", "50ms"),
        ] {
            let g = err(&format!("global:\n  {key}: {value}\n"));
            let t = err(&one_target(&format!("    {key}: {value}\n")));
            let g = g.strip_prefix(&format!("test.yml: global.{key}: "));
            let t = t.strip_prefix(&format!("test.yml: targets[0].{key}: "));
            assert!(g.is_some() && g == t, "{g:?} / {t:?}");
        }
    }
}
