//! Which list a client caches, as a value. Tools, prompts, resources and resource templates are
//! paginated alike, announced alike and go stale alike; what differs between them is a handful of
//! names (the method, the result's array, the field that identifies an item, the capability and
//! the notification), and those are here, so that one piece of code serves every list.
//!
//! Resource templates have no notification of their own: `notifications/resources/list_changed`
//! (and the `resources` capability's `listChanged`) announce changes to both resource lists, so a
//! client re-lists both when it arrives.

/// A list a client caches (the closed set of the `list` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum List {
    Tools,
    Prompts,
    Resources,
    ResourceTemplates,
}

impl List {
    /// Every list, in the order they are shown.
    pub const ALL: [List; 4] = [
        List::Tools,
        List::Prompts,
        List::Resources,
        List::ResourceTemplates,
    ];

    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Prompts => "prompts",
            List::Resources => "resources",
            List::ResourceTemplates => "resource_templates",
        }
    }

    /// The method that lists it, page by page.
    pub fn method(self) -> &'static str {
        match self {
            List::Tools => "tools/list",
            List::Prompts => "prompts/list",
            List::Resources => "resources/list",
            List::ResourceTemplates => "resources/templates/list",
        }
    }

    /// The list whose listing method is `method`.
    pub fn of_method(method: &str) -> Option<List> {
        List::ALL.into_iter().find(|l| l.method() == method)
    }

    /// The array of a result page that holds the items.
    pub fn result_key(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Prompts => "prompts",
            List::Resources => "resources",
            List::ResourceTemplates => "resourceTemplates",
        }
    }

    /// The field that identifies an item within the list.
    pub fn key_field(self) -> &'static str {
        match self {
            List::Tools | List::Prompts => "name",
            List::Resources => "uri",
            List::ResourceTemplates => "uriTemplate",
        }
    }

    /// The server capability that declares it (and its `listChanged`).
    pub fn capability(self) -> &'static str {
        match self {
            List::Tools => "tools",
            List::Prompts => "prompts",
            List::Resources | List::ResourceTemplates => "resources",
        }
    }

    /// The notification that announces a change to it.
    pub fn changed_notification(self) -> &'static str {
        match self {
            List::Tools => "notifications/tools/list_changed",
            List::Prompts => "notifications/prompts/list_changed",
            List::Resources | List::ResourceTemplates => "notifications/resources/list_changed",
        }
    }

    /// The lists a `list_changed` notification announces a change to (none for any other
    /// method).
    pub fn announced_by(method: &str) -> &'static [List] {
        match method {
            "notifications/tools/list_changed" => &[List::Tools],
            "notifications/prompts/list_changed" => &[List::Prompts],
            "notifications/resources/list_changed" => &[List::Resources, List::ResourceTemplates],
            _ => &[],
        }
    }

    /// Its key in a 2026-07-28 `subscriptions/listen` notification filter.
    pub fn listen_filter(self) -> &'static str {
        match self {
            List::Tools => "toolsListChanged",
            List::Prompts => "promptsListChanged",
            List::Resources | List::ResourceTemplates => "resourcesListChanged",
        }
    }
}

impl std::fmt::Display for List {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_list_is_found_by_its_method_and_announced_by_its_notification() {
        for list in List::ALL {
            assert_eq!(List::of_method(list.method()), Some(list));
            assert!(List::announced_by(list.changed_notification()).contains(&list));
        }
        assert_eq!(List::of_method("tools/call"), None);
        assert!(List::announced_by("notifications/message").is_empty());
    }

    #[test]
    fn the_resource_lists_share_their_capability_notification_and_filter() {
        let (r, t) = (List::Resources, List::ResourceTemplates);
        assert_eq!(r.capability(), t.capability());
        assert_eq!(r.changed_notification(), t.changed_notification());
        assert_eq!(r.listen_filter(), t.listen_filter());
        assert_ne!(r.result_key(), t.result_key());
        assert_ne!(r.key_field(), t.key_field());
    }
}
