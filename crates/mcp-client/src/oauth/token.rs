//! The client-credentials token request (OAuth 2.1 §4.2, MCP's `oauth-client-credentials`
//! extension): client authentication, the form, and reading the answer.
//!
//! Why not the `oauth2` crate: it is built on reqwest 0.12 (we use 0.13), and what we need from
//! it — one form POST and four answer fields — is smaller than the adapter, while the parts that
//! matter here (byte caps, content-type check, error bodies reduced to their `error` code,
//! RFC 7523 assertions with a configured key) it does not do for us. Signing is `jsonwebtoken`'s.

use super::fetch;
use crate::net::files::{self, MAX_SECRET_BYTES};
use crate::net::http_config::{ClientAuth, JwtAlgorithm, JwtKey, SecretSource};
use crate::net::refusal::{AuthError, AuthStep};
use base64::Engine as _;
use reqwest::header::HeaderValue;
use std::fmt;
use std::time::Duration;
use url::Url;

/// Lifetime of a client assertion: long enough for clock skew, short enough to be useless later.
const ASSERTION_LIFETIME: Duration = Duration::from_secs(60);
/// Form keys we set ourselves; `endpoint_params` cannot replace them.
const RESERVED: [&str; 7] = [
    "grant_type",
    "client_id",
    "client_secret",
    "client_assertion",
    "client_assertion_type",
    "resource",
    "scope",
];
const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

/// How the client authenticates, after `SecretAuto` was decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Basic,
    Post,
    PrivateKeyJwt,
    None,
}

/// Picks the method: the configured one, or for `SecretAuto` what the authorization server
/// lists (`client_secret_basic` preferred, also RFC 8414's default when nothing is listed).
pub(crate) fn method(auth: &ClientAuth, supported: &[String]) -> Method {
    match auth {
        ClientAuth::SecretBasic(_) => Method::Basic,
        ClientAuth::SecretPost(_) => Method::Post,
        ClientAuth::PrivateKeyJwt(_) => Method::PrivateKeyJwt,
        ClientAuth::None => Method::None,
        ClientAuth::SecretAuto(_) => {
            let has = |m: &str| supported.iter().any(|s| s == m);
            if supported.is_empty() || has("client_secret_basic") || !has("client_secret_post") {
                Method::Basic
            } else {
                Method::Post
            }
        }
    }
}

/// One token request, fully decided.
pub(crate) struct Request<'a> {
    pub endpoint: &'a Url,
    pub client_id: &'a str,
    pub auth: &'a ClientAuth,
    pub method: Method,
    /// Audience of a client assertion: the issuer when known, else the token endpoint.
    pub audience: String,
    pub resource: &'a str,
    pub scopes: &'a [String],
    pub endpoint_params: &'a [(String, String)],
}

/// An issued access token. `Debug` does not show it.
pub(crate) struct Issued {
    pub header: HeaderValue,
    pub expires_in: Option<Duration>,
}

