//! The configuration file as written, as serde reads it.
//!
//! Every key is optional here so that a missing one gets the validator's own message with its
//! field path, and `deny_unknown_fields` turns a typo into an error with line and column. No
//! checks live here beyond the YAML types; see `validate`.

use super::probes;
use serde::Deserialize;
use serde::de::{Deserializer, MapAccess, Visitor};
use std::fmt;
use std::marker::PhantomData;

/// Declares a raw struct with the `http_config` blocks after its own fields, and `take_http`
/// to move them out. Written out rather than `#[serde(flatten)]`: flattening would switch off
/// `deny_unknown_fields`. Used for targets, `global`, `http_sd_configs`, `--http-config` files
/// and `proxies:` entries (their catalog session).
macro_rules! with_http_blocks {
    (
        $(#[$meta:meta])*
        pub(super) struct $name:ident { $($vis:vis $field:ident: $ty:ty,)* }
    ) => {
        $(#[$meta])*
        pub(super) struct $name {
            $($vis $field: $ty,)*
            pub(super) authorization: Option<$crate::config::raw::RawAuthorization>,
            pub(super) basic_auth: Option<$crate::config::raw::RawBasicAuth>,
            pub(super) oauth2: Option<$crate::config::raw::RawOAuth2>,
            pub(super) tls_config: Option<$crate::config::raw::RawTls>,
            pub(super) proxy_url: Option<String>,
            pub(super) no_proxy: Option<String>,
            pub(super) proxy_from_environment: Option<bool>,
            pub(super) idle_connection_timeout: Option<String>,
        }

        impl $name {
            #[allow(dead_code)] // RawHttp is the blocks already
            pub(super) fn take_http(&mut self) -> $crate::config::raw::RawHttp {
                $crate::config::raw::RawHttp {
                    authorization: self.authorization.take(),
                    basic_auth: self.basic_auth.take(),
                    oauth2: self.oauth2.take(),
                    tls_config: self.tls_config.take(),
                    proxy_url: self.proxy_url.take(),
                    no_proxy: self.no_proxy.take(),
                    proxy_from_environment: self.proxy_from_environment.take(),
                    idle_connection_timeout: self.idle_connection_timeout.take(),
                }
            }
        }
    };
}

/// Declares [`RawSettings`] (the first struct), then each struct after it with its own fields,
/// the keys of `RawSettings` where it says `..RawSettings,` (so that serde's list of expected
/// keys keeps them there), the `http_config` blocks, and `take_settings` to move the settings
/// out. Each overridable setting is so written once, and `deny_unknown_fields` holds (see
/// `with_http_blocks`). Used for `global` and targets.
macro_rules! with_settings {
    (@each $settings:ident [$($key:ident: $kty:ty,)*]) => {};
    (
        @each $settings:ident [$($key:ident: $kty:ty,)*]
        $(#[$meta:meta])*
        pub(super) struct $name:ident {
            $($vis:vis $field:ident: $ty:ty,)*
            ..$here:ident,
            $($vis2:vis $field2:ident: $ty2:ty,)*
        }
        $($rest:tt)*
    ) => {
        with_http_blocks! {
            $(#[$meta])*
            pub(super) struct $name {
                $($vis $field: $ty,)*
                $(pub(super) $key: $kty,)*
                $($vis2 $field2: $ty2,)*
            }
        }

        impl $name {
            pub(super) fn take_settings(&mut self) -> $settings {
                $settings { $($key: self.$key.take(),)* }
            }
        }

        with_settings! { @each $settings [$($key: $kty,)*] $($rest)* }
    };
    (
        $(#[$smeta:meta])*
        pub(super) struct $settings:ident { $(pub(super) $key:ident: $kty:ty,)* }
        $($rest:tt)*
    ) => {
        $(#[$smeta])*
        pub(super) struct $settings { $(pub(super) $key: $kty,)* }

        with_settings! { @each $settings [$($key: $kty,)*] $($rest)* }
    };
}

#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with the keys `global`, `targets`, `file_sd_configs`, `http_sd_configs` and `proxies`"
)]
pub(super) struct RawConfig {
    pub(super) global: Option<RawGlobal>,
    pub(super) targets: Option<Vec<RawTarget>>,
    pub(super) file_sd_configs: Option<Vec<RawFileSd>>,
    pub(super) http_sd_configs: Option<Vec<RawHttpSd>>,
    pub(super) proxies: Option<Vec<RawProxy>>,
}

/// One entry of `file_sd_configs`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with at least `files`")]
pub(super) struct RawFileSd {
    pub(super) name: Option<String>,
    pub(super) files: Option<Vec<String>>,
    pub(super) refresh_interval: Option<String>,
    pub(super) target: Option<RawTarget>,
}

with_http_blocks! {
/// One entry of `http_sd_configs`: its own `http_config` blocks are those of the discovery
/// request; the targets' are under `target`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with at least `url`")]
pub(super) struct RawHttpSd {
    pub(super) name: Option<String>,
    pub(super) url: Option<String>,
    pub(super) refresh_interval: Option<String>,
    pub(super) timeout: Option<String>,
    pub(super) max_response_bytes: Option<RawBytes>,
    pub(super) target: Option<RawTarget>,
}
}

with_settings! {
/// The settings `global` gives every target and a target may override, as written (each
/// resolved by `Validator::settings`, once for `global` and once for each target).
pub(super) struct RawSettings {
    pub(super) connections: Option<i64>,
    pub(super) audit_interval: Option<String>,
    pub(super) ping_interval: Option<String>,
    pub(super) request_timeout: Option<String>,
    pub(super) notification_grace: Option<String>,
    pub(super) max_pages: Option<i64>,
    pub(super) max_listing_bytes: Option<RawBytes>,
    pub(super) legacy_clients: Option<bool>,
    pub(super) lists: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping of global settings")]
pub(super) struct RawGlobal {
    ..RawSettings,
}

#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a target: a mapping with at least `name` and `url` or `command`"
)]
pub(super) struct RawTarget {
    pub(super) name: Option<String>,
    pub(super) url: Option<String>,
    pub(super) transport: Option<String>,
    pub(super) command: Option<String>,
    pub(super) args: Option<Vec<String>>,
    pub(super) env: Option<PairList<VariableNames>>,
    pub(super) cwd: Option<String>,
    pub(super) protocol_version: Option<String>,
    pub(super) headers: Option<PairList>,
    pub(super) header_files: Option<PairList>,
    ..RawSettings,
    pub(super) probes: Option<Vec<probes::RawProbe>>,
    pub(super) labels: Option<PairList<LabelNames>>,
    pub(super) pins: Option<String>,
}
}

with_http_blocks! {
/// The `http_config` blocks of a `check --http-config` file, where they stand at the top level.
#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping of http_config blocks (authorization, basic_auth, oauth2, tls_config, proxy_url …)"
)]
pub(super) struct RawHttp {}
}

/// `authorization` (Prometheus: `type`, `credentials`, `credentials_file`).
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with `type` and `credentials` or `credentials_file`"
)]
pub(super) struct RawAuthorization {
    #[serde(rename = "type")]
    pub(super) kind: Option<String>,
    pub(super) credentials: Option<String>,
    pub(super) credentials_file: Option<String>,
}

