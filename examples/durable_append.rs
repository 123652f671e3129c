//! A durable `run_code` run over a tool that changes state: `append_line` appends a line to a
//! file. Run it, kill it, run the same command again: the run resumes from its journal and every
//! line is in the file once.
//!
//! ```text
//! cargo run --example durable_append --features durable -- \
//!     JOURNAL RUN_ID PROGRAM OUT [--pause-in LINE] [--pause-at LABEL] [--idempotent] [--ask LINE]
//!     [--decide approve|deny:REASON|rollback]
//! ```
//!
//! - `append_line({line})` appends `line` to OUT and returns the file's line count;
//!   `--idempotent` declares it idempotent, and then it appends only a line not in OUT yet.
//! - `checkpoint({label})` is read-only and returns `label`.
//! - `--pause-in LINE`: `append_line` of LINE appends, then writes `OUT.paused` and blocks for
//!   ever (the process is killed in the middle of that call). `--pause-at LABEL`: `checkpoint`
//!   of LABEL does the same, between two appends. Neither blocks once `OUT.paused` exists.
//! - `--ask LINE`: a pre-execute hook asks for approval of `append_line` of LINE (the run parks).
//! - `--decide`: instead of running PROGRAM, approve or deny the parked run RUN_ID (it resumes
//!   here) or roll it back (the reverts are printed).
//!
//! `revert_line` removes the line a completed `append_line` added (its revert tool). The run's
//! result is printed as JSON on stdout; a failure is one line on stderr and exit code 1.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use dsh_tools::code::SubprocessRuntime;
use dsh_tools::definition::ToolAnnotations;
use dsh_tools::durable::{DurableRun, SqliteJournal};
use dsh_tools::hooks::PreDecision;
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition, ToolError, ToolExec};
use serde_json::{Value, json};

struct Options {
    journal: PathBuf,
    run_id: String,
    program: PathBuf,
    out: PathBuf,
    pause_in: Option<String>,
    pause_at: Option<String>,
    idempotent: bool,
    ask: Option<String>,
    decide: Option<String>,
}

fn options() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut positional = Vec::new();
    let (mut pause_in, mut pause_at, mut idempotent, mut ask, mut decide) =
        (None, None, false, None, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--pause-in" => pause_in = args.next(),
            "--pause-at" => pause_at = args.next(),
            "--ask" => ask = args.next(),
            "--decide" => decide = args.next(),
            "--idempotent" => idempotent = true,
            _ => positional.push(arg),
        }
    }
    let [journal, run_id, program, out] = <[String; 4]>::try_from(positional)
        .map_err(|_| "usage: durable_append JOURNAL RUN_ID PROGRAM OUT [options]".to_owned())?;
    Ok(Options {
        journal: journal.into(),
        run_id,
        program: program.into(),
        out: out.into(),
        pause_in,
        pause_at,
        idempotent,
        ask,
        decide,
    })
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// Writes the pause marker and blocks for ever, the first time only.
async fn pause(out: &Path) {
    let marker = out.with_extension("paused");
    if marker.exists() {
        return;
    }
    std::fs::write(&marker, b"paused").expect("write the marker");
    std::future::pending::<()>().await;
}

