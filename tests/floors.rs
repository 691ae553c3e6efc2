//! The workspace's floors (docs/design.md): each crate may depend on the crates below it only.
//! Cargo already refuses an import of a crate that is not a dependency; this test refuses the
//! dependency itself, so an arrow up cannot be added to a manifest without this test failing.

use std::path::Path;

/// The workspace's own crates a manifest depends on, for building or for its tests.
fn own_dependencies(manifest: &str) -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(manifest))
        .unwrap_or_else(|e| panic!("{manifest}: {e}"));
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            // [dependencies], [dev-dependencies], [target.'cfg(…)'.dependencies]; not the
            // versions declared once in [workspace.dependencies].
            in_deps = line.ends_with("dependencies]") && line != "[workspace.dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if ["exposition", "mcp-client", "mcp-lab", "mcp_exporter"].contains(&name) {
            out.push(name.to_string());
        }
    }
    out.sort();
    out
}

#[test]
fn each_crate_depends_only_on_the_floors_below_it() {
    assert_eq!(
        own_dependencies("crates/exposition/Cargo.toml"),
        Vec::<String>::new(),
        "the metrics floor knows no MCP and nothing of the exporter"
    );
    assert_eq!(
        own_dependencies("crates/mcp-client/Cargo.toml"),
        Vec::<String>::new(),
        "the MCP client core is the bottom floor"
    );
    assert_eq!(
        own_dependencies("crates/mcp-lab/Cargo.toml"),
        vec!["mcp-client"],
        "the lab stands on the client core only"
    );
    assert_eq!(
        own_dependencies("Cargo.toml"),
        vec!["exposition", "mcp-client", "mcp-lab"],
        "the exporter is the top floor"
    );
}