impl fmt::Debug for Issued {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Issued")
            .field("header", &"<redacted>")
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// Sends the request and reads the token.
pub(crate) async fn request(
    http: &reqwest::Client,
    req: &Request<'_>,
) -> Result<Issued, AuthError> {
    let mut form: Vec<(&str, String)> = vec![("grant_type", "client_credentials".into())];
    if !req.resource.is_empty() {
        form.push(("resource", req.resource.to_owned()));
    }
    if !req.scopes.is_empty() {
        form.push(("scope", req.scopes.join(" ")));
    }
    let mut basic = None;
    match (req.method, req.auth) {
        (Method::Basic, ClientAuth::SecretBasic(s) | ClientAuth::SecretAuto(s)) => {
            basic = Some(basic_credentials(req.client_id, &read_secret(s)?)?);
        }
        (Method::Post, ClientAuth::SecretPost(s) | ClientAuth::SecretAuto(s)) => {
            form.push(("client_id", req.client_id.to_owned()));
            form.push(("client_secret", read_secret(s)?));
        }
        (Method::PrivateKeyJwt, ClientAuth::PrivateKeyJwt(key)) => {
            let assertion = assertion(req.client_id, &req.audience, key, &read_pem(&key.key)?)?;
            form.push(("client_id", req.client_id.to_owned()));
            form.push(("client_assertion_type", ASSERTION_TYPE.into()));
            form.push(("client_assertion", assertion));
        }
        _ => form.push(("client_id", req.client_id.to_owned())),
    }
    for (k, v) in req.endpoint_params {
        if !RESERVED.contains(&k.as_str()) {
            form.push((k.as_str(), v.clone()));
        }
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form.iter().map(|(k, v)| (*k, v.as_str())))
        .finish();
    let mut rb = http
        .post(req.endpoint.clone())
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(body);
    if let Some(b) = basic {
        rb = rb.header(reqwest::header::AUTHORIZATION, b);
    }
    let answer = fetch::send(rb, AuthStep::TokenEndpoint, "token endpoint").await?;
    if !answer.ok() {
        let code = fetch::oauth_error_code(&answer.body);
        return Err(AuthError::new(
            AuthStep::TokenEndpoint,
            match code {
                Some(c) => format!("token endpoint refused (HTTP {}): {c}", answer.status),
                None => format!("token endpoint answered HTTP {}", answer.status),
            },
        ));
    }
    let doc = answer.json(AuthStep::TokenEndpoint, "token endpoint")?;
    issued(&doc)
}

/// Reads the fields we use from a successful token answer.
fn issued(doc: &serde_json::Map<String, serde_json::Value>) -> Result<Issued, AuthError> {
    let fail = |d: &str| AuthError::new(AuthStep::TokenEndpoint, d.to_owned());
    let token = doc
        .get("access_token")
        .and_then(|v| v.as_str())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| fail("token endpoint answered without access_token"))?;
    match doc.get("token_type").and_then(|v| v.as_str()) {
        Some(t) if t.eq_ignore_ascii_case("bearer") => {}
        // Anything else (DPoP, N_A …) is a token we would present wrongly.
        Some(_) => {
            return Err(fail(
                "token endpoint issued a token that is not a Bearer token",
            ));
        }
        None => return Err(fail("token endpoint answered without token_type")),
    }
    let expires_in = match doc.get("expires_in") {
        Some(serde_json::Value::Number(n)) => n.as_f64(),
        Some(serde_json::Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|s| s.is_finite() && *s > 0.0)
    .map(|s| Duration::from_secs_f64(s.min(10.0 * 365.0 * 86400.0)));
    let mut header = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| fail("token endpoint issued a token that cannot be sent in a header"))?;
    header.set_sensitive(true);
    Ok(Issued { header, expires_in })
}

/// `Authorization: Basic` with the id and secret form-encoded first (RFC 6749 §2.3.1).
fn basic_credentials(client_id: &str, secret: &str) -> Result<HeaderValue, AuthError> {
    let enc = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let raw = format!("{}:{}", enc(client_id), enc(secret));
    let mut v = HeaderValue::from_str(&format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(raw)
    ))
    .map_err(|_| {
        AuthError::new(
            AuthStep::Credentials,
            "client credentials cannot be encoded",
        )
    })?;
    v.set_sensitive(true);
    Ok(v)
}

#[derive(serde::Serialize, serde::Deserialize, Debug)]
pub(crate) struct Claims {
    pub iss: String,
    pub sub: String,
    pub aud: String,
    pub jti: String,
    pub iat: u64,
    pub exp: u64,
}

