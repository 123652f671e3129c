//! Model-facing economy (SPEC §13, issue 18): tokens (`o200k_base`) the model reads for the
//! corpus's real MCP servers natively and in code mode. A measurement, not a timing: prints a
//! table. Run: `cargo bench --bench economy`.

#[path = "../tests/corpus/mod.rs"]
mod corpus;
#[path = "../tests/economy/mod.rs"]
mod economy;

fn main() {
    let Some(tools) = corpus::tools() else { return };
    let (table, _, _) = economy::corpus_table(&tools);
    println!("{table}");
}
