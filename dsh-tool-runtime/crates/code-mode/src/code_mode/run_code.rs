//! The `run_code` transport tool.

use std::sync::{Arc, Weak};

use serde_json::{Map, Value, json};

use super::bridge::Bridge;
use super::disclosure::Catalog;
use super::language_of;
use super::render::render_output;
use crate::call::ToolExec;
use crate::code_mode::CodeModeExt;
use crate::code_mode::disclosure::DisclosureExt;
use crate::code_runtime::frame::decodes_within;
use crate::code_runtime::{
    BindingNamespace, CodeRuntime, FailureKind, JsonText, RunOutcome, RunRequest,
};
use crate::definition::ToolDefinition;
use crate::durable::run as durable;
use crate::durable::{Durability, DurableRun, Replay};
use crate::error::{ErrorCode, ToolError};
use crate::json::{MAX_VALUE_DEPTH, text_depth};
use crate::presentation::{CallView, ToolCallKind};
use crate::registry::{Inner, RUN_CODE, Registry};
use crate::result::ContentBlock;
use crate::sdk::Disclosure;

/// Settings of the transport.
#[derive(Debug, Clone, Copy)]
pub struct RunCodeConfig {
    /// Binding calls of one program that may run at once. Default 10.
    pub max_parallel_sub_calls: usize,
}

impl Default for RunCodeConfig {
    fn default() -> Self {
        RunCodeConfig {
            max_parallel_sub_calls: 10,
        }
    }
}

fn description(language: &str) -> String {
    let (name, output) = match language {
        "python" => ("Python", "`print(...)` and/or `return <value>`"),
        _ => ("TypeScript", "`console.log(...)` and/or `return <value>`"),
    };
    format!(
        "Run a {name} program that calls the tools declared in the SDK. `code` is the body of an async \
         {name} function: top-level `await` and `return` work, and each tool is an async function on \
         `tools` (`await tools.name(args)`); `description` is a short summary of what the program \
         does, shown to the user. Start independent calls together and await them as a group \
         to run them concurrently. Only what the program prints with {output} comes back to you, so \
         print or return just what you need. Images returned by tools are attached after the run. \
         When the SDK lists tools by name only, print `await sdk.describe([\"name\"])` first: it \
         returns their declarations (`sdk.search(\"words\")` finds tools)."
    )
}

fn parameters(language: &str) -> Value {
    let name = if language == "python" {
        "Python"
    } else {
        "TypeScript"
    };
    json!({
        "type": "object",
        "properties": {
            "code": {
                "type": "string",
                "description": format!("The program: the body of an async {name} function.")
            },
            "description": {
                "type": "string",
                "description": "What the program does, in 5 to 10 words of active voice, shown to the user (e.g. \"Count lines in every Rust file\", \"Find the failing test\")."
            }
        },
        "required": ["code", "description"]
    })
}

/// Failure kinds a caller's cancellation itself produces: the runtime stopping the program, or
/// the program failing on the `ABORTED` rejections of its sub-calls.
fn caused_by_cancel(kind: FailureKind) -> bool {
    matches!(kind, FailureKind::Abort | FailureKind::Exception)
}

