//! Why a walk happened: the `trigger` label.

/// What started a `tools/list` walk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Trigger {
    /// The first walk of a connection's first session.
    Initial,
    /// A `notifications/tools/list_changed` arrived.
    Notification,
    /// A new session after a failure, expiry or re-initialize.
    Reconnect,
    /// The notification stream was re-opened: notifications in the gap may be lost.
    StreamGap,
    /// The consistency probe: never written into the cache.
    Audit,
}

impl Trigger {
    pub const ALL: [Trigger; 5] = [
        Trigger::Initial,
        Trigger::Notification,
        Trigger::Reconnect,
        Trigger::StreamGap,
        Trigger::Audit,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Initial => "initial",
            Trigger::Notification => "notification",
            Trigger::Reconnect => "reconnect",
            Trigger::StreamGap => "stream_gap",
            Trigger::Audit => "audit",
        }
    }

    /// Whether the walk's result replaces the cache.
    pub fn refreshes_cache(self) -> bool {
        self != Trigger::Audit
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}