/// `basic_auth`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with `username` (or `username_file`) and `password` (or `password_file`)"
)]
pub(super) struct RawBasicAuth {
    pub(super) username: Option<String>,
    pub(super) username_file: Option<String>,
    pub(super) password: Option<String>,
    pub(super) password_file: Option<String>,
}

/// `oauth2`: Prometheus' keys plus `token_endpoint_auth_method`, `private_key*`,
/// `signature_algorithm`, and the trust keys `issuer` and `metadata_origins`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields, expecting = "a mapping with at least `client_id`")]
pub(super) struct RawOAuth2 {
    pub(super) client_id: Option<String>,
    pub(super) client_secret: Option<String>,
    pub(super) client_secret_file: Option<String>,
    pub(super) token_endpoint_auth_method: Option<String>,
    pub(super) private_key: Option<String>,
    pub(super) private_key_file: Option<String>,
    pub(super) private_key_id: Option<String>,
    pub(super) signature_algorithm: Option<String>,
    pub(super) scopes: Option<Vec<String>>,
    pub(super) token_url: Option<String>,
    pub(super) issuer: Option<String>,
    pub(super) metadata_origins: Option<Vec<String>>,
    pub(super) endpoint_params: Option<PairList<ParamNames>>,
    pub(super) tls_config: Option<RawTls>,
    pub(super) proxy_url: Option<String>,
    pub(super) no_proxy: Option<String>,
    pub(super) proxy_from_environment: Option<bool>,
}

/// `tls_config`.
#[derive(Deserialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping of TLS settings (ca_file, cert_file, key_file …)"
)]
pub(super) struct RawTls {
    pub(super) ca: Option<String>,
    pub(super) ca_file: Option<String>,
    pub(super) cert: Option<String>,
    pub(super) cert_file: Option<String>,
    pub(super) key: Option<String>,
    pub(super) key_file: Option<String>,
    pub(super) server_name: Option<String>,
    pub(super) insecure_skip_verify: Option<bool>,
    pub(super) min_version: Option<String>,
    pub(super) max_version: Option<String>,
}

