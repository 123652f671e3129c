//! One handler per subcommand. Each returns its output or a one-line error. `serve` and `runs`
//! are in modules of their own; this file holds the other handlers and what they share (the
//! event log, the progress lines, a result's printed form, the journal).

mod runs;
mod serve;

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use dsh_tools::durable::{DurableRun, OpenMode, SqliteJournal};
use dsh_tools::events::{EventLog, ToolEvent};
use dsh_tools::sdk::Language;
use dsh_tools::{Mode, Registry, ToolCall, ToolResult};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::args::{CallArgs, ReplayArgs, RunArgs, SdkArgs, ToolsArgs, ViewArgs};
use crate::sources::mount_runtime;
use crate::terminal::{escaped, pretty};
use dsh_tools::prelude::*;

pub(crate) use runs::{runs, runs_offline};
pub(crate) use serve::serve;

/// The refusal of the spelling `--restate-secret`, which the one secret file replaced.
pub(crate) const RESTATE_SECRET_REPLACED: &str = "--restate-secret was replaced by --restate-secret-file \
     FILE: one secret file (at least 32 bytes, mode 0600, e.g. `head -c 32 /dev/urandom | base64 \
     > FILE; chmod 600 FILE`) tags task ids and signs approvals, for every replica, deployment \
     and `runs --restate`";

/// Resolves on SIGINT (Ctrl-C), SIGTERM or SIGHUP (the terminal went away). The handlers are
/// installed when this is called, so call it before starting anything a signal must stop: until
/// then a signal ends the process at once and leaves its children behind.
fn stop_signal() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{SignalKind, signal};
    let [interrupt, terminate, hangup] = [
        SignalKind::interrupt(),
        SignalKind::terminate(),
        SignalKind::hangup(),
    ]
    .map(|kind| signal(kind).ok());
    let wait = |stream: Option<tokio::signal::unix::Signal>| async move {
        match stream {
            Some(mut stream) => {
                stream.recv().await;
            }
            None => std::future::pending::<()>().await,
        }
    };
    async move {
        tokio::select! {
            () = wait(interrupt) => {}
            () = wait(terminate) => {}
            () = wait(hangup) => {}
        }
    }
}

/// `tools`.
pub(crate) async fn tools(
    registry: &Registry,
    args: &ToolsArgs,
    json_output: bool,
) -> Result<String, String> {
    let schemas = registry.schemas_for(None, args.dialect);
    if json_output {
        let list: Vec<Value> = schemas
            .iter()
            .map(|schema| match &schema.parameters {
                Ok(parameters) => json!({"name": schema.name, "description": schema.description, "parameters": parameters}),
                Err(error) => json!({"name": schema.name, "description": schema.description, "error": error.to_string()}),
            })
            .collect();
        return Ok(pretty(&Value::Array(list)));
    }
    let mut out = String::new();
    for schema in &schemas {
        // A server's names and descriptions never drive the terminal.
        out.push_str(&escaped(&schema.name));
        out.push('\n');
        out.push_str(&format!("  {}\n", escaped(first_line(&schema.description))));
        match &schema.parameters {
            Ok(parameters) => {
                out.push_str(&format!(
                    "  parameters: {}\n",
                    escaped(&parameters.to_string())
                ));
            }
            Err(error) => out.push_str(&format!(
                "  not expressible in {}: {error}\n",
                args.dialect.as_str()
            )),
        }
    }
    out.push_str(&format!(
        "{} tools ({})",
        schemas.len(),
        args.dialect.as_str()
    ));
    Ok(out)
}

/// `sdk`.
pub(crate) async fn sdk(
    registry: &Registry,
    args: &SdkArgs,
    json_output: bool,
) -> Result<String, String> {
    let text = registry.sdk(None, args.lang);
    if json_output {
        return Ok(pretty(
            &json!({"language": language_name(args.lang), "text": text}),
        ));
    }
    Ok(text.trim_end().to_owned())
}

/// `view`.
pub(crate) async fn view(
    registry: &Registry,
    args: &ViewArgs,
    json_output: bool,
) -> Result<String, String> {
    registry.set_mode(args.mode);
    let runtime = if args.mode == Mode::Native {
        None
    } else {
        Some(mount_runtime(registry, args.lang, args.runtime, Default::default(), false).await?)
    };
    let view = registry.model_view(None).map_err(|error| error.to_string());
    if let Some(runtime) = runtime {
        runtime.dispose().await;
    }
    let view = view?;
    if json_output {
        return Ok(pretty(
            &serde_json::to_value(&view).map_err(|error| error.to_string())?,
        ));
    }
    let mut out = format!("mode: {}\n\ntools:\n", view.mode);
    for tool in &view.tools {
        out.push_str(&format!(
            "- {}: {}\n  parameters: {}\n",
            tool.name,
            first_line(&tool.description),
            tool.parameters
        ));
    }
    for section in &view.sections {
        out.push_str(&format!(
            "\n--- prompt section {} (order {}) ---\n{}\n",
            section.id,
            section.order,
            section.text.trim_end()
        ));
    }
    Ok(out.trim_end().to_owned())
}

