//! Files the credentials are read from, and how a change to one is noticed.
//!
//! A rotated secret or a renewed certificate must be used without a restart, and a file that is
//! not there (or not readable, or huge) must be refused at load time with its path, never its
//! content. Both the configuration's load-time checks and the running client read through here,
//! so the two can never disagree about what a file holds.

use crate::net::http_config::PemSource;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::io::Read;
use std::path::Path;
use std::time::SystemTime;

/// Largest secret read from a file (a token, a password, a PEM key): a header value's bound.
pub const MAX_SECRET_BYTES: u64 = 64 * 1024;
/// Largest PEM bundle read (CA bundles with many roots are a few hundred KiB).
pub const MAX_PEM_BYTES: u64 = 4 * 1024 * 1024;

/// What identifies one version of a file: its modification time and length. A rotation writes
/// a new file (new mtime), so comparing stamps is enough to know when to read it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
}

/// The stamp of `path` now; `None` when it cannot be read (a rotation in progress: the old
/// content stays in use until the new file is there).
pub fn stamp(path: &Path) -> Option<Stamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(Stamp {
        modified: meta.modified().ok(),
        len: meta.len(),
    })
}

/// The bytes of `path` when it holds at most `max` of them, `None` when it holds more (read no
/// further than one byte past the cap). The one bounded file read: callers word the errors.
pub fn read_capped(path: &Path, max: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= max).then_some(bytes))
}

/// The bytes of `path`, at most `max`. Errors name the path and why, never content.
pub fn read_bounded(path: &Path, max: u64) -> Result<Vec<u8>, String> {
    let shown = path.display();
    read_capped(path, max)
        .map_err(|e| format!("cannot read {shown}: {e}"))?
        .ok_or_else(|| format!("{shown} is larger than {max} bytes"))
}

/// PEM text given inline or by a file of at most `max` bytes.
pub fn read_pem(src: &PemSource, max: u64) -> Result<Vec<u8>, String> {
    match src {
        PemSource::Inline(text) => Ok(text.as_bytes().to_vec()),
        PemSource::File(path) => read_bounded(path, max),
    }
}

/// The certificates of a PEM text: at least one, every block well formed.
pub fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("no PEM certificate (BEGIN CERTIFICATE) found".into());
    }
    Ok(certs)
}

/// The private key of a PEM text (PKCS#8, PKCS#1 or SEC1): the one key reader of the client's
/// certificates and the web server's. The error never quotes the text (it is a secret).
pub fn private_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    PrivateKeyDer::from_pem_slice(pem)
        .map_err(|_| "no PEM private key (PKCS#8, PKCS#1 or SEC1) found".into())
}

/// A secret kept in a file: UTF-8, trailing line breaks removed (editors add one), not empty.
pub fn read_secret(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let bytes = read_bounded(path, MAX_SECRET_BYTES)?;
    let mut text = String::from_utf8(bytes).map_err(|_| format!("{shown} is not valid UTF-8"))?;
    let kept = text.trim_end_matches(['\n', '\r']).len();
    text.truncate(kept);
    if text.is_empty() {
        return Err(format!("{shown} is empty"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_lose_trailing_newlines_and_errors_name_only_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("token");
        std::fs::write(&p, "abc\r\n").unwrap();
        assert_eq!(read_secret(&p).unwrap(), "abc");
        std::fs::write(&p, "\n").unwrap();
        assert_eq!(
            read_secret(&p).unwrap_err(),
            format!("{} is empty", p.display())
        );
        std::fs::write(&p, vec![b'x'; MAX_SECRET_BYTES as usize + 1]).unwrap();
        assert!(read_secret(&p).unwrap_err().contains("larger than"));
        let missing = dir.path().join("missing");
        assert!(
            read_secret(&missing)
                .unwrap_err()
                .starts_with("cannot read ")
        );
        assert_eq!(stamp(&missing), None);
    }

    #[test]
    fn a_rewritten_file_has_a_new_stamp() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "one").unwrap();
        let first = stamp(&p).unwrap();
        std::fs::write(&p, "three").unwrap();
        assert_ne!(stamp(&p).unwrap(), first);
    }
}