fn register(registry: &Registry, options: &Options) -> Result<(), String> {
    let text = |args: &Value, key: &str| args[key].as_str().unwrap_or_default().to_owned();
    let (out, pause_in, idempotent) = (
        Arc::new(options.out.clone()),
        options.pause_in.clone(),
        options.idempotent,
    );
    let append = ToolDefinition::builder("append_line")
        .description("Append a line to the output file; returns its line count.")
        .parameters(json!({"type": "object", "properties": {"line": {"type": "string"}}, "required": ["line"]}))
        .annotations({
            let mut hints = ToolAnnotations::default();
            hints.idempotent_hint = Some(idempotent);
            hints
        })
        .handler(move |args: Value, _exec: ToolExec| {
            let (out, pause_in) = (out.clone(), pause_in.clone());
            let line = text(&args, "line");
            async move {
                if !(idempotent && lines(&out).contains(&line)) {
                    let mut file = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(out.as_ref())
                        .map_err(|error| ToolError::new(error.to_string()))?;
                    writeln!(file, "{line}").map_err(|error| ToolError::new(error.to_string()))?;
                    file.sync_data()
                        .map_err(|error| ToolError::new(error.to_string()))?;
                }
                if pause_in.as_deref() == Some(line.as_str()) {
                    pause(&out).await;
                }
                Ok(json!(lines(&out).len()))
            }
        })
        .build()
        .map_err(|error| error.to_string())?;
    let (out, pause_at) = (Arc::new(options.out.clone()), options.pause_at.clone());
    let checkpoint = ToolDefinition::builder("checkpoint")
        .description("A read-only step between appends; returns its label.")
        .parameters(json!({"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}))
        .annotations({
            let mut hints = ToolAnnotations::default();
            hints.read_only_hint = Some(true);
            hints
        })
        .handler(move |args: Value, _exec: ToolExec| {
            let (out, pause_at) = (out.clone(), pause_at.clone());
            let label = text(&args, "label");
            async move {
                if pause_at.as_deref() == Some(label.as_str()) {
                    pause(&out).await;
                }
                Ok(json!(label))
            }
        })
        .build()
        .map_err(|error| error.to_string())?;
    let out = Arc::new(options.out.clone());
    let revert = ToolDefinition::builder("revert_line")
        .description("Remove the line an append_line call added.")
        .parameters(json!({"type": "object", "properties": {"arguments": {"type": "object"}, "result": {}}, "required": ["arguments"]}))
        .handler(move |args: Value, _exec: ToolExec| {
            let out = out.clone();
            let line = args["arguments"]["line"].as_str().unwrap_or_default().to_owned();
            async move {
                let kept: Vec<String> = lines(&out).into_iter().filter(|l| *l != line).collect();
                let mut text = kept.join("\n");
                if !kept.is_empty() {
                    text.push('\n');
                }
                std::fs::write(out.as_ref(), text).map_err(|error| ToolError::new(error.to_string()))?;
                Ok(json!(kept.len()))
            }
        })
        .build()
        .map_err(|error| error.to_string())?;
    for tool in [append, checkpoint, revert] {
        registry.register(tool).map_err(|error| error.to_string())?;
    }
    registry.set_revert("append_line", "revert_line");
    if let Some(asked) = options.ask.clone() {
        registry.on_pre_execute(move |view, next| {
            let asked = asked.clone();
            async move {
                if view.name == "append_line" && view.arguments["line"].as_str() == Some(&asked) {
                    return PreDecision::Ask {
                        reason: Some(format!("append \"{asked}\"?")),
                    };
                }
                next.run().await
            }
        });
    }
    Ok(())
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(text) => {
            println!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(message) => {
            eprintln!("error: {message}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<String, String> {
    let options = options()?;
    let program = std::fs::read_to_string(&options.program)
        .map_err(|error| format!("{}: {error}", options.program.display()))?;
    let store = Arc::new(SqliteJournal::open(&options.journal).map_err(|e| e.to_string())?);
    let registry = Registry::new();
    register(&registry, &options)?;
    let runtime = Arc::new(
        SubprocessRuntime::typescript(Default::default())
            .await
            .map_err(|error| error.to_string())?,
    );
    registry.set_code_runtime(runtime.clone());
    registry.set_mode(Mode::Code);
    let run = DurableRun::new(store, options.run_id.clone());
    let result = match options.decide.as_deref() {
        None => {
            let call = ToolCall::new(
                "durable",
                "run_code",
                json!({"code": program, "description": "Append lines"}),
            )
            .durable(run);
            registry.execute(call).await
        }
        Some("approve") => {
            // The continuation names the waiting call and its arguments: what the person saw.
            let parked = registry.parked_run(&run).await.map_err(|e| e.to_string())?;
            registry
                .approve_run(run.store, &parked.continuation)
                .await
                .map_err(|e| e.to_string())?
        }
        Some("rollback") => {
            let reverts = registry
                .rollback_run(run)
                .await
                .map_err(|e| e.to_string())?;
            return serde_json::to_string(&reverts).map_err(|e| e.to_string());
        }
        Some(other) => match other.strip_prefix("deny:") {
            Some(reason) => {
                let parked = registry.parked_run(&run).await.map_err(|e| e.to_string())?;
                registry
                    .deny_run(run.store, &parked.continuation, reason)
                    .await
                    .map_err(|e| e.to_string())?
            }
            None => {
                return Err(format!(
                    "--decide {other}: expected approve, deny:REASON or rollback"
                ));
            }
        },
    };
    dsh_tools::code::CodeRuntime::dispose(runtime.as_ref()).await;
    match result.error() {
        Some(error) => Err(format!(
            "{} ({})",
            error.message,
            error
                .code()
                .map(|code| code.as_str().to_owned())
                .unwrap_or_default()
        )),
        // The program's returned value (`run_code` also returns its logs).
        None => Ok(result
            .value()
            .and_then(|output| output.get("result"))
            .map(Value::to_string)
            .unwrap_or_else(|| "null".to_owned())),
    }
}