/// Builds the `run_code` definition bound to `registry` and `runtime`. The handler holds the
/// registry weakly: the registry owns the definition.
pub(crate) fn definition(
    registry: &Registry,
    runtime: &Arc<dyn CodeRuntime>,
    config: RunCodeConfig,
) -> ToolDefinition {
    let weak: Weak<Inner> = Arc::downgrade(&registry.inner);
    let runtime = runtime.clone();
    let language = runtime.language();
    let built = ToolDefinition::builder(RUN_CODE)
        .description(description(language))
        .parameters(parameters(language))
        // A program may run for minutes: served over MCP, it can be a task.
        .task_support()
        .output_schema(json!({
            "type": "object",
            "properties": {
                "logs": {"type": "array", "items": {"type": "string"}},
                "result": {},
                "resultJson": {"type": "string"}
            },
            "required": ["logs"],
            "additionalProperties": false
        }))
        .render(|_args, value| vec![ContentBlock::text(render_output(value))])
        .present_call(|args| {
            Some(CallView::Generic {
                title: args["description"]
                    .as_str()
                    .unwrap_or("run_code")
                    .to_owned(),
                kind: ToolCallKind::Execute,
                raw_input: args.get("code").cloned(),
                content: Vec::new(),
                locations: Vec::new(),
            })
        })
        .handler(move |args: Value, exec: ToolExec| {
            let registry = weak.upgrade().map(|inner| Registry { inner });
            let runtime = runtime.clone();
            async move {
                let Some(registry) = registry else {
                    return Err(ToolError::new("run_code: the registry is gone"));
                };
                run(registry, runtime, config, args, exec).await
            }
        })
        .build();
    match built {
        Ok(definition) => definition,
        // The schemas above are fixed and valid; a failure here is a bug in this file.
        Err(err) => unreachable!("run_code definition is valid: {err}"),
    }
}

async fn run(
    registry: Registry,
    runtime: Arc<dyn CodeRuntime>,
    config: RunCodeConfig,
    args: Value,
    exec: ToolExec,
) -> Result<Value, ToolError> {
    let code = args["code"].as_str().unwrap_or_default().to_owned();
    if args["description"]
        .as_str()
        .is_none_or(|text| text.trim().is_empty())
    {
        return Err(ToolError::coded(
            ErrorCode::InvalidArgs,
            "invalid description: expected a non-empty string",
        ));
    }
    let names: Vec<String> = registry
        .tools(exec.agent())
        .iter()
        .map(|def| def.name().to_owned())
        .collect();
    // The run signal follows the outer call and is cancelled when the run settles.
    let run_signal = exec.signal().child_token();
    // With the index section the program reads declarations through `sdk`.
    let catalog = language_of(runtime.as_ref()).ok().and_then(|language| {
        let specs = registry.tool_specs(exec.agent());
        (registry.resolved_disclosure(exec.agent(), language, &specs) == Disclosure::Index)
            .then(|| Catalog::new(language, specs))
    });
    // A durable run starts from its journal, or ends here with its stored result.
    let durable = match exec.extension::<Durability>() {
        Some(Durability::Journal(run)) => {
            match durable::begin(
                &registry,
                run,
                &args,
                runtime.language(),
                &exec,
                run_signal.clone(),
            )
            .await?
            {
                durable::Begun::Done(result) => return result,
                durable::Begun::Replay(replay) => Some(Durable::Store(run.clone(), replay)),
            }
        }
        #[cfg(feature = "restate")]
        Some(Durability::Steps(sender)) => {
            Some(Durable::Steps(Arc::new(crate::durable::steps::Steps::new(
                sender.clone(),
                exec.call_id().to_owned(),
                durable::idempotent_tools(&registry, &exec),
                durable::publisher(&registry),
                run_signal.clone(),
                exec.span().clone(),
            ))))
        }
        None => None,
    };
    let span = exec.span();
    // A disabled span looks each field up all the same: nothing is recorded without a
    // subscriber.
    let traced = !span.is_disabled();
    if traced {
        span.record("dsh.code.language", runtime.language());
        span.record(
            "dsh.code.max_parallel_sub_calls",
            config.max_parallel_sub_calls,
        );
    }
    if traced && let Some(budgets) = runtime.budgets() {
        span.record("dsh.code.budget.compute_ms", budgets.compute_ms);
        span.record("dsh.code.budget.max_wall_ms", budgets.max_wall_ms);
        span.record("dsh.code.budget.max_memory_mb", budgets.max_memory_mb);
        span.record("dsh.code.budget.max_output_bytes", budgets.max_output_bytes);
        span.record(
            "dsh.code.budget.max_binding_calls",
            budgets.max_binding_calls,
        );
    }
    let bridge = Bridge::new(
        registry,
        exec.clone(),
        run_signal.clone(),
        config.max_parallel_sub_calls,
    );
    let mut namespace = BindingNamespace::tools(names);
    if let Some(class) = &mut namespace.error_class
        && runtime.language() == "python"
    {
        // Python attribute names are snake_case.
        class.member_name_property = "tool_name".to_owned();
    }
    let request = RunRequest::new(code).binding(namespace);
    let request = match catalog {
        Some(catalog) => request
            .binding(Catalog::namespace())
            .dispatch(catalog.dispatch(bridge.dispatcher())),
        None => request.dispatch(bridge.dispatcher()),
    }
    .signal(run_signal.clone())
    .lane(bridge.lane());
    let request = match &durable {
        Some(Durable::Store(_, replay)) => request.journal(replay.clone()),
        #[cfg(feature = "restate")]
        Some(Durable::Steps(steps)) => request.journal(steps.clone()),
        None => request,
    };
    let _abandon_on_drop = bridge.abandon_on_drop();
    // Made before the lane is driven here, so a runtime that takes the lane has it by then.
    let run = runtime.run(request);
    let (outcome, ()) = tokio::join!(
        async {
            let outcome = run.await;
            run_signal.cancel();
            outcome
        },
        bridge.drive()
    );
    if traced {
        span.record("dsh.code.binding_calls", bridge.submitted());
    }
    let outcome =
        outcome.map_err(|err| ToolError::coded(ErrorCode::CodeRunFailed, err.to_string()))?;
    if traced {
        span.record(
            "dsh.code.outcome",
            outcome
                .error
                .as_ref()
                .map_or("ok", |failure| failure.kind.as_str()),
        );
    }
    match durable {
        Some(Durable::Store(run, replay)) => {
            let failure = outcome
                .error
                .as_ref()
                .map(|failure| (failure.kind, failure.message.clone()));
            let result = settle(outcome, &exec);
            durable::finish(&run, &replay, failure, result).await
        }
        // A divergence ended the run through its signal: that, not the cancellation, is how
        // the run ended.
        #[cfg(feature = "restate")]
        Some(Durable::Steps(steps)) => match steps.diverged() {
            Some(message) => Err(ToolError::coded(
                ErrorCode::CodeRunFailed,
                format!(
                    "code run failed ({}): {message}",
                    FailureKind::ReplayDiverged
                ),
            )),
            None => settle(outcome, &exec),
        },
        None => settle(outcome, &exec),
    }
}

