//! Validation of the `http_config` blocks (`authorization`, `basic_auth`, `oauth2`,
//! `tls_config`, `proxy_url`, `no_proxy`, `proxy_from_environment`, and our
//! `idle_connection_timeout`) into [`HttpClientConfig`].
//!
//! Everything a file names is read here, at load, with the code the running client uses
//! (`net::files`, `net::tls`): a key that does not match its certificate, an expired client
//! certificate, a JWT key of the wrong kind or a missing secret file is refused before it can
//! replace a working configuration. Messages name the field and the file's path, never a value:
//! inline secrets are [`Secret`]s from the moment they are read, and a proxy URL is shown only
//! through [`redact_url`].

use std::path::{Path, PathBuf};

use super::expand::expand_env;
use super::headers::is_token_byte;
use super::raw::{RawAuthorization, RawBasicAuth, RawHttp, RawOAuth2, RawTls};
use super::validator::{Validator, join};
use super::{
    ClientAuth, ClientCert, ConfigError, HttpClientConfig, IdleTimeout, JwtAlgorithm, JwtKey,
    OAuth2Config, PemSource, ProxyConfig, Secret, SecretSource, TargetAuth, TlsConfig, TlsVersion,
    redact_url,
};
use mcp_client::net::{files, tls};

/// The blocks one level (`global`, a target, a `--http-config` file) sets; `None`: not set here.
#[derive(Default)]
pub(super) struct HttpBlocks {
    pub(super) auth: Option<(TargetAuth, &'static str)>,
    pub(super) tls: Option<TlsConfig>,
    pub(super) proxy: Option<ProxyConfig>,
    pub(super) idle: Option<IdleTimeout>,
}

impl HttpBlocks {
    /// These blocks over `base` (the global ones): each block set here replaces the global one.
    pub(super) fn over(self, base: &HttpClientConfig) -> HttpClientConfig {
        HttpClientConfig {
            auth: self.auth.map_or_else(|| base.auth.clone(), |(a, _)| a),
            tls: self.tls.unwrap_or_else(|| base.tls.clone()),
            proxy: self.proxy.unwrap_or_else(|| base.proxy.clone()),
            idle: self.idle.unwrap_or(base.idle),
        }
    }
}

/// The name of an auth block, for messages.
pub(super) fn auth_block(auth: &TargetAuth) -> Option<&'static str> {
    match auth {
        TargetAuth::None => None,
        TargetAuth::Authorization { .. } => Some("authorization"),
        TargetAuth::Basic { .. } => Some("basic_auth"),
        TargetAuth::OAuth2(_) => Some("oauth2"),
    }
}

