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

/// A set of lists, as a configuration names the lists a target watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ListSet(u8);

impl ListSet {
    /// Every list.
    pub const ALL: ListSet = ListSet(0b1111);
    /// The tool list alone.
    pub const TOOLS: ListSet = ListSet(1);

    fn bit(list: List) -> u8 {
        1 << (list as u8)
    }

    /// The set with `list` in it too.
    pub fn with(self, list: List) -> ListSet {
        ListSet(self.0 | ListSet::bit(list))
    }

    pub fn contains(self, list: List) -> bool {
        self.0 & ListSet::bit(list) != 0
    }

    /// Its lists, in [`List::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = List> {
        List::ALL.into_iter().filter(move |l| self.contains(*l))
    }
}

impl FromIterator<List> for ListSet {
    fn from_iter<I: IntoIterator<Item = List>>(lists: I) -> ListSet {
        lists.into_iter().fold(ListSet::default(), ListSet::with)
    }
}

impl std::str::FromStr for List {
    type Err = String;

    /// A list by its label value.
    fn from_str(s: &str) -> Result<List, String> {
        List::ALL
            .into_iter()
            .find(|l| l.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = List::ALL.iter().map(|l| format!("`{l}`")).collect();
                format!("unknown list {s:?}; expected one of {}", names.join(", "))
            })
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
    fn a_set_holds_what_was_put_in_and_lists_parse_by_label() {
        let set: ListSet = [List::Prompts, List::ResourceTemplates]
            .into_iter()
            .collect();
        assert_eq!(
            set.iter().collect::<Vec<_>>(),
            [List::Prompts, List::ResourceTemplates]
        );
        assert!(!set.contains(List::Tools) && ListSet::TOOLS.contains(List::Tools));
        assert_eq!(ListSet::ALL.iter().count(), 4);
        for list in List::ALL {
            assert_eq!(list.as_str().parse::<List>(), Ok(list));
        }
        let e = "templates".parse::<List>().unwrap_err();
        assert!(e.contains("`resource_templates`"), "{e}");
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
