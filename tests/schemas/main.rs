//! Parameters schemas in one test binary: the dialect rules, the dialects and the SDK generator
//! over the third-party corpus, the schemas `#[tool]` derives, the rendered SDK and the example
//! toolset's committed SDK, progressive disclosure and the model-facing economy.

#[cfg(feature = "code-mode")]
#[path = "../code_runtime_support/mod.rs"]
mod code_runtime_support;
#[path = "../corpus/mod.rs"]
mod corpus;
#[cfg(feature = "code-mode")]
#[path = "../economy/mod.rs"]
mod economy;
#[path = "../../src/bin/dsh-tools/toolset.rs"]
mod toolset;

mod dialect_corpus;
mod dialect_meaning;
mod dialect_rules;
mod dialect_snapshots;
mod example_toolset;
mod macro_schemas;
mod sdk_corpus;
#[cfg(feature = "code-mode")]
mod sdk_disclosure;
#[cfg(feature = "code-mode")]
mod sdk_economy;
mod sdk_render;