/// An RFC 7523 §2.2 client assertion: iss = sub = client_id, a fresh `jti`, valid for
/// [`ASSERTION_LIFETIME`], and `aud` one string: the authorization server's issuer identifier,
/// as draft-ietf-oauth-rfc7523bis requires to close audience injection (the extension's text
/// still names the token endpoint, which is what we send when no issuer is known: `token_url`
/// configured without metadata).
pub(crate) fn assertion(
    client_id: &str,
    audience: &str,
    key: &JwtKey,
    pem: &[u8],
) -> Result<String, AuthError> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let bad_key = || {
        AuthError::new(
            AuthStep::Credentials,
            "private_key does not parse for signature_algorithm",
        )
    };
    let (alg, enc) = match key.algorithm {
        JwtAlgorithm::Rs256 => (Algorithm::RS256, EncodingKey::from_rsa_pem(pem)),
        JwtAlgorithm::Rs384 => (Algorithm::RS384, EncodingKey::from_rsa_pem(pem)),
        JwtAlgorithm::Rs512 => (Algorithm::RS512, EncodingKey::from_rsa_pem(pem)),
        JwtAlgorithm::Ps256 => (Algorithm::PS256, EncodingKey::from_rsa_pem(pem)),
        JwtAlgorithm::Es256 => (Algorithm::ES256, EncodingKey::from_ec_pem(pem)),
        JwtAlgorithm::Es384 => (Algorithm::ES384, EncodingKey::from_ec_pem(pem)),
        JwtAlgorithm::EdDsa => (Algorithm::EdDSA, EncodingKey::from_ed_pem(pem)),
    };
    let enc = enc.map_err(|_| bad_key())?;
    let mut header = Header::new(alg);
    header.kid = key.key_id.clone();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs();
    let claims = Claims {
        iss: client_id.to_owned(),
        sub: client_id.to_owned(),
        aud: audience.to_owned(),
        jti: jti(),
        iat: now,
        exp: now + ASSERTION_LIFETIME.as_secs(),
    };
    jsonwebtoken::encode(&header, &claims, &enc).map_err(|_| bad_key())
}

