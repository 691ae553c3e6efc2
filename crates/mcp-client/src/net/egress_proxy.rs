//! `proxy_url`, `no_proxy`, `proxy_from_environment` → reqwest's proxy settings.
//!
//! As in Prometheus, a target goes direct unless its configuration names a proxy: the
//! environment's `HTTP(S)_PROXY` is used only with `proxy_from_environment: true`, so an
//! exporter's view of a server does not change with the shell it was started from.

use crate::net::http_config::ProxyConfig;
use crate::secret::redact_url;

/// Apply `proxy` to a client under construction.
pub fn apply(
    builder: reqwest::ClientBuilder,
    proxy: &ProxyConfig,
) -> Result<reqwest::ClientBuilder, String> {
    Ok(match proxy {
        ProxyConfig::Direct => builder.no_proxy(),
        // reqwest's default: HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY.
        ProxyConfig::FromEnvironment => builder,
        ProxyConfig::Url { url, no_proxy } => {
            let p = reqwest::Proxy::all(url.as_str())
                .map_err(|_| format!("proxy_url {} is not usable", redact_url(url)))?;
            let p = p.no_proxy(reqwest::NoProxy::from_string(&no_proxy.join(",")));
            builder.no_proxy().proxy(p)
        }
    })
}