impl Validator<'_> {
    /// `headers.Authorization` (or `header_files`, `--header`) beside an auth block would send
    /// two credentials, or let one silently win: refused. `names`: (field path, header name).
    pub(super) fn no_authorization_header(
        &self,
        who: &str,
        names: &[(String, &str)],
        http: &HttpClientConfig,
        own_auth: Option<&str>,
    ) -> Result<(), ConfigError> {
        let Some(block) = auth_block(&http.auth) else {
            return Ok(());
        };
        let from = if own_auth.is_some() {
            ""
        } else {
            " (from global)"
        };
        if let Some((field, _)) = names
            .iter()
            .find(|(_, n)| n.eq_ignore_ascii_case("authorization"))
        {
            return Err(self.err(
                field,
                format!(
                    "{who} authenticates with `{block}`{from}: an Authorization header would \
                     conflict with it; remove one of the two"
                ),
            ));
        }
        Ok(())
    }

    /// A URL with user info (sent as basic authentication) beside an auth block: refused.
    pub(super) fn no_user_info(
        &self,
        field: &str,
        who: &str,
        url: &url::Url,
        http: &HttpClientConfig,
    ) -> Result<(), ConfigError> {
        match auth_block(&http.auth) {
            Some(block) if !url.username().is_empty() || url.password().is_some() => Err(self.err(
                field,
                format!(
                    "{who} authenticates with `{block}`, and its URL carries user info \
                         (sent as basic authentication): remove one of the two"
                ),
            )),
            _ => Ok(()),
        }
    }

    /// The blocks at `p`; `who` names the level in messages (`target "kb"`, `global`).
    pub(super) fn http_blocks(
        &self,
        p: &str,
        who: &str,
        raw: RawHttp,
    ) -> Result<HttpBlocks, ConfigError> {
        let set: Vec<&'static str> = [
            ("authorization", raw.authorization.is_some()),
            ("basic_auth", raw.basic_auth.is_some()),
            ("oauth2", raw.oauth2.is_some()),
        ]
        .into_iter()
        .filter_map(|(k, on)| on.then_some(k))
        .collect();
        if let [first, second, ..] = set[..] {
            return Err(self.err(
                join(p, second),
                format!(
                    "{who} sets both `{first}` and `{second}`; at most one way to authenticate \
                     (authorization, basic_auth or oauth2) per target"
                ),
            ));
        }
        let auth = if let Some(a) = raw.authorization {
            Some((
                self.authorization(&join(p, "authorization"), a)?,
                "authorization",
            ))
        } else if let Some(b) = raw.basic_auth {
            Some((self.basic_auth(&join(p, "basic_auth"), b)?, "basic_auth"))
        } else if let Some(o) = raw.oauth2 {
            Some((self.oauth2(&join(p, "oauth2"), o)?, "oauth2"))
        } else {
            None
        };
        let tls = raw
            .tls_config
            .map(|t| self.tls_config(&join(p, "tls_config"), t))
            .transpose()?;
        let proxy = self.proxy(p, raw.proxy_url, raw.no_proxy, raw.proxy_from_environment)?;
        // 100 ms to 24 h, as every duration of the configuration.
        let idle = self
            .duration(p, "idle_connection_timeout", raw.idle_connection_timeout)?
            .and_then(IdleTimeout::new);
        Ok(HttpBlocks {
            auth,
            tls,
            proxy,
            idle,
        })
    }

    fn authorization(&self, p: &str, raw: RawAuthorization) -> Result<TargetAuth, ConfigError> {
        let scheme = raw.kind.unwrap_or_else(|| "Bearer".to_owned());
        let field = join(p, "type");
        if scheme.is_empty() || !scheme.bytes().all(is_token_byte) {
            return Err(self.err(
                field,
                "not an HTTP authentication scheme (one word, like Bearer)",
            ));
        }
        if scheme.eq_ignore_ascii_case("basic") {
            return Err(self.err(field, "type Basic: use `basic_auth` instead"));
        }
        let credentials =
            self.required_secret(p, "credentials", raw.credentials, raw.credentials_file)?;
        Ok(TargetAuth::Authorization {
            scheme,
            credentials,
        })
    }

    fn basic_auth(&self, p: &str, raw: RawBasicAuth) -> Result<TargetAuth, ConfigError> {
        let username = self.required_secret(p, "username", raw.username, raw.username_file)?;
        let password = self.secret(p, "password", raw.password, raw.password_file)?;
        Ok(TargetAuth::Basic { username, password })
    }

    fn oauth2(&self, p: &str, raw: RawOAuth2) -> Result<TargetAuth, ConfigError> {
        let client_id = match raw.client_id {
            Some(id) => {
                expand_env(&id, self.env).map_err(|why| self.err(join(p, "client_id"), why))?
            }
            None => String::new(),
        };
        if client_id.is_empty() {
            return Err(self.err(join(p, "client_id"), "required: the client's identifier"));
        }
        let secret = self.secret(
            p,
            "client_secret",
            raw.client_secret,
            raw.client_secret_file,
        )?;
        let algorithm = match raw.signature_algorithm.as_deref() {
            None => None,
            Some(a) => Some(jwt_algorithm(a).ok_or_else(|| {
                self.err(
                    join(p, "signature_algorithm"),
                    format!(
                        "unknown signature_algorithm {a:?}; allowed: RS256, RS384, RS512, PS256, ES256, ES384, EdDSA"
                    ),
                )
            })?),
        };
        let key = self.pem_secret(p, "private_key", raw.private_key, raw.private_key_file)?;
        let method = raw.token_endpoint_auth_method;
        let method_field = join(p, "token_endpoint_auth_method");
        let needs = |what: &str| {
            self.err(
                &method_field,
                format!(
                    "token_endpoint_auth_method {} needs {what}",
                    method.as_deref().unwrap_or("")
                ),
            )
        };
        let conflict = |key: &str, why: &str| self.err(join(p, key), why.to_owned());
        if let Some(m) = method.as_deref()
            && !matches!(
                m,
                "client_secret_basic" | "client_secret_post" | "private_key_jwt" | "none"
            )
        {
            return Err(self.err(
                &method_field,
                format!(
                    "unknown token_endpoint_auth_method {m:?}; allowed: client_secret_basic, \
                     client_secret_post, private_key_jwt, none"
                ),
            ));
        }
        let client_auth = match (method.as_deref(), secret, key) {
            (_, Some(_), Some(_)) => {
                return Err(conflict(
                    "private_key",
                    "set either a client secret or a private key (private_key_jwt), not both",
                ));
            }
            (Some("none") | None, None, None) => ClientAuth::None,
            (Some("none"), _, _) => {
                return Err(conflict(
                    "token_endpoint_auth_method",
                    "`none` is a public client: remove the client secret or key",
                ));
            }
            (Some("client_secret_basic"), Some(s), None) => ClientAuth::SecretBasic(s),
            (Some("client_secret_post"), Some(s), None) => ClientAuth::SecretPost(s),
            (None, Some(s), None) => ClientAuth::SecretAuto(s),
            (Some("private_key_jwt") | None, None, Some(k)) => {
                let algorithm = algorithm.unwrap_or_default();
                self.jwt_key(p, &k, algorithm)?;
                ClientAuth::PrivateKeyJwt(JwtKey {
                    key: k,
                    key_id: raw.private_key_id,
                    algorithm,
                })
            }
            (Some("private_key_jwt"), _, None) => {
                return Err(needs("`private_key` or `private_key_file`"));
            }
            // client_secret_basic / client_secret_post without a secret
            _ => return Err(needs("`client_secret` or `client_secret_file`")),
        };
        if algorithm.is_some() && !matches!(client_auth, ClientAuth::PrivateKeyJwt(_)) {
            return Err(conflict(
                "signature_algorithm",
                "applies only to private_key_jwt (a `private_key` or `private_key_file`)",
            ));
        }
        let scopes = raw.scopes.unwrap_or_default();
        if let Some((i, _)) = scopes
            .iter()
            .enumerate()
            .find(|(_, s)| s.is_empty() || s.chars().any(|c| c.is_whitespace() || c.is_control()))
        {
            return Err(self.err(
                format!("{}[{i}]", join(p, "scopes")),
                "a scope is one non-empty word (no spaces)",
            ));
        }
        let token_url = raw
            .token_url
            .map(|u| self.http_url(&join(p, "token_url"), &u))
            .transpose()?;
        let issuer = raw
            .issuer
            .map(|u| self.issuer(&join(p, "issuer"), &u))
            .transpose()?;
        let metadata_origins = raw
            .metadata_origins
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, u)| self.origin(&format!("{}[{i}]", join(p, "metadata_origins")), u))
            .collect::<Result<Vec<_>, _>>()?;
        if token_url.is_some() {
            let discovery_only = [
                ("issuer", issuer.is_some()),
                ("metadata_origins", !metadata_origins.is_empty()),
            ];
            if let Some((key, _)) = discovery_only.iter().find(|(_, set)| *set) {
                return Err(self.err(
                    join(p, key),
                    format!(
                        "`{key}` applies only to discovery, and `token_url` is set: the \
                         credentials go to token_url and nowhere else; remove one of the two"
                    ),
                ));
            }
        }
        let endpoint_params = raw.endpoint_params.map(|e| e.0).unwrap_or_default();
        let tls = raw
            .tls_config
            .map(|t| self.tls_config(&join(p, "tls_config"), t))
            .transpose()?
            .unwrap_or_default();
        let proxy = self
            .proxy(p, raw.proxy_url, raw.no_proxy, raw.proxy_from_environment)?
            .unwrap_or_default();
        Ok(TargetAuth::OAuth2(Box::new(OAuth2Config {
            client_id,
            client_auth,
            scopes,
            token_url,
            issuer,
            metadata_origins,
            endpoint_params,
            tls,
            proxy,
        })))
    }

    /// The JWT signing key parses for `algorithm` (jsonwebtoken's own loaders, as signing uses).
    fn jwt_key(
        &self,
        p: &str,
        key: &SecretSource,
        algorithm: JwtAlgorithm,
    ) -> Result<(), ConfigError> {
        let (field, pem) = match key {
            SecretSource::Inline(s) => (join(p, "private_key"), s.expose().as_bytes().to_vec()),
            SecretSource::File(path) => (
                join(p, "private_key_file"),
                files::read_bounded(path, files::MAX_SECRET_BYTES)
                    .map_err(|why| self.err(join(p, "private_key_file"), why))?,
            ),
        };
        use jsonwebtoken::EncodingKey;
        let (parsed, kind) = match algorithm {
            JwtAlgorithm::Rs256
            | JwtAlgorithm::Rs384
            | JwtAlgorithm::Rs512
            | JwtAlgorithm::Ps256 => (EncodingKey::from_rsa_pem(&pem).map(drop), "an RSA"),
            JwtAlgorithm::Es256 | JwtAlgorithm::Es384 => {
                (EncodingKey::from_ec_pem(&pem).map(drop), "an EC (PKCS#8)")
            }
            JwtAlgorithm::EdDsa => (EncodingKey::from_ed_pem(&pem).map(drop), "an Ed25519"),
        };
        parsed.map_err(|_| {
            self.err(
                field,
                format!(
                    "not {kind} private key in PEM, as signature_algorithm {} needs",
                    algorithm_name(algorithm)
                ),
            )
        })
    }

    fn tls_config(&self, p: &str, raw: RawTls) -> Result<TlsConfig, ConfigError> {
        let ca = self.pem(p, "ca", raw.ca, raw.ca_file)?;
        let cert = self.pem(p, "cert", raw.cert, raw.cert_file)?;
        let key = self.pem_secret(p, "key", raw.key, raw.key_file)?;
        let client_cert = match (cert, key) {
            (Some(cert), Some(key)) => Some(ClientCert { cert, key }),
            (None, None) => None,
            (Some(_), None) => {
                return Err(self.err(
                    join(p, "key_file"),
                    "a client certificate needs its key: `key` or `key_file`",
                ));
            }
            (None, Some(_)) => {
                return Err(self.err(
                    join(p, "cert_file"),
                    "a client key needs its certificate: `cert` or `cert_file`",
                ));
            }
        };
        if raw.server_name.as_deref() == Some("") {
            return Err(self.err(join(p, "server_name"), "empty; remove it or name the host"));
        }
        let version = |key: &str, v: Option<String>| -> Result<Option<TlsVersion>, ConfigError> {
            v.map(|name| TlsVersion::parse(&name).map_err(|why| self.err(join(p, key), why)))
                .transpose()
        };
        let tls = TlsConfig {
            ca,
            client_cert,
            server_name: raw.server_name,
            insecure_skip_verify: raw.insecure_skip_verify.unwrap_or(false),
            min_version: version("min_version", raw.min_version)?,
            max_version: version("max_version", raw.max_version)?,
        };
        if let (Some(min), Some(max)) = (tls.min_version, tls.max_version)
            && min > max
        {
            return Err(self.err(
                join(p, "max_version"),
                "max_version is lower than min_version",
            ));
        }
        tls::Material::load(&tls).map_err(|f| self.err(join(p, f.field), f.why))?;
        Ok(tls)
    }

    /// `proxy_url`, `no_proxy`, `proxy_from_environment` at `p`; `None` when none is set.
    fn proxy(
        &self,
        p: &str,
        url: Option<String>,
        no_proxy: Option<String>,
        from_env: Option<bool>,
    ) -> Result<Option<ProxyConfig>, ConfigError> {
        match (url, no_proxy, from_env) {
            (None, None, None) => Ok(None),
            (Some(_), _, Some(true)) => Err(self.err(
                join(p, "proxy_from_environment"),
                "set either `proxy_url` or `proxy_from_environment`, not both",
            )),
            (None, Some(_), _) => Err(self.err(
                join(p, "no_proxy"),
                "applies only with `proxy_url` (with proxy_from_environment, NO_PROXY is read)",
            )),
            (None, None, Some(true)) => Ok(Some(ProxyConfig::FromEnvironment)),
            (None, None, Some(false)) => Ok(Some(ProxyConfig::Direct)),
            (Some(raw), no_proxy, _) => {
                let field = join(p, "proxy_url");
                let url = self.http_url(&field, &raw)?;
                let no_proxy = no_proxy
                    .unwrap_or_default()
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                Ok(Some(ProxyConfig::Url { url, no_proxy }))
            }
        }
    }

    /// An http(s) URL (`${VAR}` expanded); never quoted whole in a message.
    fn http_url(&self, field: &str, raw: &str) -> Result<url::Url, ConfigError> {
        let text = expand_env(raw, self.env).map_err(|why| self.err(field, why))?;
        let url = url::Url::parse(&text).map_err(|e| self.err(field, format!("not a URL: {e}")))?;
        if !matches!(url.scheme(), "http" | "https") || !url.has_host() {
            return Err(self.err(
                field,
                format!("{} is not an http:// or https:// URL", redact_url(&url)),
            ));
        }
        Ok(url)
    }

    /// `oauth2.issuer`: an RFC 8414 issuer identifier, which has no query or fragment (§2), and
    /// no user info (it names a server, not a login).
    fn issuer(&self, field: &str, raw: &str) -> Result<url::Url, ConfigError> {
        let url = self.http_url(field, raw)?;
        if url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err(self.err(
                field,
                "an issuer identifier has no user info, query or fragment (RFC 8414 section 2); \
                 write it as the authorization server publishes it in its metadata's `issuer`",
            ));
        }
        Ok(url)
    }

    /// An origin: scheme, host and optional port, nothing else (no path, query or user info).
    fn origin(&self, field: &str, raw: &str) -> Result<url::Url, ConfigError> {
        let url = self.http_url(field, raw)?;
        if url.path() != "/"
            || url.query().is_some()
            || url.fragment().is_some()
            || !url.username().is_empty()
            || url.password().is_some()
        {
            return Err(self.err(
                field,
                format!(
                    "an origin is a scheme, host and port only, like {}",
                    mcp_client::net::origin::shown(&url)
                ),
            ));
        }
        Ok(url)
    }

    /// `key` inline (`${VAR}` expanded, checked as a header value) or `key_file` (read now).
    fn secret(
        &self,
        p: &str,
        key: &str,
        inline: Option<String>,
        file: Option<String>,
    ) -> Result<Option<SecretSource>, ConfigError> {
        let no_controls = |field: &str, value: &str, what: &str| {
            if value.chars().any(char::is_control) {
                return Err(self.err(
                    field,
                    format!("{what}contains a line break or another control character"),
                ));
            }
            Ok(())
        };
        self.one_of(
            p,
            key,
            (inline, file),
            |raw, field| {
                let value = expand_env(&raw, self.env).map_err(|why| self.err(field, why))?;
                if value.is_empty() {
                    return Err(self.err(field, "empty"));
                }
                no_controls(field, &value, "")?;
                Ok(SecretSource::Inline(Secret::new(value)))
            },
            |path, field| {
                let value = files::read_secret(&path).map_err(|why| self.err(field, why))?;
                no_controls(field, &value, &format!("{} ", path.display()))?;
                Ok(SecretSource::File(path))
            },
        )
    }

    fn required_secret(
        &self,
        p: &str,
        key: &str,
        inline: Option<String>,
        file: Option<String>,
    ) -> Result<SecretSource, ConfigError> {
        self.secret(p, key, inline, file)?
            .ok_or_else(|| self.err(join(p, key), format!("required: `{key}` or `{key}_file`")))
    }

    /// A PEM key: inline (a [`Secret`], not expanded) or a file (checked by the caller).
    fn pem_secret(
        &self,
        p: &str,
        key: &str,
        inline: Option<String>,
        file: Option<String>,
    ) -> Result<Option<SecretSource>, ConfigError> {
        self.one_of(
            p,
            key,
            (inline, file),
            |pem, _| Ok(SecretSource::Inline(Secret::new(pem))),
            |path, _| Ok(SecretSource::File(path)),
        )
    }

    /// A certificate bundle: inline or a file (checked by the caller).
    fn pem(
        &self,
        p: &str,
        key: &str,
        inline: Option<String>,
        file: Option<String>,
    ) -> Result<Option<PemSource>, ConfigError> {
        self.one_of(
            p,
            key,
            (inline, file),
            |pem, _| Ok(PemSource::Inline(pem)),
            |path, _| Ok(PemSource::File(path)),
        )
    }

    /// `key` or `key_file` (a path resolved against the configuration's folder), not both;
    /// each made into a value by its function, given the field path for messages.
    fn one_of<T>(
        &self,
        p: &str,
        key: &str,
        (inline, file): (Option<String>, Option<String>),
        from_inline: impl FnOnce(String, &str) -> Result<T, ConfigError>,
        from_file: impl FnOnce(PathBuf, &str) -> Result<T, ConfigError>,
    ) -> Result<Option<T>, ConfigError> {
        match (inline, file) {
            (Some(_), Some(_)) => Err(self.both(p, key)),
            (None, None) => Ok(None),
            (Some(value), None) => from_inline(value, &join(p, key)).map(Some),
            (None, Some(raw)) => {
                let field = format!("{}_file", join(p, key));
                from_file(self.file_path(&field, &raw)?, &field).map(Some)
            }
        }
    }

    fn both(&self, p: &str, key: &str) -> ConfigError {
        self.err(
            format!("{}_file", join(p, key)),
            format!("set either `{key}` or `{key}_file`, not both"),
        )
    }

    /// A path, relative ones resolved against the configuration file's folder.
    fn file_path(&self, field: &str, raw: &str) -> Result<PathBuf, ConfigError> {
        if raw.is_empty() {
            return Err(self.err(field, "file path is empty"));
        }
        let path = Path::new(raw);
        Ok(match self.base_dir {
            Some(base) if path.is_relative() => base.join(path),
            _ => path.to_path_buf(),
        })
    }
}

