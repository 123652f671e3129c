//! Parameters schemas in one test binary: the dialect rules, the dialects and the SDK generator
//! over the third-party corpus.

#[path = "../corpus/mod.rs"]
mod corpus;

mod dialect_corpus;
mod dialect_meaning;
mod dialect_rules;
mod sdk_corpus;
