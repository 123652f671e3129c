//! Model-facing economy (issue 18): what the model reads natively against code mode, counted in
//! `o200k_base` tokens. A measurement, not a timing: prints two tables.
//!
//! 1. The corpus's real MCP servers: the native tool list (Anthropic and OpenAI wire forms)
//!    against the full SDK prompt section and the progressive-disclosure index, per server, summed
//!    and with every server in one registry.
//! 2. The main job (`examples/code_mode.rs` over this repository): what the model reads doing
//!    the crate summary natively (tool list, each call and its rendered result) against code
//!    mode (`run_code` schema, prompt sections, program, rendered result).
//!
//! Run: `cargo bench --bench economy` (corpus from `DSH_CORPUS`, default `../shared/corpus`).

#[path = "../tests/corpus/mod.rs"]
mod corpus;
#[path = "../tests/economy/mod.rs"]
mod economy;
#[path = "../src/bin/dsh-tools/toolset.rs"]
mod toolset;

use std::path::Path;
use std::sync::Arc;

use dsh_tools::code::{CodeRuntime, SubprocessConfig, SubprocessRuntime};

fn main() -> anyhow::Result<()> {
    match corpus::tools() {
        Some(tools) => println!("{}\n", economy::corpus_table(&tools).0),
        None => println!("corpus table skipped: no corpus\n"),
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let tokio = tokio::runtime::Runtime::new()?;
    println!(
        "| main job | native (tools + calls) | code mode (prompt + program + result) | code / native |"
    );
    println!("|---|---|---|---|");
    for language in ["TypeScript", "Python"] {
        let task = tokio.block_on(async {
            let config = SubprocessConfig::default();
            let (runtime, program): (Arc<dyn CodeRuntime>, &str) = if language == "Python" {
                (
                    Arc::new(SubprocessRuntime::python(config).await?),
                    include_str!("../examples/programs/crate_summary.py"),
                )
            } else {
                (
                    Arc::new(SubprocessRuntime::typescript(config).await?),
                    include_str!("../examples/programs/crate_summary.ts"),
                )
            };
            let task = economy::task(root, runtime.clone(), program).await;
            runtime.dispose().await;
            anyhow::Ok(task)
        })?;
        println!(
            "| crate summary, {language} | {} ({} + {}, {} calls) | {} ({} + {} + {}) | {:.2} % |",
            task.native(),
            task.native_tools,
            task.native_calls,
            task.calls,
            task.code(),
            task.code_prompt,
            task.code_program,
            task.code_result,
            task.ratio() * 100.0
        );
    }
    Ok(())
}