fn jwt_algorithm(name: &str) -> Option<JwtAlgorithm> {
    Some(match name {
        "RS256" => JwtAlgorithm::Rs256,
        "RS384" => JwtAlgorithm::Rs384,
        "RS512" => JwtAlgorithm::Rs512,
        "PS256" => JwtAlgorithm::Ps256,
        "ES256" => JwtAlgorithm::Es256,
        "ES384" => JwtAlgorithm::Es384,
        "EdDSA" => JwtAlgorithm::EdDsa,
        _ => return None,
    })
}

fn algorithm_name(a: JwtAlgorithm) -> &'static str {
    match a {
        JwtAlgorithm::Rs256 => "RS256",
        JwtAlgorithm::Rs384 => "RS384",
        JwtAlgorithm::Rs512 => "RS512",
        JwtAlgorithm::Ps256 => "PS256",
        JwtAlgorithm::Es256 => "ES256",
        JwtAlgorithm::Es384 => "ES384",
        JwtAlgorithm::EdDsa => "EdDSA",
    }
}

#[cfg(test)]
mod tests {
    use crate::config::test_support::*;
    use crate::config::*;
    use std::path::Path;

    /// A CA, and a client certificate it signed valid until `not_after` (year), with its key.
    struct Pki {
        ca: String,
        cert: String,
        key: String,
    }

