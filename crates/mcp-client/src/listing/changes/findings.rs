//! What a classification is made of, apart from how it is made: the class of a changed
//! definition, one finding (where, by which rule, the two values), and the bounded judgement of
//! one definition. Shared by the field walk and the tool rules ([`super::classify`]) and the
//! other lists' rules ([`super::lists`]), which both fill a [`Classification`].

use serde_json::Value;

use super::paths::{self, Path};

/// Findings kept per tool; the rest are counted in [`Classification::more`].
pub const MAX_FINDINGS: usize = 32;

/// The class of a changed definition (the `change` label of `mcp_probe_tool_changes_total`,
/// besides `added` and `removed`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    Compatible,
    Unknown,
    Breaking,
}

impl Class {
    pub fn as_str(self) -> &'static str {
        match self {
            Class::Compatible => "compatible",
            Class::Unknown => "unknown",
            Class::Breaking => "breaking",
        }
    }
}

/// One difference: where, by which rule, and the two values (bounded, escaped).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Finding {
    /// `$.inputSchema.properties.query.type`.
    pub path: String,
    /// The rule that judged it (`type_narrowed`, `required_added`, …; see docs/changes.md).
    pub rule: &'static str,
    pub class: Class,
    /// The value before, compact JSON (absent when there was none).
    pub before: Option<String>,
    pub after: Option<String>,
}

/// The judgement of one changed definition.
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Classification {
    pub findings: Vec<Finding>,
    /// Findings beyond [`MAX_FINDINGS`], not kept.
    pub more: usize,
    /// The tool's `description` changed (the rug-pull pattern when the tool is pinned).
    pub description_changed: bool,
}

impl Classification {
    /// The worst class found: breaking over unknown over compatible. `None`: no difference.
    pub fn class(&self) -> Option<Class> {
        self.findings.iter().map(|f| f.class).max()
    }

    pub(super) fn push(
        &mut self,
        path: &Path,
        rule: &'static str,
        class: Class,
        before: Option<&Value>,
        after: Option<&Value>,
    ) {
        // Keep the worst findings when there are too many: a breaking one replaces a compatible one.
        if self.findings.len() >= MAX_FINDINGS {
            self.more += 1;
            if let Some(i) = self.findings.iter().position(|f| f.class < class) {
                self.findings[i] = finding(path, rule, class, before, after);
            }
            return;
        }
        self.findings
            .push(finding(path, rule, class, before, after));
    }
}

fn finding(
    path: &Path,
    rule: &'static str,
    class: Class,
    before: Option<&Value>,
    after: Option<&Value>,
) -> Finding {
    Finding {
        path: path.render(),
        rule,
        class,
        before: before.map(paths::shown),
        after: after.map(paths::shown),
    }
}
