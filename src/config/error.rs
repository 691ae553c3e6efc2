//! Why a configuration was refused, in words an operator can act on.
//!
//! One type for every refusal, so `--config.check`, a reload and startup all print the same
//! `<file>: <field path>: <why>` (or `<file>: line L column C: <why>` where the YAML parser
//! found it). No message ever holds a secret: the validator builds them from field paths and
//! rules, never from the values.

use super::limits::{self, MAX_CONFIG_BYTES};
use std::fmt;

/// Why a configuration was rejected.
///
/// `Display` is `<file>: <field path>: <why>` for invalid values and
/// `<file>: line L column C: <why>` for YAML syntax errors, unknown fields and wrong types.
/// No variant ever contains a secret value.
#[derive(Debug)]
pub struct ConfigError {
    pub(super) file: String,
    pub(super) kind: ErrorKind,
}

#[derive(Debug)]
pub(super) enum ErrorKind {
    /// The file could not be read.
    Read(std::io::Error),
    /// Reported by the YAML parser / deserializer.
    Yaml {
        location: Option<(usize, usize)>,
        message: String,
    },
    /// A value that parsed but is not valid.
    Field { field: String, message: String },
    /// Refused before parsing: too large or nested too deep (see `limits`).
    Refused {
        location: Option<(usize, usize)>,
        message: String,
    },
}

impl ConfigError {
    pub(super) fn field_error(
        file: &str,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: file.to_owned(),
            kind: ErrorKind::Field {
                field: field.into(),
                message: message.into(),
            },
        }
    }

    /// Refuses a file larger than [`MAX_CONFIG_BYTES`].
    pub(super) fn check_size(file: &str, len: usize) -> Result<(), ConfigError> {
        if len <= MAX_CONFIG_BYTES {
            return Ok(());
        }
        Err(ConfigError {
            file: file.to_owned(),
            kind: ErrorKind::Refused {
                location: None,
                message: format!(
                    "configuration file is larger than {MAX_CONFIG_BYTES} bytes ({} MiB), the \
                     limit; refused before parsing",
                    MAX_CONFIG_BYTES >> 20
                ),
            },
        })
    }

    /// Refuses text nested deeper than [`MAX_NESTING_DEPTH`], with the place it gets too deep.
    pub(super) fn check_nesting(file: &str, text: &str) -> Result<(), ConfigError> {
        limits::check_nesting(text).map_err(|deep| ConfigError {
            file: file.to_owned(),
            kind: ErrorKind::Refused {
                location: Some((deep.line, deep.column)),
                message: deep.to_string(),
            },
        })
    }

    pub(super) fn yaml(file: &str, err: &yaml_serde::Error) -> ConfigError {
        let location = err.location().map(|l| (l.line(), l.column()));
        let mut message = err.to_string();
        if let Some((line, column)) = location {
            // The location goes in front; drop the parser's own " at line L column C".
            let suffix = format!(" at line {line} column {column}");
            if let Some(pos) = message.find(&suffix) {
                message.replace_range(pos..pos + suffix.len(), "");
            }
        }
        ConfigError {
            file: file.to_owned(),
            kind: ErrorKind::Yaml { location, message },
        }
    }

    /// The path of the offending field, like `targets[1].name`, for errors about a value.
    /// `None` for read errors and YAML syntax / unknown-field / type errors.
    pub fn field(&self) -> Option<&str> {
        match &self.kind {
            ErrorKind::Field { field, .. } => Some(field),
            _ => None,
        }
    }

    /// `(line, column)`, both 1-based, for errors reported by the YAML parser and for text
    /// refused before parsing (nested too deep).
    pub fn location(&self) -> Option<(usize, usize)> {
        match &self.kind {
            ErrorKind::Yaml { location, .. } | ErrorKind::Refused { location, .. } => *location,
            _ => None,
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ErrorKind::Read(err) => write!(f, "{}: cannot read config file: {err}", self.file),
            ErrorKind::Yaml {
                location: Some((line, column)),
                message,
            }
            | ErrorKind::Refused {
                location: Some((line, column)),
                message,
            } => write!(f, "{}: line {line} column {column}: {message}", self.file),
            ErrorKind::Yaml {
                location: None,
                message,
            }
            | ErrorKind::Refused {
                location: None,
                message,
            } => write!(f, "{}: {message}", self.file),
            ErrorKind::Field { field, message } => write!(f, "{}: {field}: {message}", self.file),
        }
    }
}

impl std::error::Error for ConfigError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            ErrorKind::Read(err) => Some(err),
            _ => None,
        }
    }
}