    fn pki(not_after_year: i32) -> Pki {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_cert = ca.self_signed(&ca_key).unwrap();
        let issuer = rcgen::Issuer::new(ca, ca_key);
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec!["client".into()]).unwrap();
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(not_after_year, 1, 1);
        let cert = params.signed_by(&key, &issuer).unwrap();
        Pki {
            ca: ca_cert.pem(),
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    fn load(dir: &Path, yaml: &str) -> Result<Config, ConfigError> {
        let path = write(dir, "config.yml", yaml.as_bytes());
        Config::load(&path)
    }

    fn load_err(dir: &Path, yaml: &str) -> String {
        let e = load(dir, yaml).unwrap_err().to_string();
        assert!(!e.contains(SENTINEL), "{e}");
        assert!(!e.contains("PRIVATE KEY"), "{e}");
        e.replace(&format!("{}/", dir.display()), "")
    }

    fn target(extra: &str) -> String {
        format!("targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n{extra}")
    }

    #[test]
    fn tls_files_are_resolved_and_checked_at_load() {
        let dir = tempfile::tempdir().unwrap();
        let p = pki(2200);
        write(dir.path(), "ca.pem", p.ca.as_bytes());
        write(dir.path(), "client.pem", p.cert.as_bytes());
        write(dir.path(), "client.key", p.key.as_bytes());
        let tls = "    tls_config:\n      ca_file: ca.pem\n      cert_file: client.pem\n      key_file: client.key\n      server_name: mcp.internal\n      min_version: TLS13\n";
        let c = load(dir.path(), &target(tls)).unwrap();
        let t = &c.targets[0].http.tls;
        assert_eq!(t.ca, Some(PemSource::File(dir.path().join("ca.pem"))));
        let cc = t.client_cert.as_ref().unwrap();
        assert_eq!(cc.key, SecretSource::File(dir.path().join("client.key")));
        assert_eq!(t.server_name.as_deref(), Some("mcp.internal"));
        assert_eq!(t.min_version, Some(TlsVersion::Tls13));

        // missing key file
        let e = load_err(
            dir.path(),
            &target(&tls.replace("client.key", "missing.key")),
        );
        assert!(
            e.starts_with("config.yml: targets[0].tls_config.key_file: cannot read missing.key: "),
            "{e}"
        );
        // a key of another certificate
        let other = pki(2200);
        write(dir.path(), "other.key", other.key.as_bytes());
        let e = load_err(dir.path(), &target(&tls.replace("client.key", "other.key")));
        assert_eq!(
            e,
            "config.yml: targets[0].tls_config.key_file: the private key does not belong to the certificate in cert_file"
        );
        // an expired client certificate
        let old = pki(2001);
        write(dir.path(), "old.pem", old.cert.as_bytes());
        write(dir.path(), "old.key", old.key.as_bytes());
        let e = load_err(
            dir.path(),
            &target(
                &tls.replace("client.pem", "old.pem")
                    .replace("client.key", "old.key"),
            ),
        );
        assert!(
            e.starts_with("config.yml: targets[0].tls_config.cert_file: the client certificate expired at 2001-01-01T00:00:00Z"),
            "{e}"
        );
        // not PEM at all
        write(dir.path(), "junk.pem", b"hello");
        let e = load_err(dir.path(), &target(&tls.replace("ca.pem", "junk.pem")));
        assert_eq!(
            e,
            "config.yml: targets[0].tls_config.ca_file: no PEM certificate (BEGIN CERTIFICATE) found"
        );
        // half a pair, both forms, old versions
        let e = load_err(
            dir.path(),
            &target("    tls_config:\n      cert_file: client.pem\n"),
        );
        assert_eq!(
            e,
            "config.yml: targets[0].tls_config.key_file: a client certificate needs its key: `key` or `key_file`"
        );
        let e = load_err(
            dir.path(),
            &target("    tls_config:\n      ca_file: ca.pem\n      ca: x\n"),
        );
        assert_eq!(
            e,
            "config.yml: targets[0].tls_config.ca_file: set either `ca` or `ca_file`, not both"
        );
        let e = load_err(
            dir.path(),
            &target("    tls_config:\n      min_version: TLS11\n"),
        );
        assert!(
            e.contains("targets[0].tls_config.min_version: TLS11 is not supported"),
            "{e}"
        );
        let e = load_err(
            dir.path(),
            &target("    tls_config:\n      max_version: TLS1.3\n"),
        );
        assert!(
            e.contains("targets[0].tls_config.max_version: unknown TLS version \"TLS1.3\""),
            "{e}"
        );
        // inline PEM works too; the key stays a secret in Debug
        let inline = format!(
            "    tls_config:\n      cert: |\n{}      key: |\n{}",
            indent(&p.cert),
            indent(&p.key)
        );
        let c = load(dir.path(), &target(&inline)).unwrap();
        assert!(!format!("{c:?}").contains("PRIVATE KEY"));
    }

    fn indent(pem: &str) -> String {
        pem.lines().map(|l| format!("        {l}\n")).collect()
    }

    #[test]
    fn one_auth_block_per_target() {
        let e = err(&one_target(
            "    authorization:\n      credentials: x\n    basic_auth:\n      username: u\n",
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].basic_auth: target \"kb\" sets both `authorization` and `basic_auth`; at most one way to authenticate (authorization, basic_auth or oauth2) per target"
        );
        let e = err("global:\n  basic_auth: {username: u}\n  oauth2: {client_id: c}\n");
        assert_has(
            &e,
            "test.yml: global.oauth2: global sets both `basic_auth` and `oauth2`",
        );
        // a target's block replaces the global one, of any kind
        let c = ok(&format!(
            "global:\n  basic_auth: {{username: u, password: p}}\n  proxy_url: http://proxy:3128\n{}",
            &one_target("    authorization:\n      credentials: ${KB_TOKEN}\n")[0..]
        ));
        let t = &c.targets[0];
        assert!(
            matches!(t.http.auth, TargetAuth::Authorization { ref scheme, .. } if scheme == "Bearer")
        );
        assert!(matches!(t.http.proxy, ProxyConfig::Url { .. }));
        assert!(!format!("{c:?}").contains(SENTINEL));
    }

    #[test]
    fn an_authorization_header_beside_an_auth_block_is_refused() {
        let e = err(&one_target(
            "    headers:\n      authorization: Bearer x\n    basic_auth: {username: u}\n",
        ));
        assert_eq!(
            e,
            "test.yml: targets[0].headers.authorization: target \"kb\" authenticates with `basic_auth`: an Authorization header would conflict with it; remove one of the two"
        );
        let e = err(
            "targets:\n  - name: kb\n    url: https://u:p@kb.example.com/mcp\n    basic_auth: {username: u}\n",
        );
        assert_eq!(
            e,
            "test.yml: targets[0].url: target \"kb\" authenticates with `basic_auth`, and its URL carries user info (sent as basic authentication): remove one of the two"
        );
        let e = err(&format!(
            "global:\n  authorization: {{credentials: x}}\n{}",
            one_target("    headers:\n      Authorization: Bearer x\n")
        ));
        assert_has(&e, "authenticates with `authorization` (from global)");
    }

    #[test]
    fn command_targets_refuse_http_blocks_and_ignore_global_ones() {
        for key in ["authorization", "basic_auth", "oauth2", "tls_config"] {
            let e = err(&format!(
                "targets:\n  - name: local\n    command: server\n    {key}: {{}}\n"
            ));
            assert_has(
                &e,
                &format!(
                    "targets[0].{key}: target \"local\" runs a `command` (stdio): `{key}` applies only to a target with a `url`"
                ),
            );
        }
        let c = ok(
            "global:\n  basic_auth: {username: u}\ntargets:\n  - name: local\n    command: server\n",
        );
        assert_eq!(c.targets[0].http, HttpClientConfig::default());
    }

    #[test]
    fn secrets_and_proxy_passwords_stay_out_of_debug_and_errors() {
        let c = ok(&one_target(&format!(
            "    basic_auth:\n      username: u\n      password: {SENTINEL}\n    proxy_url: 'http://p:{SENTINEL}@proxy.example:3128'\n    no_proxy: '10.0.0.0/8, .internal'\n"
        )));
        let t = &c.targets[0];
        let shown = format!("{t:?}");
        assert!(!shown.contains(SENTINEL), "{shown}");
        assert_has(&shown, "http://p:<redacted>@proxy.example:3128/");
        assert_eq!(
            t.http.proxy.to_string(),
            "http://p:<redacted>@proxy.example:3128/ (except 10.0.0.0/8,.internal)"
        );
        let e = err(&one_target(&format!(
            "    proxy_url: 'ftp://p:{SENTINEL}@proxy.example'\n"
        )));
        assert_has(
            &e,
            "targets[0].proxy_url: ftp://p:<redacted>@proxy.example/ is not an http:// or https:// URL",
        );
        let e = err(&one_target("    no_proxy: localhost\n"));
        assert_has(&e, "targets[0].no_proxy: applies only with `proxy_url`");
        let e = err(&one_target(
            "    proxy_url: http://proxy:1\n    proxy_from_environment: true\n",
        ));
        assert_has(&e, "targets[0].proxy_from_environment: set either");
        let e = err(&one_target(
            "    authorization:\n      credentials: ${WITH_NEWLINE}\n",
        ));
        assert_has(
            &e,
            "targets[0].authorization.credentials: contains a line break",
        );
        let e = err(&one_target(
            "    authorization:\n      type: Basic\n      credentials: x\n",
        ));
        assert_has(
            &e,
            "targets[0].authorization.type: type Basic: use `basic_auth` instead",
        );
    }

    #[test]
    fn oauth2_client_authentication_and_jwt_keys() {
        let dir = tempfile::tempdir().unwrap();
        let rsa = rcgen::KeyPair::generate_for(&rcgen::PKCS_RSA_SHA256);
        let ec = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        write(dir.path(), "ec.key", ec.serialize_pem().as_bytes());
        write(dir.path(), "secret", b"s\n");
        let o = |body: &str| target(&format!("    oauth2:\n      client_id: c\n{body}"));
        let c = load(dir.path(), &o("      private_key_file: ec.key\n      signature_algorithm: ES256\n      scopes: [a, b]\n")).unwrap();
        let TargetAuth::OAuth2(cfg) = &c.targets[0].http.auth else {
            panic!("oauth2")
        };
        assert!(
            matches!(&cfg.client_auth, ClientAuth::PrivateKeyJwt(k) if k.algorithm == JwtAlgorithm::Es256)
        );
        assert_eq!(cfg.scopes, ["a", "b"]);
        assert_eq!(cfg.token_url, None);
        // an EC key for an RSA algorithm
        let e = load_err(
            dir.path(),
            &o("      private_key_file: ec.key\n      signature_algorithm: RS256\n"),
        );
        assert_eq!(
            e,
            "config.yml: targets[0].oauth2.private_key_file: not an RSA private key in PEM, as signature_algorithm RS256 needs"
        );
        if let Ok(rsa) = rsa {
            write(dir.path(), "rsa.key", rsa.serialize_pem().as_bytes());
            load(dir.path(), &o("      private_key_file: rsa.key\n")).unwrap();
        }
        let c = load(dir.path(), &o("      client_secret_file: secret\n")).unwrap();
        let TargetAuth::OAuth2(cfg) = &c.targets[0].http.auth else {
            panic!("oauth2")
        };
        assert_eq!(
            cfg.client_auth,
            ClientAuth::SecretAuto(SecretSource::File(dir.path().join("secret")))
        );
        let e = load_err(
            dir.path(),
            &o("      token_endpoint_auth_method: client_secret_post\n"),
        );
        assert_has(
            &e,
            "targets[0].oauth2.token_endpoint_auth_method: token_endpoint_auth_method client_secret_post needs `client_secret` or `client_secret_file`",
        );
        let e = load_err(
            dir.path(),
            &o("      token_endpoint_auth_method: private_key_jwt\n"),
        );
        assert_has(&e, "needs `private_key` or `private_key_file`");
        let e = load_err(dir.path(), &o("      token_endpoint_auth_method: magic\n"));
        assert_has(&e, "unknown token_endpoint_auth_method \"magic\"");
        let e = load_err(
            dir.path(),
            &o("      client_secret: x\n      signature_algorithm: ES256\n"),
        );
        assert_has(
            &e,
            "targets[0].oauth2.signature_algorithm: applies only to private_key_jwt",
        );
        let e = load_err(dir.path(), &o("      client_secret_file: missing\n"));
        assert_has(
            &e,
            "targets[0].oauth2.client_secret_file: cannot read missing: ",
        );
        let e = load_err(
            dir.path(),
            "targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n    oauth2: {client_secret: x}\n",
        );
        assert_has(&e, "targets[0].oauth2.client_id: required");
        assert_eq!(
            load(dir.path(), &o("      token_url: https://as.example/token\n      endpoint_params: {audience: mcp}\n")).map(|c| match &c.targets[0].http.auth {
                TargetAuth::OAuth2(o) => (o.client_auth.clone(), o.endpoint_params.clone()),
                _ => panic!("oauth2"),
            }).unwrap(),
            (ClientAuth::None, vec![("audience".into(), "mcp".into())])
        );
    }

    #[test]
    fn oauth2_issuer_and_metadata_origins() {
        let o = |body: &str| one_target(&format!("    oauth2:\n      client_id: c\n{body}"));
        let oauth = |c: &Config| match &c.targets[0].http.auth {
            TargetAuth::OAuth2(o) => (o.issuer.clone(), o.metadata_origins.clone()),
            _ => panic!("oauth2"),
        };
        // Neither set: the default (the MCP URL's own origin only).
        assert_eq!(oauth(&ok(&o(""))), (None, Vec::new()));
        let c = ok(&o(
            "      issuer: https://auth.example.com/tenant1\n      metadata_origins: [https://meta.example.com, 'https://${HOST}:8443/']\n",
        ));
        let (issuer, origins) = oauth(&c);
        assert_eq!(
            issuer.map(String::from).as_deref(),
            Some("https://auth.example.com/tenant1")
        );
        assert_eq!(
            origins.iter().map(|u| u.as_str()).collect::<Vec<_>>(),
            [
                "https://meta.example.com/",
                "https://tickets.example.com:8443/"
            ]
        );
        let e = err(&o(
            "      issuer: https://auth.example.com/?tenant=${KB_TOKEN}\n",
        ));
        assert_has(
            &e,
            "test.yml: targets[0].oauth2.issuer: an issuer identifier has no user info, query or fragment",
        );
        let e = err(&o(&format!(
            "      issuer: 'https://u:{SENTINEL}@auth.example.com'\n"
        )));
        assert_has(
            &e,
            "targets[0].oauth2.issuer: an issuer identifier has no user info",
        );
        let e = err(&o("      issuer: ftp://auth.example.com\n"));
        assert_has(
            &e,
            "test.yml: targets[0].oauth2.issuer: ftp://auth.example.com/ is not an http:// or https:// URL",
        );
        let e = err(&o(
            "      metadata_origins: [https://meta.example.com, https://meta.example.com/prm]\n",
        ));
        assert_has(
            &e,
            "test.yml: targets[0].oauth2.metadata_origins[1]: an origin is a scheme, host and port only, like https://meta.example.com",
        );
        let e = err(&o(&format!(
            "      metadata_origins: ['https://u:{SENTINEL}@meta.example.com']\n"
        )));
        assert_has(&e, "targets[0].oauth2.metadata_origins[0]: an origin is");
        for key in [
            "issuer: https://a.example",
            "metadata_origins: [https://a.example]",
        ] {
            let e = err(&o(&format!(
                "      token_url: https://a.example/token\n      {key}\n"
            )));
            let name = key.split(':').next().unwrap();
            assert_has(
                &e,
                &format!(
                    "targets[0].oauth2.{name}: `{name}` applies only to discovery, and `token_url` is set"
                ),
            );
        }
        let e = err(&o("      issuers: [https://a.example]\n"));
        assert_has(&e, "unknown field `issuers`");
    }

    #[test]
    fn an_http_config_file_holds_the_blocks_at_top_level() {
        let dir = tempfile::tempdir().unwrap();
        write(dir.path(), "token", b"t0k3n\n");
        let path = write(
            dir.path(),
            "http.yml",
            b"authorization:\n  credentials_file: token\nproxy_from_environment: true\n",
        );
        let c = super::super::load_http_config(&path).unwrap();
        assert_eq!(
            c.auth,
            TargetAuth::Authorization {
                scheme: "Bearer".into(),
                credentials: SecretSource::File(dir.path().join("token")),
            }
        );
        assert_eq!(c.proxy, ProxyConfig::FromEnvironment);
        let bad = write(dir.path(), "bad.yml", b"tls_config:\n  ca_file: nope.pem\n");
        let e = super::super::load_http_config(&bad)
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with(&format!(
                "{}: tls_config.ca_file: cannot read ",
                bad.display()
            )),
            "{e}"
        );
        let typo = write(dir.path(), "typo.yml", b"tls_confg: {}\n");
        assert!(
            super::super::load_http_config(&typo)
                .unwrap_err()
                .to_string()
                .contains("unknown field `tls_confg`")
        );
    }
}
