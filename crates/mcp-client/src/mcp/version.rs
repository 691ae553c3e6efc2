//! The protocol versions this client knows, in one table: the configuration, `check`, the
//! handshake, era detection and the probe all read them from here, so they cannot drift apart.
//!
//! (The lab keeps its own list on purpose: it is an independent peer, and a bug here must not be
//! mirrored there.)

/// The protocol era of a connection (label `era`). The two eras differ in everything a probe
/// relies on: how a client starts (handshake or none), where `list_changed` arrives (the GET
/// stream or a `subscriptions/listen` stream), and how liveness is proven (`ping` or any cheap
/// request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Era {
    /// 2024-11-05 … 2025-11-25: `initialize` handshake, `Mcp-Session-Id`, GET stream, `ping`.
    Legacy,
    /// 2026-07-28 and later: no handshake and no session; every request carries its protocol
    /// version, client info and capabilities in `_meta`.
    Modern,
}

impl Era {
    pub const ALL: [Era; 2] = [Era::Legacy, Era::Modern];

    pub fn as_str(self) -> &'static str {
        match self {
            Era::Legacy => "legacy",
            Era::Modern => "modern",
        }
    }
}

/// A protocol version this client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtocolVersion {
    V2026_07_28,
    V2025_11_25,
    V2025_06_18,
    V2025_03_26,
    V2024_11_05,
}

/// Every version this client speaks, newest first.
pub const SUPPORTED: [ProtocolVersion; 5] = [
    ProtocolVersion::V2026_07_28,
    ProtocolVersion::V2025_11_25,
    ProtocolVersion::V2025_06_18,
    ProtocolVersion::V2025_03_26,
    ProtocolVersion::V2024_11_05,
];

/// Versions that exist but that this build does not speak yet, with why: refused with that
/// reason rather than as unknown. None today; the mechanism stays for the next version.
pub const NOT_YET: [(&str, &str); 0] = [];

impl ProtocolVersion {
    /// The newest version this client speaks: what `auto` tries first.
    pub const NEWEST: ProtocolVersion = SUPPORTED[0];
    /// The newest version with an `initialize` handshake: what `auto` offers a legacy server.
    pub const NEWEST_LEGACY: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// The spelling on the wire and in the configuration.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2026_07_28 => "2026-07-28",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2024_11_05 => "2024-11-05",
        }
    }

    /// The version spelled `text`, if this client speaks it.
    pub fn parse(text: &str) -> Option<ProtocolVersion> {
        SUPPORTED.into_iter().find(|v| v.as_str() == text)
    }

    pub fn era(self) -> Era {
        match self {
            ProtocolVersion::V2026_07_28 => Era::Modern,
            _ => Era::Legacy,
        }
    }

    /// Whether requests carry the `MCP-Protocol-Version` header (from 2025-06-18 on; older
    /// servers do not expect it).
    pub fn sends_version_header(self) -> bool {
        !matches!(
            self,
            ProtocolVersion::V2025_03_26 | ProtocolVersion::V2024_11_05
        )
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
        assert_eq!(ProtocolVersion::NEWEST, ProtocolVersion::V2026_07_28);
        assert_eq!(ProtocolVersion::NEWEST.era(), Era::Modern);
        assert_eq!(ProtocolVersion::NEWEST_LEGACY.era(), Era::Legacy);
        assert_eq!(ProtocolVersion::parse("2026-13-01"), None);
        assert!(!ProtocolVersion::V2025_03_26.sends_version_header());
        assert!(!ProtocolVersion::V2024_11_05.sends_version_header());
        assert!(ProtocolVersion::V2025_06_18.sends_version_header());
        // Exactly one modern version today, and it is the newest.
        let modern: Vec<_> = SUPPORTED
            .iter()
            .filter(|v| v.era() == Era::Modern)
            .collect();
        assert_eq!(modern, [&ProtocolVersion::V2026_07_28]);
    }
}