/// `call`.
pub(crate) async fn call(
    registry: &Registry,
    args: &CallArgs,
    json_output: bool,
) -> Result<String, String> {
    let arguments: Value = match &args.arguments {
        None => json!({}),
        Some(text) => serde_json::from_str(text)
            .map_err(|error| format!("invalid JSON arguments: {error}"))?,
    };
    if registry.get(&args.name, None).is_none() {
        return Err(unknown_tool(registry, &args.name));
    }
    let log = start_log(registry, args.events.as_deref())?;
    let result = registry
        .execute(ToolCall::new("cli-1", args.name.clone(), arguments))
        .await;
    finish_log(log).await?;
    settle(&result, json_output)
}

/// `run`: progress lines (tool, ms, ok/error) on stderr as the program's calls settle.
pub(crate) async fn run(
    registry: &Registry,
    args: &RunArgs,
    json_output: bool,
) -> Result<String, String> {
    let program = std::fs::read_to_string(&args.file)
        .map_err(|error| format!("cannot read {}: {error}", args.file.display()))?;
    let language = args.lang.unwrap_or_else(|| language_of_file(&args.file));
    let stop = stop_signal();
    registry.set_mode(Mode::Code);
    let runtime = mount_runtime(registry, language, args.runtime, args.budgets, false).await?;
    let log = start_log(registry, args.events.as_deref())?;
    let mut events = registry.subscribe();
    let mut call = ToolCall::new(
        "cli-run",
        "run_code",
        json!({"code": program, "description": format!("Run {}", args.file.display())}),
    );
    if let (Some(journal), Some(run_id)) = (&args.journal, &args.run_id) {
        call = call.durable(durable_run(journal, run_id, OpenMode::Create)?);
    }
    // Boxed, so it can be dropped (ending the run) before the runtime is disposed on a signal.
    let mut execution = Box::pin(registry.execute(call));
    tokio::pin!(stop);
    let mut started: HashMap<String, Instant> = HashMap::new();
    // `None`: a signal came first.
    let result = loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Ok(event) => progress_line(&event, &mut started),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break Some((&mut execution).await),
            },
            result = &mut execution => break Some(result),
            () = &mut stop => break None,
        }
    };
    while let Ok(event) = events.try_recv() {
        progress_line(&event, &mut started);
    }
    // After a signal the program's process goes with the command: the run ends when its call is
    // dropped, and disposing waits for that.
    drop(execution);
    runtime.dispose().await;
    finish_log(log).await?;
    match result {
        Some(result) => settle(&result, json_output),
        None => Err("stopped by a signal before the program finished".to_owned()),
    }
}

fn durable_run(journal: &Path, run_id: &str, mode: OpenMode) -> Result<DurableRun, String> {
    Ok(DurableRun::new(
        Arc::new(open_journal(journal, mode)?),
        run_id,
    ))
}

fn open_journal(journal: &Path, mode: OpenMode) -> Result<SqliteJournal, String> {
    let store =
        SqliteJournal::open_with(journal, mode).map_err(|error| format!("--journal: {error}"))?;
    warn_exposed(&store);
    Ok(store)
}

/// Says on stderr, once per command, which of the journal's files other users can read.
fn warn_exposed(store: &SqliteJournal) {
    static WARNED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let exposed = store.readable_by_others();
    if exposed.is_empty() || WARNED.swap(true, std::sync::atomic::Ordering::Relaxed) {
        return;
    }
    let mut stderr = std::io::stderr().lock();
    for (file, mode) in exposed {
        let _ = writeln!(
            stderr,
            "warning: journal file {} is readable by other users (mode {mode:04o}); it holds \
             every program, argument and result verbatim (chmod 600 it)",
            escaped(&file.display().to_string())
        );
    }
}

/// `replay`: reads an event log and writes its replay page; says how many events it drew and where.
pub(crate) fn replay(args: &ReplayArgs, json_output: bool) -> Result<String, String> {
    let limits = dsh_tools::events::ReadLimits::default().with_max_log_bytes(args.max_log_bytes);
    let events =
        dsh_tools::events::read_log_with(&args.log, &limits).map_err(|error| error.to_string())?;
    let out = args
        .html
        .clone()
        .unwrap_or_else(|| args.log.with_extension("html"));
    let page = dsh_tools::presentation::ReplayLimits::default().with_max_calls(args.max_calls);
    std::fs::write(
        &out,
        dsh_tools::presentation::render_html_with(&events, &page),
    )
    .map_err(|error| format!("cannot write {}: {error}", out.display()))?;
    Ok(if json_output {
        pretty(&json!({"events": events.len(), "html": out.display().to_string()}))
    } else {
        format!("{} events → {}", events.len(), out.display())
    })
}