/// The journal of a durable run under way.
enum Durable {
    /// A [`JournalStore`](crate::durable::JournalStore)'s run and its replay.
    Store(DurableRun, Arc<Replay>),
    /// Restate's steps.
    #[cfg(feature = "restate")]
    Steps(Arc<crate::durable::steps::Steps>),
}

/// `run_code`'s result for the run's outcome.
fn settle(outcome: RunOutcome, exec: &ToolExec) -> Result<Value, ToolError> {
    // A failed run keeps its failure even when the caller cancelled meanwhile: failures win over
    // cancellation. The runtime's own abort, and an exception the program raised from an aborted
    // sub-call, are the cancellation itself and read as aborted.
    let cancelled = exec.signal().is_cancelled();
    if let Some(failure) = outcome
        .error
        .filter(|failure| !(cancelled && caused_by_cancel(failure.kind)))
    {
        // The runtime's own text (`outer output exceeded N bytes`) stays, with the captured output
        // after it.
        let mut message = format!("code run failed ({}): {}", failure.kind, failure.message);
        if !outcome.logs.is_empty() {
            message.push_str("\nCaptured output:\n");
            message.push_str(&outcome.logs.join("\n"));
        }
        return Err(ToolError::coded(ErrorCode::CodeRunFailed, message));
    }
    if cancelled {
        // The caller cancelled: an aborted program reads as an aborted call.
        return Err(ToolError::coded(ErrorCode::Aborted, "tool call aborted"));
    }
    let mut output = Map::new();
    output.insert("logs".into(), Value::from(outcome.logs));
    if let Some(value) = outcome.value {
        let (key, value) = result_of(value);
        output.insert(key.into(), value);
    }
    Ok(Value::Object(output))
}