/// A size: a plain number of bytes, or a string with a unit (`512KiB`, `1MiB`; `KB`/`MB` mean
/// the same powers of two, as in Prometheus' `body_size_limit`).
#[derive(Deserialize)]
#[serde(
    untagged,
    expecting = "a size: bytes as a number, or a string like 256KiB or 1MiB"
)]
pub(super) enum RawBytes {
    Number(i64),
    Text(String),
}

/// A string → string mapping that keeps file order and repeated keys (so that duplicates,
/// which a map type would silently collapse, can be reported). `K` names what the keys are, for
/// the parser's message when the value is not a mapping.
pub(super) struct PairList<K = HeaderNames>(pub(super) Vec<(String, String)>, PhantomData<K>);

/// What the keys of a [`PairList`] are.
pub(super) trait PairKeys {
    const EXPECTING: &'static str;
}

/// `headers`, `header_files`.
pub(super) struct HeaderNames;

impl PairKeys for HeaderNames {
    const EXPECTING: &'static str = "a mapping of header names to strings";
}

/// `endpoint_params` of `oauth2`.
pub(super) struct ParamNames;

impl PairKeys for ParamNames {
    const EXPECTING: &'static str = "a mapping of form parameter names to strings";
}

/// `labels` of a target.
pub(super) struct LabelNames;

impl PairKeys for LabelNames {
    const EXPECTING: &'static str = "a mapping of label names to strings";
}

/// `env` of a command target.
pub(super) struct VariableNames;

impl PairKeys for VariableNames {
    const EXPECTING: &'static str = "a mapping of environment variable names to strings";
}

impl<'de, K: PairKeys> Deserialize<'de> for PairList<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<PairList<K>, D::Error> {
        struct PairVisitor<K>(PhantomData<K>);
        impl<'de, K: PairKeys> Visitor<'de> for PairVisitor<K> {
            type Value = PairList<K>;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(K::EXPECTING)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<PairList<K>, A::Error> {
                let mut pairs = Vec::new();
                while let Some(pair) = map.next_entry::<String, String>()? {
                    pairs.push(pair);
                }
                Ok(PairList(pairs, PhantomData))
            }
        }
        deserializer.deserialize_map(PairVisitor(PhantomData))
    }
}

/// `1048576`, `512KiB`, `512KB`, `1MiB`, `1MB`, `64B` → bytes (units are powers of two).
pub fn parse_bytes(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (digits, unit) = t.split_at(split);
    let n: u64 = digits.parse().ok()?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "KiB" | "KB" => 1 << 10,
        "MiB" | "MB" => 1 << 20,
        _ => return None,
    };
    n.checked_mul(scale)
}

/// `client_label:` as written: `clientInfo` or `{header: NAME}`.
#[derive(Deserialize)]
#[serde(untagged, expecting = "`clientInfo` or a mapping `{header: NAME}`")]
pub(super) enum RawClientLabel {
    Named(String),
    Header(RawHeaderLabel),
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawHeaderLabel {
    pub(super) header: String,
}

with_http_blocks! {
/// One entry of `proxies:` as written, with the `http_config` blocks of its catalog session.
#[derive(Deserialize, Default)]
#[serde(
    deny_unknown_fields,
    expecting = "a mapping with at least `name`, `listen` and `upstream`"
)]
pub(super) struct RawProxy {
    pub(super) name: Option<String>,
    pub(super) listen: Option<String>,
    pub(super) upstream: Option<String>,
    pub(super) client_label: Option<RawClientLabel>,
    pub(super) max_clients: Option<i64>,
    pub(super) max_sessions: Option<i64>,
    pub(super) session_idle_timeout: Option<String>,
    pub(super) cursor_grace: Option<String>,
    pub(super) relist_grace: Option<String>,
    pub(super) ttl_grace: Option<String>,
    pub(super) catalog_refresh_interval: Option<String>,
    pub(super) flatten_pages: Option<Vec<String>>,
    pub(super) max_request_bytes: Option<RawBytes>,
    pub(super) max_connections: Option<i64>,
    pub(super) upstream_timeout: Option<String>,
    pub(super) stream_idle_timeout: Option<String>,
    pub(super) client_idle_timeout: Option<String>,
    pub(super) forward_oauth_metadata: Option<bool>,
    pub(super) heal: Option<bool>,
    pub(super) headers: Option<PairList>,
    pub(super) header_files: Option<PairList>,
}
}
