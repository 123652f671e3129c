//! The model-facing economy goals of SPEC §13 on the corpus's real MCP servers, counted in
//! `o200k_base` tokens: the full SDK section ≤ 0.6× the native tool list with every server in
//! one registry, the progressive-disclosure index ≤ 0.1×. Skips, saying so, without the corpus.

#[path = "corpus/mod.rs"]
mod corpus;
#[path = "economy/mod.rs"]
mod economy;

#[test]
fn sdk_sections_cost_less_than_the_native_tool_list() {
    let Some(tools) = corpus::tools() else { return };
    let (table, _sum, all) = economy::corpus_table(&tools);
    println!("{table}");
    assert_eq!(all.tools, 75, "the whole MCP corpus");
    assert!(all.ratio(all.sdk_typescript) <= 0.6, "{table}");
    assert!(all.ratio(all.sdk_python) <= 0.6, "{table}");
    assert!(all.ratio(all.index_typescript) <= 0.1, "{table}");
    assert!(all.ratio(all.index_python) <= 0.1, "{table}");
}

