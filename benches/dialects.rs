//! Time to transform every tool schema of the corpus (MCP `tools/list` captures + the BFCL
//! sample) into each dialect. Run: `cargo bench --bench dialects`.

use std::path::PathBuf;
use std::sync::LazyLock;

use divan::counter::ItemsCount;
use divan::{Bencher, black_box};
use dsh_tools::dialect::{Dialect, bfcl_to_json_schema};
use serde_json::Value;

fn main() {
    if CORPUS.is_empty() {
        println!("dialect benchmark skipped: no corpus (set DSH_CORPUS)");
    }
    divan::main();
}

/// Every parameters schema of the corpus; empty without it.
static CORPUS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let dir = std::env::var_os("DSH_CORPUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../shared/corpus")));
    let mut schemas = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir.join("mcp-tools")) else {
        return schemas;
    };
    let mut files: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension().is_some_and(|ext| ext == "json")
                && !path.to_string_lossy().ends_with(".initialize.json")
        })
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable capture");
        let response: Value = serde_json::from_str(&text).expect("capture is JSON");
        for tool in response["result"]["tools"].as_array().into_iter().flatten() {
            schemas.push(tool["inputSchema"].clone());
        }
    }
    if let Ok(text) = std::fs::read_to_string(dir.join("bfcl/functions_sample.jsonl")) {
        for line in text.lines().filter(|line| !line.trim().is_empty()) {
            let record: Value = serde_json::from_str(line).expect("BFCL line is JSON");
            schemas.push(bfcl_to_json_schema(&record["function"]["parameters"]));
        }
    }
    schemas
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
