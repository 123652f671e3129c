//! The example toolset: its schemas are pinned, and the committed `sdk/` matches what the
//! generator renders for it today.

use crate::toolset;

use std::path::Path;

use dsh_tools::Registry;
use dsh_tools::dialect::Dialect;
use dsh_tools::prelude::*;
use dsh_tools::sdk::Language;
use serde_json::json;

fn registry() -> Registry {
    let registry = Registry::new();
    registry
        .register_all(toolset::definitions(env!("CARGO_MANIFEST_DIR")))
        .expect("registered");
    registry
}

#[test]
fn toolset_schemas_are_pinned() {
    let schemas: Vec<_> = registry()
        .tools(None)
        .iter()
        .map(|def| json!({"name": def.name(), "parameters": def.parameters(), "output": def.output_schema()}))
        .collect();
    insta::assert_json_snapshot!("toolset_schemas", schemas);
}

#[test]
fn toolset_schemas_in_every_dialect_are_pinned() {
    let registry = registry();
    for dialect in Dialect::ALL {
        let schemas: Vec<_> = registry
            .schemas_for(None, dialect)
            .into_iter()
            .map(|schema| match schema.parameters {
                Ok(parameters) => json!({"name": schema.name, "parameters": parameters}),
                Err(error) => json!({"name": schema.name, "error": error.to_string()}),
            })
            .collect();
        insta::assert_json_snapshot!(format!("toolset_{dialect}"), schemas);
    }
}

/// The first line where two texts differ, for a readable failure.
fn first_difference(committed: &str, fresh: &str) -> String {
    for (number, (old, new)) in committed.lines().zip(fresh.lines()).enumerate() {
        if old != new {
            return format!(
                "line {}:\n  committed: {old}\n  generated: {new}",
                number + 1
            );
        }
    }
    format!(
        "lengths differ: committed {} lines, generated {} lines",
        committed.lines().count(),
        fresh.lines().count()
    )
}

#[test]
fn committed_sdk_is_fresh() {
    let registry = registry();
    for (language, file) in [
        (Language::TypeScript, "sdk/tools.ts"),
        (Language::Python, "sdk/tools.py"),
    ] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(file);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        let fresh = registry.sdk(None, language);
        assert!(
            committed == fresh,
            "{file} is stale; regenerate it with `cargo run --example generate_sdk`.\nfirst difference at {}",
            first_difference(&committed, &fresh)
        );
    }
}