fn jti() -> String {
    let bytes: [u8; 16] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A secret, inline or read from its file now (so a rotated file is used at the next request);
/// surrounding whitespace trimmed, as Prometheus does.
pub(crate) fn read_secret(s: &SecretSource) -> Result<String, AuthError> {
    match s {
        SecretSource::Inline(v) => Ok(v.expose().trim().to_owned()),
        SecretSource::File(path) => {
            let bytes = read_file(path)?;
            String::from_utf8(bytes)
                .map(|s| s.trim().to_owned())
                .map_err(|_| credentials(path, "is not UTF-8"))
        }
    }
}

fn read_pem(s: &SecretSource) -> Result<Vec<u8>, AuthError> {
    match s {
        SecretSource::Inline(v) => Ok(v.expose().as_bytes().to_vec()),
        SecretSource::File(path) => read_file(path),
    }
}

fn read_file(path: &std::path::Path) -> Result<Vec<u8>, AuthError> {
    files::read_capped(path, MAX_SECRET_BYTES)
        .map_err(|_| credentials(path, "cannot be read"))?
        .ok_or_else(|| credentials(path, "is larger than 64 KiB"))
}

fn credentials(path: &std::path::Path, what: &str) -> AuthError {
    AuthError::new(AuthStep::Credentials, format!("{} {what}", path.display()))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::secret::Secret;

    /// A P-256 key for tests (generated for this purpose only).
    pub(crate) const EC_KEY: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgI+uRthFcwiK9ze2D
Yng0hEY22O7wUH3bOHzGI/PopSahRANCAAQpOTSR4NAX4b0ICXY0xeZQVufkbPfk
64RYxlvZ/ncdfnELEx+DJXtfnsBPFnfzcHOGSS/kEdd3Tsr0ZlycndwS
-----END PRIVATE KEY-----
";

    #[test]
    fn auto_prefers_basic() {
        let auto = ClientAuth::SecretAuto(SecretSource::Inline(Secret::new("s")));
        let l = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(method(&auto, &[]), Method::Basic);
        assert_eq!(method(&auto, &l(&["client_secret_post"])), Method::Post);
        assert_eq!(
            method(&auto, &l(&["client_secret_post", "client_secret_basic"])),
            Method::Basic
        );
        assert_eq!(method(&auto, &l(&["private_key_jwt"])), Method::Basic);
        assert_eq!(
            method(&ClientAuth::None, &l(&["client_secret_basic"])),
            Method::None
        );
    }

    #[test]
    fn basic_form_encodes_id_and_secret() {
        let v = basic_credentials("my client", "p:w&d").unwrap();
        assert!(v.is_sensitive());
        let b64 = v.to_str().unwrap().strip_prefix("Basic ").unwrap();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        assert_eq!(String::from_utf8(raw).unwrap(), "my+client:p%3Aw%26d");
    }

    #[test]
    fn assertion_claims() {
        use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode, decode_header};
        let key = JwtKey {
            key: SecretSource::Inline(Secret::new(EC_KEY)),
            key_id: Some("k1".into()),
            algorithm: JwtAlgorithm::Es256,
        };
        let aud = "https://as.ex.com";
        let jwt = assertion("client-1", aud, &key, EC_KEY.as_bytes()).unwrap();
        let header = decode_header(&jwt).unwrap();
        assert_eq!(header.alg, Algorithm::ES256);
        assert_eq!(header.kid.as_deref(), Some("k1"));
        // Verify with the public half of the test key.
        let public = "-----BEGIN PUBLIC KEY-----
MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEKTk0keDQF+G9CAl2NMXmUFbn5Gz3
5OuEWMZb2f53HX5xCxMfgyV7X57ATxZ383Bzhkkv5BHXd07K9GZcnJ3cEg==
-----END PUBLIC KEY-----
";
        let mut v = Validation::new(Algorithm::ES256);
        v.set_audience(&["https://as.ex.com"]);
        v.set_issuer(&["client-1"]);
        let data = decode::<Claims>(
            &jwt,
            &DecodingKey::from_ec_pem(public.as_bytes()).unwrap(),
            &v,
        )
        .unwrap();
        let c = data.claims;
        assert_eq!((c.iss.as_str(), c.sub.as_str()), ("client-1", "client-1"));
        assert_eq!(c.aud, aud);
        assert_eq!(c.exp - c.iat, 60);
        assert_eq!(c.jti.len(), 32);
        let again = assertion("client-1", aud, &key, EC_KEY.as_bytes()).unwrap();
        let c2 = decode::<Claims>(
            &again,
            &DecodingKey::from_ec_pem(public.as_bytes()).unwrap(),
            &v,
        )
        .unwrap()
        .claims;
        assert_ne!(c.jti, c2.jti, "every assertion has its own jti");
    }

    #[test]
    fn a_key_of_the_wrong_kind_is_a_credentials_error() {
        let key = JwtKey {
            key: SecretSource::Inline(Secret::new(EC_KEY)),
            key_id: None,
            algorithm: JwtAlgorithm::Rs256,
        };
        let e = assertion("c", "https://as", &key, EC_KEY.as_bytes()).unwrap_err();
        assert_eq!(e.step, AuthStep::Credentials);
        assert!(!e.detail.contains("PRIVATE"));
    }

    #[tokio::test]
    async fn secret_files_are_read_when_used_trimmed_and_bounded() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, "first\n").unwrap();
        let src = SecretSource::File(path.clone());
        assert_eq!(read_secret(&src).unwrap(), "first");
        std::fs::write(&path, "rotated").unwrap();
        assert_eq!(read_secret(&src).unwrap(), "rotated");
        std::fs::write(&path, vec![b'x'; 64 * 1024 + 1]).unwrap();
        let e = read_secret(&src).unwrap_err();
        assert_eq!(e.step, AuthStep::Credentials);
        assert!(e.detail.ends_with("is larger than 64 KiB"), "{}", e.detail);
        std::fs::remove_file(&path).unwrap();
        let e = read_secret(&src).unwrap_err();
        assert!(e.detail.ends_with("cannot be read"), "{}", e.detail);
    }

    #[test]
    fn token_answers() {
        let j = |v: serde_json::Value| v.as_object().unwrap().clone();
        let i = issued(&j(
            serde_json::json!({"access_token":"abc","token_type":"bearer","expires_in":"300"}),
        ))
        .unwrap();
        assert_eq!(i.header.to_str().unwrap(), "Bearer abc");
        assert!(i.header.is_sensitive());
        assert_eq!(i.expires_in, Some(Duration::from_secs(300)));
        assert!(!format!("{i:?}").contains("abc"));
        let i = issued(&j(
            serde_json::json!({"access_token":"abc","token_type":"Bearer"}),
        ))
        .unwrap();
        assert_eq!(i.expires_in, None);
        for bad in [
            serde_json::json!({"token_type":"Bearer"}),
            serde_json::json!({"access_token":"abc","token_type":"DPoP"}),
            serde_json::json!({"access_token":"a\nb","token_type":"Bearer"}),
        ] {
            let e = issued(&j(bad)).unwrap_err();
            assert_eq!(e.step, AuthStep::TokenEndpoint);
            assert!(!e.detail.contains("abc"));
        }
    }
}
