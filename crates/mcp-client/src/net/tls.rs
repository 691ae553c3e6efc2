//! `tls_config` → a rustls client configuration, and the checks of its key material.
//!
//! Built here rather than through reqwest's TLS options because those cannot express what
//! Prometheus' `tls_config` does: a CA bundle that *replaces* the platform's roots, a
//! `server_name` the certificate is verified against instead of the URL's host, and a client
//! certificate whose files are re-read when they are renewed. The result goes to reqwest as a
//! preconfigured rustls `ClientConfig` (same rustls and provider, aws-lc-rs, as reqwest's own).
//!
//! The same loaders serve the configuration's load-time checks (so a reload with a key that
//! does not match its certificate is refused, naming the field) and the running client's
//! rebuilds (so a renewal is checked the same way before it replaces the working client).

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

use super::files;
use crate::net::http_config::{PemSource, SecretSource, TlsConfig, TlsVersion};

/// A problem with one field of a `tls_config`: the field's name (`ca_file`, `key` …) and why.
/// Never holds key material.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFault {
    pub field: &'static str,
    pub why: String,
}

/// The certificates and key a `tls_config` names, read and checked.
pub struct Material {
    roots: Option<Vec<CertificateDer<'static>>>,
    client: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::aws_lc_rs::default_provider())
}

impl Material {
    /// Read every PEM the configuration names and check it: certificates parse, the key parses
    /// and belongs to the certificate, the certificate has not expired.
    pub fn load(tls: &TlsConfig) -> Result<Material, TlsFault> {
        let roots = match &tls.ca {
            None => None,
            Some(ca) => {
                let field = pem_field(ca, "ca", "ca_file");
                let certs = files::certificates(
                    &files::read_pem(ca, files::MAX_PEM_BYTES)
                        .map_err(|why| TlsFault { field, why })?,
                )
                .map_err(|why| TlsFault { field, why })?;
                Some(certs)
            }
        };
        let client = match &tls.client_cert {
            None => None,
            Some(cc) => {
                let cert_field = pem_field(&cc.cert, "cert", "cert_file");
                let key_field = match cc.key {
                    SecretSource::Inline(_) => "key",
                    SecretSource::File(_) => "key_file",
                };
                let fault = |field| move |why| TlsFault { field, why };
                let chain = files::certificates(
                    &files::read_pem(&cc.cert, files::MAX_PEM_BYTES).map_err(fault(cert_field))?,
                )
                .map_err(fault(cert_field))?;
                let key_pem = match &cc.key {
                    SecretSource::Inline(s) => s.expose().as_bytes().to_vec(),
                    SecretSource::File(p) => {
                        files::read_bounded(p, files::MAX_SECRET_BYTES).map_err(fault(key_field))?
                    }
                };
                let key = files::private_key(&key_pem).map_err(fault(key_field))?;
                check_pair(&chain, &key, cert_field, key_field)?;
                Some((chain, key))
            }
        };
        Ok(Material { roots, client })
    }
}

fn pem_field(src: &PemSource, inline: &'static str, file: &'static str) -> &'static str {
    match src {
        PemSource::Inline(_) => inline,
        PemSource::File(_) => file,
    }
}

/// The key belongs to the first certificate, which has not expired.
fn check_pair(
    chain: &[CertificateDer<'static>],
    key: &PrivateKeyDer<'static>,
    cert_field: &'static str,
    key_field: &'static str,
) -> Result<(), TlsFault> {
    let provider = provider();
    let signing = provider
        .key_provider
        .load_private_key(key.clone_key())
        .map_err(|e| TlsFault {
            field: key_field,
            why: format!("unusable private key: {e}"),
        })?;
    let certified = rustls::sign::CertifiedKey::new(chain.to_vec(), signing);
    match certified.keys_match() {
        Ok(()) | Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::Unknown)) => {}
        Err(_) => {
            return Err(TlsFault {
                field: key_field,
                why: format!("the private key does not belong to the certificate in {cert_field}"),
            });
        }
    }
    if let Some(not_after) = not_after(&chain[0]) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        if not_after < now {
            return Err(TlsFault {
                field: cert_field,
                why: format!(
                    "the client certificate expired at {} (Unix time {not_after})",
                    humantime::format_rfc3339_seconds(
                        UNIX_EPOCH + std::time::Duration::from_secs(not_after.max(0) as u64)
                    )
                ),
            });
        }
    }
    Ok(())
}

/// The rustls versions from `min` to `max` (each end open when `None`), oldest first: the
/// exporter's client and its web server's alike.
pub fn versions(
    min: Option<TlsVersion>,
    max: Option<TlsVersion>,
) -> Vec<&'static rustls::SupportedProtocolVersion> {
    [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| min.is_none_or(|min| *v >= min))
    .filter(|(v, _)| max.is_none_or(|max| *v <= max))
    .map(|(_, p)| p)
    .collect()
}

