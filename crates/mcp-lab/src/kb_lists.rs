//! The knowledge base's other cached lists: its prompts, resources and resource templates, each
//! with one item that a redeploy changes, as [`super::kb`] swaps `search_legacy`.
//!
//! Generation 0 serves `summarize_legacy`, `kb://collections/legacy-index` and the template
//! `kb://search/legacy{?q}`; every later generation retires them for good and serves their
//! successors at revision `g` (a new required argument, a new URI, a new URI pattern), so a
//! stale cache keeps offering a prompt, reading a resource or expanding a template the server no
//! longer has. Ten prompts and twelve resources make two pages each at the default page size.

use serde_json::{Value, json};

use mcp_client::listing::list::List;

/// The items of `list` at `generation`, in a stable order. Tools are [`super::kb::tools`].
pub fn items(list: List, generation: u64) -> Vec<Value> {
    match list {
        List::Tools => super::kb::tools(generation),
        List::Prompts => prompts(generation),
        List::Resources => resources(generation),
        List::ResourceTemplates => resource_templates(generation),
    }
}

fn arg(name: &str, description: &str, required: bool) -> Value {
    json!({"name": name, "description": description, "required": required})
}

fn prompt(name: &str, description: &str, arguments: Vec<Value>) -> Value {
    json!({"name": name, "description": description, "arguments": arguments})
}

/// The prompts served at `generation`.
pub fn prompts(generation: u64) -> Vec<Value> {
    let summarize = if generation == 0 {
        prompt(
            "summarize_legacy",
            "Summarize a document (old template).",
            vec![arg("document_id", "The document to summarize.", true)],
        )
    } else {
        prompt(
            "summarize_v2",
            &format!("Summarize a document in a chosen style (template revision {generation})."),
            vec![
                arg("document_id", "The document to summarize.", true),
                arg("style", "brief, detailed or bullet points.", true),
            ],
        )
    };
    vec![
        summarize,
        prompt(
            "answer_from_kb",
            "Answer a question from the knowledge base, citing documents.",
            vec![arg("question", "The question.", true)],
        ),
        prompt(
            "draft_ticket",
            "Draft a support ticket from a conversation.",
            vec![arg("conversation", "The conversation so far.", true)],
        ),
        prompt(
            "triage_ticket",
            "Suggest a priority and an owner for a ticket.",
            vec![arg("ticket_id", "The ticket.", true)],
        ),
        prompt(
            "explain_permission",
            "Explain why a user may or may not read a document.",
            vec![
                arg("user", "The user.", true),
                arg("document_id", "The document.", true),
            ],
        ),
        prompt(
            "compare_documents",
            "Compare two documents.",
            vec![
                arg("left", "One document.", true),
                arg("right", "The other.", true),
            ],
        ),
        prompt(
            "release_notes",
            "Write release notes from the documents changed since a date.",
            vec![arg("since", "An ISO 8601 date.", false)],
        ),
        prompt(
            "weekly_digest",
            "Digest of the week's new documents.",
            vec![],
        ),
        prompt(
            "translate_document",
            "Translate a document.",
            vec![
                arg("document_id", "The document.", true),
                arg("language", "The target language.", true),
            ],
        ),
        prompt(
            "onboarding_guide",
            "An onboarding guide for a team.",
            vec![arg("team", "The team.", false)],
        ),
    ]
}

fn resource(uri: &str, name: &str, mime: &str, size: u64) -> Value {
    json!({"uri": uri, "name": name, "mimeType": mime, "size": size})
}

/// The resources served at `generation`.
pub fn resources(generation: u64) -> Vec<Value> {
    let index = if generation == 0 {
        resource(
            "kb://collections/legacy-index",
            "legacy-index",
            "application/json",
            2048,
        )
    } else {
        resource(
            &format!("kb://collections/index-v{generation}"),
            "index",
            "application/json",
            4096 + generation,
        )
    };
    let doc = |n: &str, size| resource(&format!("kb://docs/{n}.md"), n, "text/markdown", size);
    vec![
        index,
        doc("handbook", 18_000),
        doc("onboarding", 9_500),
        doc("security-policy", 12_200),
        doc("incident-runbook", 7_300),
        doc("release-process", 5_100),
        doc("style-guide", 4_400),
        doc("glossary", 3_900),
        doc("faq", 6_600),
        resource("kb://stats/today", "today", "application/json", 512),
        resource(
            "kb://tickets/open",
            "open-tickets",
            "application/json",
            8_192,
        ),
        resource(
            "kb://exports/latest.pdf",
            "latest-export",
            "application/pdf",
            250_000,
        ),
    ]
}

fn template(uri_template: &str, name: &str, mime: &str) -> Value {
    json!({"uriTemplate": uri_template, "name": name, "mimeType": mime})
}

/// The resource templates served at `generation`.
pub fn resource_templates(generation: u64) -> Vec<Value> {
    let search = if generation == 0 {
        template(
            "kb://search/legacy{?q}",
            "search-legacy",
            "application/json",
        )
    } else {
        template(
            &format!("kb://search/v{generation}{{?q,top_k}}"),
            "search",
            "application/json",
        )
    };
    vec![
        search,
        template("kb://documents/{document_id}", "document", "text/markdown"),
        template("kb://tickets/{ticket_id}", "ticket", "application/json"),
    ]
}

/// Whether a `resources/read` of `uri` is served by `resources` or `templates` (listed, or
/// within a template's literal prefix: the text before its first expression).
pub fn readable(uri: &str, resources: &[Value], templates: &[Value]) -> bool {
    resources.iter().any(|r| r["uri"] == uri)
        || templates.iter().any(|t| {
            t["uriTemplate"]
                .as_str()
                .and_then(|p| p.split('{').next())
                .is_some_and(|prefix| !prefix.is_empty() && uri.starts_with(prefix))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(list: List, generation: u64) -> Vec<String> {
        items(list, generation)
            .iter()
            .map(|i| i[list.key_field()].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn each_list_is_unique_and_its_first_item_is_retired_by_the_first_redeploy() {
        for list in [List::Prompts, List::Resources, List::ResourceTemplates] {
            let (first, later) = (keys(list, 0), keys(list, 1));
            for k in [&first, &later, &keys(list, 2)] {
                let unique: std::collections::HashSet<_> = k.iter().collect();
                assert_eq!(unique.len(), k.len(), "{list}: {k:?}");
            }
            assert_eq!(first.len(), later.len(), "{list}");
            assert!(!later.contains(&first[0]), "{list}: {} retired", first[0]);
            assert_ne!(
                items(list, 1)[0],
                items(list, 2)[0],
                "{list}: every redeploy changes"
            );
        }
        assert_eq!(prompts(0).len(), 10);
        assert_eq!(resources(0).len(), 12);
    }

    #[test]
    fn a_retired_resource_is_unreadable_and_template_reads_follow_the_pattern() {
        let (r, t) = (resources(1), resource_templates(1));
        assert!(readable("kb://docs/faq.md", &r, &t));
        assert!(!readable("kb://collections/legacy-index", &r, &t));
        assert!(readable("kb://documents/42", &r, &t));
        assert!(!readable("kb://search/legacy?q=x", &r, &t));
        assert!(readable(
            "kb://search/legacy?q=x",
            &resources(0),
            &resource_templates(0)
        ));
    }
}
