//! The protocol versions this client knows, in one table: the configuration, `check`, the
//! session handshake and the probe all read them from here, so they cannot drift apart.
//!
//! (The lab keeps its own list on purpose: it is an independent peer, and a bug here must not be
//! mirrored there.)

/// The protocol era of a session (label `era`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// `initialize` handshake, `Mcp-Session-Id`, GET stream, `ping`.
    Legacy,
}

impl Era {
    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
        }
    }
}

/// A protocol version this client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    V2025_11_25,
    V2025_06_18,
    V2025_03_26,
}

/// Every version this client speaks, newest first: the first is what `auto` offers.
pub const SUPPORTED: [ProtocolVersion; 3] = [
    ProtocolVersion::V2025_11_25,
    ProtocolVersion::V2025_06_18,
    ProtocolVersion::V2025_03_26,
];

/// Versions that exist but that this build does not speak yet, with why: refused with that
/// reason rather than as unknown.
pub const NOT_YET: [(&str, &str); 1] = [(
    "2026-07-28",
    "2026-07-28 (modern era) is not supported by this build yet; use auto or a legacy version",
)];

impl ProtocolVersion {
    /// The newest version this client speaks.
    pub const NEWEST: ProtocolVersion = SUPPORTED[0];

    /// The spelling on the wire and in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
        }
    }

    /// The version spelled `text`, if this client speaks it.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        SUPPORTED.into_iter().find(|v| v.as_str() == text)
    }

    pub fn era(self) -> Era {
        Era::Legacy
    }

    /// Whether requests carry the `MCP-Protocol-Version` header (from 2025-06-18 on; 2025-03-26
    /// servers do not expect it).
    pub fn sends_version_header(self) -> bool {
        self != ProtocolVersion::V2025_03_26
    }

    /// The supported versions, comma-separated, for error messages.
    pub fn list() -> String {
        let all: Vec<&str> = SUPPORTED.iter().map(|v| v.as_str()).collect();
        all.join(", ")
    }
}

impl std::fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_and_only_known_ones_parse() {
        for v in SUPPORTED {
            assert_eq!(ProtocolVersion::parse(v.as_str()), Some(v));
        }
        assert_eq!(ProtocolVersion::NEWEST, ProtocolVersion::V2025_11_25);
        assert_eq!(ProtocolVersion::parse("2026-07-28"), None);
        assert_eq!(ProtocolVersion::parse("2024-11-05"), None);
        assert!(!ProtocolVersion::V2025_03_26.sends_version_header());
        assert!(ProtocolVersion::V2025_06_18.sends_version_header());
    }
}