/// A rustls client configuration for `tls` with `material` (from [`Material::load`]).
pub fn client_config(tls: &TlsConfig, material: Material) -> Result<rustls::ClientConfig, String> {
    let provider = provider();
    let versions = versions(tls.min_version, tls.max_version);
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| format!("TLS versions: {e}"))?;
    let inner: Option<Arc<dyn ServerCertVerifier>> = if tls.insecure_skip_verify {
        None
    } else if let Some(roots) = material.roots {
        let mut store = rustls::RootCertStore::empty();
        for cert in roots {
            store
                .add(cert)
                .map_err(|e| format!("CA certificate not usable as a root: {e}"))?;
        }
        Some(
            rustls::client::WebPkiServerVerifier::builder_with_provider(
                Arc::new(store),
                provider.clone(),
            )
            .build()
            .map_err(|e| format!("CA roots: {e}"))?,
        )
    } else {
        Some(Arc::new(
            rustls_platform_verifier::Verifier::new(provider.clone())
                .map_err(|e| format!("platform roots: {e}"))?,
        ))
    };
    let name = match &tls.server_name {
        Some(name) => Some(
            ServerName::try_from(name.clone())
                .map_err(|_| format!("server_name {name:?} is not a DNS name or IP address"))?,
        ),
        None => None,
    };
    let verifier = Arc::new(Verifier {
        inner,
        name,
        provider,
    });
    let builder = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier);
    let mut config = match material.client {
        None => builder.with_no_client_auth(),
        Some((chain, key)) => builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("client certificate: {e}"))?,
    };
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Whether `tls` asks for anything beyond reqwest's defaults (platform roots, no client cert).
pub fn is_default(tls: &TlsConfig) -> bool {
    *tls == TlsConfig::default()
}

/// How the server's certificate is judged: by `inner` (the configured CA, or the platform's
/// roots) for `name` when `server_name` is set (a target reached by IP address, or through a
/// name its certificate does not carry), else for the URL's host; with `insecure_skip_verify`
/// (`inner` none) not at all. Handshake signatures are always checked: they prove the peer holds
/// the key of the certificate it sent.
#[derive(Debug)]
struct Verifier {
    inner: Option<Arc<dyn ServerCertVerifier>>,
    name: Option<ServerName<'static>>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match &self.inner {
            None => Ok(ServerCertVerified::assertion()),
            Some(inner) => inner.verify_server_cert(
                end_entity,
                intermediates,
                self.name.as_ref().unwrap_or(server_name),
                ocsp,
                now,
            ),
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// The certificate's `notAfter` as Unix seconds; `None` when it cannot be read (the TLS
/// handshake then judges the certificate).
fn not_after(cert: &CertificateDer<'_>) -> Option<i64> {
    let (_, certificate, _) = der(cert.as_ref())?;
    let (_, mut tbs, _) = der(certificate)?;
    // version [0] EXPLICIT, optional
    if tbs.first() == Some(&0xa0) {
        tbs = der(tbs)?.2;
    }
    let (_, _, rest) = der(tbs)?; // serialNumber
    let (_, _, rest) = der(rest)?; // signature
    let (_, _, rest) = der(rest)?; // issuer
    let (_, validity, _) = der(rest)?;
    let (_, _, rest) = der(validity)?; // notBefore
    let (tag, time, _) = der(rest)?;
    asn1_time(tag, std::str::from_utf8(time).ok()?)
}

/// One DER element: (tag, content, rest).
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, mut rest) = rest.split_first()?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let (bytes, after) = rest.split_at(n);
        rest = after;
        bytes
            .iter()
            .fold(0usize, |acc, b| (acc << 8) | usize::from(*b))
    };
    if rest.len() < len {
        return None;
    }
    let (content, rest) = rest.split_at(len);
    Some((tag, content, rest))
}

/// UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) → Unix seconds.
fn asn1_time(tag: u8, text: &str) -> Option<i64> {
    let digits = text.strip_suffix('Z')?;
    let (year, rest) = match (tag, digits.len()) {
        (0x17, 12) => {
            let yy: i64 = digits[..2].parse().ok()?;
            (if yy >= 50 { 1900 + yy } else { 2000 + yy }, &digits[2..])
        }
        (0x18, 14) => (digits[..4].parse().ok()?, &digits[4..]),
        _ => return None,
    };
    let field = |i: usize| rest.get(i..i + 2)?.parse::<i64>().ok();
    let (month, day, h, m, s) = (field(0)?, field(2)?, field(4)?, field(6)?, field(8)?);
    // Days from the civil date (proleptic Gregorian), Howard Hinnant's algorithm.
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn asn1_times_convert_to_unix_seconds() {
        assert_eq!(asn1_time(0x17, "700101000000Z"), Some(0));
        assert_eq!(asn1_time(0x17, "000101000000Z"), Some(946_684_800));
        assert_eq!(asn1_time(0x18, "20380119031408Z"), Some(2_147_483_648));
        assert_eq!(asn1_time(0x18, "2038011903140Z"), None);
        assert_eq!(asn1_time(0x17, "700101000000"), None);
    }

    #[test]
    fn certificate_validity_is_read() {
        let mut params = rcgen::CertificateParams::new(vec!["a.test".into()]).unwrap();
        params.not_after = rcgen::date_time_ymd(2031, 5, 6);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(not_after(cert.der()), asn1_time(0x17, "310506000000Z"));
        params.not_after = rcgen::date_time_ymd(2051, 1, 1);
        let cert = params.self_signed(&key).unwrap();
        assert_eq!(not_after(cert.der()), asn1_time(0x18, "20510101000000Z"));
        assert_eq!(not_after(&CertificateDer::from(vec![0x30, 0x01])), None);
    }
}