fn progress_line(event: &ToolEvent, started: &mut HashMap<String, Instant>) {
    match event {
        ToolEvent::CodeDispatchStart { call_id, .. } => {
            started.insert(call_id.clone(), Instant::now());
        }
        ToolEvent::CodeDispatch {
            call_id,
            name,
            is_error,
            ..
        } => {
            let ms = started
                .remove(call_id)
                .map_or(0.0, |start| start.elapsed().as_secs_f64() * 1000.0);
            let outcome = if *is_error { "error" } else { "ok" };
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{name} {ms:.1} ms {outcome}");
        }
        ToolEvent::DurableReplayed {
            name,
            is_error,
            outcome_unknown,
            ..
        } => {
            let outcome = match (outcome_unknown, is_error) {
                (true, _) => "OUTCOME_UNKNOWN (cut off while it ran; not run again)",
                (false, true) => "replayed error",
                (false, false) => "replayed ok",
            };
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "{name} {outcome}");
        }
        ToolEvent::DurableDiverged { message, .. } => {
            let mut stderr = std::io::stderr().lock();
            let _ = writeln!(stderr, "diverged: {}", escaped(message));
        }
        _ => {}
    }
}

/// Awaits `work` while printing progress lines for the calls it makes (live or replayed).
async fn with_progress<T>(registry: &Registry, work: impl std::future::Future<Output = T>) -> T {
    let mut events = registry.subscribe();
    let mut started: HashMap<String, Instant> = HashMap::new();
    tokio::pin!(work);
    let output = loop {
        tokio::select! {
            biased;
            event = events.recv() => match event {
                Ok(event) => progress_line(&event, &mut started),
                Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break (&mut work).await,
            },
            output = &mut work => break output,
        }
    };
    while let Ok(event) = events.try_recv() {
        progress_line(&event, &mut started);
    }
    output
}

/// `message` (with its code) for one line: control characters escaped.
fn failure_text(message: &str, code: Option<&str>) -> String {
    let text = match code {
        Some(code) => format!("{message} ({code})"),
        None => message.to_owned(),
    };
    escaped(&text)
}

/// A success prints its content (or the whole result with `--json`); a failure is an error
/// line, except with `--json`, where the result is printed and the exit is still non-zero.
fn settle(result: &ToolResult, json_output: bool) -> Result<String, String> {
    if json_output {
        let text = pretty(&serde_json::to_value(result).map_err(|error| error.to_string())?);
        if result.is_error() {
            crate::print_stdout(&text)?;
            return Err(failure_message(result));
        }
        return Ok(text);
    }
    if result.is_error() {
        return Err(failure_message(result));
    }
    Ok(result.text())
}

fn failure_message(result: &ToolResult) -> String {
    result
        .error()
        .map(|error| match error.code() {
            Some(code) => format!("{} ({code})", error.message),
            None => error.message.clone(),
        })
        .unwrap_or_else(|| result.text())
}

fn unknown_tool(registry: &Registry, name: &str) -> String {
    let mut names: Vec<(usize, String)> = registry
        .tools(None)
        .iter()
        .map(|tool| {
            (
                strsim::levenshtein(name, tool.name()),
                tool.name().to_owned(),
            )
        })
        .collect();
    names.sort();
    let nearest: Vec<String> = names.into_iter().take(3).map(|(_, name)| name).collect();
    if nearest.is_empty() {
        return format!("unknown tool \"{name}\": no tools are registered");
    }
    format!("unknown tool \"{name}\"; nearest: {}", nearest.join(", "))
}

fn start_log(registry: &Registry, path: Option<&Path>) -> Result<Option<EventLog>, String> {
    path.map(|path| {
        EventLog::start(registry, path)
            .map_err(|error| format!("--events {}: {error}", path.display()))
    })
    .transpose()
}

async fn finish_log(log: Option<EventLog>) -> Result<(), String> {
    if let Some(log) = log {
        log.finish()
            .await
            .map_err(|error| format!("--events: {error}"))?;
    }
    Ok(())
}

fn language_of_file(path: &Path) -> Language {
    match path.extension().and_then(|ext| ext.to_str()) {
        Some("py") => Language::Python,
        _ => Language::TypeScript,
    }
}

fn language_name(language: Language) -> &'static str {
    match language {
        Language::Python => "python",
        _ => "typescript",
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}