/// Host memory, bytes, that the decoded tree of a completion may take beyond its JSON text's
/// length (16 MiB): every completion up to about 100 KB, and any whose bulk is strings, decodes.
const TREE_ALLOWANCE: usize = 16 << 20;

/// Deepest completion `run_code` hands on as a tree: under the `{"logs", "result"}` wrapper
/// it sits one level below the root, and the pipeline refuses a tool's value nested deeper than
/// [`MAX_VALUE_DEPTH`] (256) levels before its recursive checks touch it.
const MAX_TREE_DEPTH: usize = MAX_VALUE_DEPTH - 1;

/// `run_code`'s entry for the completion `text`: `("result", tree)` when the decoded tree takes
/// at most the text's length plus [`TREE_ALLOWANCE`] and nests at most [`MAX_TREE_DEPTH`]
/// levels, else `("resultJson", text)` with the compact JSON text as a string.
///
/// A tree of dense JSON takes tens of times its text (`[1,1,…]`: some 100 ×), so a completion
/// of many small values is handed on as its text, which costs its bytes once and is what the
/// model then reads. A completion nested deeper than the pipeline's values may be (the runtimes
/// return up to 4,096 levels) is its text too, so every completion a runtime returns is a
/// result, never an `INVALID_TOOL_OUTPUT`. It has a key of its own so that a caller reading the
/// value never takes it for a program that returned a string.
fn result_of(text: JsonText) -> (&'static str, Value) {
    let bound = text.as_str().len().saturating_add(TREE_ALLOWANCE);
    if text_depth(text.as_str().as_bytes()) <= MAX_TREE_DEPTH
        && decodes_within(text.as_str().as_bytes(), bound)
    {
        ("result", text.to_value())
    } else {
        ("resultJson", Value::String(text.into_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ones(n: usize) -> JsonText {
        JsonText::from_value(&Value::from(vec![1; n]))
    }

    #[test]
    fn a_completion_decodes_while_its_tree_is_affordable() {
        let small = json!({"a": [1, 2.5, "x"], "b": null});
        assert_eq!(result_of(JsonText::from_value(&small)), ("result", small));
        // 100 KB of dense numbers take about 8 MB as a tree: still decoded.
        assert_eq!(
            result_of(ones(50_000)),
            ("result", Value::from(vec![1; 50_000]))
        );
    }

    /// `depth` arrays nested in each other around `1`.
    fn nested(depth: usize) -> JsonText {
        let mut value = json!(1);
        for _ in 0..depth {
            value = json!([value]);
        }
        JsonText::from_value(&value)
    }

    #[test]
    fn a_completion_deeper_than_the_pipeline_takes_is_its_text() {
        let (key, value) = result_of(nested(MAX_TREE_DEPTH));
        assert_eq!(key, "result");
        let output = json!({"logs": [], "result": value});
        assert_eq!(crate::validate::depth_violation(&output, "value"), None);
        let deeper = nested(MAX_TREE_DEPTH + 1);
        let expected = deeper.as_str().to_owned();
        assert_eq!(result_of(deeper), ("resultJson", Value::String(expected)));
    }

    #[test]
    fn a_completion_whose_tree_would_cost_more_is_its_text() {
        // 400 KB of dense numbers would take about 32 MB as a tree.
        let text = ones(200_000);
        let expected = text.as_str().to_owned();
        assert_eq!(result_of(text), ("resultJson", Value::String(expected)));
    }
}
