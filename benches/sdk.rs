//! SDK generator speed: rendering 1,000 tools built from the corpus's real schemas (MCP
//! `tools/list` captures and the BFCL sample, cycled with numbered names), per language.
//! Goal: under 50 ms per language. Run: `cargo bench --bench sdk`.
//! Without the corpus (`DSH_CORPUS`, default `../shared/corpus`) a small built-in set is cycled.

#[path = "../tests/corpus/mod.rs"]
mod corpus;

use std::sync::OnceLock;

use dsh_tools::sdk::{self, Language, ToolSpec};
use serde_json::json;

fn main() {
    divan::main();
}

const TOOLS: usize = 1_000;

/// The corpus's tools, or a small built-in set without it.
fn corpus_specs() -> Vec<ToolSpec> {
    match corpus::tools() {
        Some(tools) => tools.iter().map(corpus::CorpusTool::spec).collect(),
        None => vec![ToolSpec::new(
            "search",
            "Searches.",
            json!({"type": "object", "properties": {"q": {"type": "string"}, "limit": {"type": "integer"}}, "required": ["q"]}),
            json!({"type": "array", "items": {"type": "object", "properties": {"title": {"type": "string"}}}}),
        )],
    }
}

/// 1,000 specs cycled from the corpus, each renamed `<name>_<n>` so all are distinct.
fn thousand() -> &'static [ToolSpec] {
    static SPECS: OnceLock<Vec<ToolSpec>> = OnceLock::new();
    SPECS.get_or_init(|| {
        let base = corpus_specs();
        (0..TOOLS)
            .map(|n| {
                let mut spec = base[n % base.len()].clone();
                spec.name = format!("{}_{n}", spec.name);
                spec
            })
            .collect()
    })
}

#[divan::bench(args = [Language::TypeScript, Language::Python])]
fn render_1000_tools(bencher: divan::Bencher, language: Language) {
    let specs = thousand();
    bencher.bench(|| sdk::render(divan::black_box(language), divan::black_box(specs)));
}
