//! The model-facing economy goals on the corpus's real MCP servers, counted in `o200k_base` tokens:
//! the progressive-disclosure index ≤ 0.1× the native tool list with every server in one registry
//! (bounded at the measured figure), the full SDK section bounded (the 0.6× goal is not met), and
//! the main job in code mode ≤ 2 % of its native cost. The corpus test skips, saying so, without
//! the corpus.

use crate::corpus;
use crate::economy;

#[test]
fn sdk_sections_cost_less_than_the_native_tool_list() {
    let Some(tools) = corpus::tools() else { return };
    let (table, _sum, all) = economy::corpus_table(&tools);
    println!("{table}");
    assert_eq!(all.tools, 75, "the whole MCP corpus");
    // The index meets its 0.1× goal with margin (0.091× / 0.090× measured).
    assert!(all.ratio(all.index_typescript) <= 0.0915, "{table}");
    assert!(all.ratio(all.index_python) <= 0.091, "{table}");
    // The full section does not reach its 0.6× goal (0.682× / 0.778× measured; Python 0.803× before
    // tools answering alike shared one output class, with `getattr(tools, "…")` for names that are
    // no identifiers, 0.795× with `tools["…"]`; 0.692× / 0.814× before TypeScript tools answering
    // alike shared one output type and a repeated Python object shape reused its class; 0.650×
    // / 0.771× before the documented members of a union kept their docs, which the native list
    // carries too; 0.73× / 1.05× before keyword signatures, one-space indents, `keyword value`
    // notes, inline Python defaults and a shorter guide); these bounds keep it from growing back.
    assert!(all.ratio(all.sdk_typescript) <= 0.683, "{table}");
    assert!(all.ratio(all.sdk_python) <= 0.779, "{table}");
}

/// The main job in code mode costs at most 2 % of the tokens the model reads doing it natively.
#[tokio::test]
async fn the_main_job_in_code_mode_costs_two_percent_of_native() {
    use dsh_tools::code::{CodeRuntime, SubprocessConfig, SubprocessRuntime};
    use std::sync::Arc;
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = SubprocessConfig::default();
    let runtimes: [(Arc<dyn CodeRuntime>, &str); 2] = [
        (
            Arc::new(
                SubprocessRuntime::typescript(config.clone())
                    .await
                    .expect("node"),
            ),
            include_str!("../../examples/programs/crate_summary.ts"),
        ),
        (
            Arc::new(SubprocessRuntime::python(config).await.expect("python3")),
            include_str!("../../examples/programs/crate_summary.py"),
        ),
    ];
    for (runtime, program) in runtimes {
        let task = economy::task(root, runtime.clone(), program).await;
        runtime.dispose().await;
        println!("{task:?} ratio {:.4}", task.ratio());
        assert!(task.calls > 50, "{task:?}");
        assert!(task.ratio() <= 0.02, "{task:?}");
    }
}
