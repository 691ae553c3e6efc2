//! The validator every part of the configuration is checked with: which file it came from (every
//! error names it, and the field by its path), the folder relative paths are read from, and the
//! environment `${VAR}` is expanded from; with the rules every part shares (names, durations).
//! Each part adds its own checks in its own file (`impl Validator` there); this file takes
//! nothing from them, so every part may take it.

use std::path::Path;
use std::time::Duration;

use super::error::ConfigError;

/// Shortest allowed value for every duration setting.
pub(super) const MIN_DURATION: Duration = Duration::from_millis(100);
/// Longest allowed value for every duration setting.
pub(super) const MAX_DURATION: Duration = Duration::from_secs(24 * 60 * 60);
/// Longest target name.
pub(super) const MAX_NAME_LEN: usize = 64;

pub(super) struct Validator<'a> {
    pub(super) file: &'a str,
    pub(super) base_dir: Option<&'a Path>,
    pub(super) env: &'a dyn Fn(&str) -> Option<String>,
}

impl Validator<'_> {
    pub(super) fn err(&self, field: impl Into<String>, message: impl Into<String>) -> ConfigError {
        ConfigError::field_error(self.file, field, message)
    }

    pub(super) fn name(&self, p: &str, raw: Option<String>) -> Result<String, ConfigError> {
        let field = format!("{p}.name");
        let Some(name) = raw else {
            return Err(self.err(
                field,
                "required; every target needs a unique name (it becomes the `target` label)",
            ));
        };
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(self.err(
                field,
                format!(
                    "target name must be 1 to {MAX_NAME_LEN} characters long (it is {})",
                    name.len()
                ),
            ));
        }
        if !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        {
            return Err(self.err(
                field,
                format!("{name:?} is not a valid target name; use only letters, digits, '_', '.' and '-'"),
            ));
        }
        Ok(name)
    }

    pub(super) fn duration(
        &self,
        p: &str,
        key: &str,
        raw: Option<String>,
    ) -> Result<Option<Duration>, ConfigError> {
        let Some(raw) = raw else {
            return Ok(None);
        };
        let field = join(p, key);
        let d = humantime::parse_duration(&raw).map_err(|e| {
            self.err(
                &field,
                format!("invalid duration {raw:?}: {e}; write a number with a unit, like 30s, 1m or 500ms"),
            )
        })?;
        if d.is_zero() {
            return Err(self.err(field, "must be greater than 0"));
        }
        if d < MIN_DURATION {
            return Err(self.err(field, format!("{raw:?} is too short; the minimum is 100ms")));
        }
        if d > MAX_DURATION {
            return Err(self.err(field, format!("{raw:?} is too long; the maximum is 24h")));
        }
        Ok(Some(d))
    }
}

/// `p.key`, or `key` alone at the top level of a `--http-config` file.
pub(super) fn join(p: &str, key: &str) -> String {
    if p.is_empty() {
        key.to_owned()
    } else {
        format!("{p}.{key}")
    }
}
