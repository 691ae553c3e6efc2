//! Helpers shared by the configuration's unit tests: a fake environment holding a secret
//! sentinel, and parse helpers that check no error ever shows it.

use super::*;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(super) const SENTINEL: &str = "s3cr3t-token";

pub(super) fn fake_env(name: &str) -> Option<String> {
    match name {
        "KB_TOKEN" => Some(SENTINEL.to_owned()),
        "QUERY_KEY" => Some(SENTINEL.to_owned()),
        "HOST" => Some("tickets.example.com".to_owned()),
        "EMPTY" => Some(String::new()),
        "WITH_NEWLINE" => Some(format!("{SENTINEL}\r\nX-Injected: 1")),
        _ => None,
    }
}

pub(super) fn parse(text: &str) -> Result<Config, ConfigError> {
    Config::parse(text, "test.yml", &fake_env)
}

pub(super) fn ok(text: &str) -> Config {
    match parse(text) {
        Ok(c) => c,
        Err(e) => panic!("expected a valid config, got: {e}"),
    }
}

/// The error's text; also checks that it never contains the secret sentinel.
pub(super) fn err(text: &str) -> String {
    let e = match parse(text) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e,
    };
    let shown = e.to_string();
    assert!(!shown.contains(SENTINEL), "secret in error: {shown}");
    assert!(
        !format!("{e:?}").contains(SENTINEL),
        "secret in error debug: {e:?}"
    );
    assert!(shown.starts_with("test.yml: "), "{shown}");
    shown
}

pub(super) fn assert_has(haystack: &str, needle: &str) {
    assert!(
        haystack.contains(needle),
        "expected {needle:?} in {haystack:?}"
    );
}

/// A config with one target `kb` whose extra lines are `extra` (indented by the caller).
pub(super) fn one_target(extra: &str) -> String {
    format!("targets:\n  - name: kb\n    url: https://kb.example.com/mcp\n{extra}")
}

pub(super) fn s(secs: u64) -> Duration {
    Duration::from_secs(secs)
}

pub(super) fn write(dir: &Path, name: &str, content: &[u8]) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    path
}
