//! Time to transform every tool schema of the corpus (MCP `tools/list` captures + the BFCL
//! sample) into each dialect. Run: `cargo bench --bench dialects`.

#[path = "../tests/corpus/mod.rs"]
mod corpus;

use std::sync::LazyLock;

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use dsh_tools::dialect::Dialect;
use serde_json::Value;

fn main() {
    if CORPUS.is_empty() {
        println!("dialect benchmark skipped: no corpus (set DSH_CORPUS)");
    }
    divan::main();
}

/// Every parameters schema of the corpus; empty without it.
static CORPUS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    corpus::tools()
        .unwrap_or_default()
        .into_iter()
        .map(|tool| tool.parameters)
        .collect()
});

/// The whole corpus through one dialect; the counter reports tool schemas per second.
#[divan::bench(args = Dialect::ALL)]
fn whole_corpus(bencher: Bencher, dialect: Dialect) {
    let schemas = &*CORPUS;
    bencher.counter(ItemsCount::new(schemas.len())).bench(|| {
        for schema in schemas {
            let _ = black_box(dialect.transform(black_box(schema)));
        }
    });
}
