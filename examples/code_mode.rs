//! The main job: code mode over this repository.
//!
//! Registers a real read-only toolset (list files, read file windows, grep, file stats), shows
//! what the model would see in code mode, then runs model-style programs in TypeScript and Python
//! that call the tools concurrently, and prints their logs, result, elapsed time and the number
//! of tool calls they made.
//!
//! `--mcp "<command line>"` (repeatable) starts an MCP server over stdio and registers its tools
//! next to the local ones, so programs can call them too. The server is named after its command
//! (`mcp-server-time` → `time`) unless the value starts with `<name>=`.
//!
//! ```text
//! cargo run --example code_mode [-- --lang ts|py|both] [--runtime subprocess|embedded]
//!     [--program FILE] [--root DIR] [--mcp "[NAME=]COMMAND ARGS…"]… [--events LOG]
//! ```
//!
//! With `--events`, every tool call's events go to a JSON-lines log (zstd when it ends in `.zst`)
//! that `cargo run --example replay -- LOG --html OUT` turns into a page.

#[path = "../src/bin/dsh-tools/toolset.rs"]
mod toolset;

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use anyhow::{Context, bail};
use clap::{Parser, ValueEnum};
use dsh_tools::code::{CodeRuntime, SubprocessConfig, SubprocessRuntime};
use dsh_tools::events::EventLog;
use dsh_tools::guards::TimeoutPolicy;
use dsh_tools::mcp::{McpServer, is_valid_server_name};
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolCall, ToolResult};
use serde_json::json;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Lang {
    Ts,
    Py,
    Both,
}

/// Where programs run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum RuntimeKind {
    /// A fresh Node.js or CPython process per run.
    Subprocess,
    /// An interpreter inside this process (QuickJS for TypeScript).
    Embedded,
}

/// Run model-style programs against this repository's files in code mode.
#[derive(Parser, Debug)]
struct Cli {
    /// Which runtime(s) to use.
    #[arg(long, value_enum, default_value_t = Lang::Both)]
    lang: Lang,
    /// Which kind of code runtime runs the programs.
    #[arg(long, value_enum, default_value_t = RuntimeKind::Subprocess)]
    runtime: RuntimeKind,
    /// A program to run instead of the bundled one (its language follows --lang, which must then
    /// be ts or py).
    #[arg(long)]
    program: Option<PathBuf>,
    /// The directory the tools may read (default: this repository).
    #[arg(long)]
    root: Option<PathBuf>,
    /// An MCP server to start over stdio, as `[NAME=]COMMAND ARGS…` (repeatable).
    #[arg(long = "mcp", value_name = "COMMAND LINE")]
    mcp: Vec<String>,
    /// Write every tool call's events to this JSON-lines log (`.zst`: zstd) for replay.
    #[arg(long)]
    events: Option<PathBuf>,
}

/// Splits a command line into words: whitespace separates, single and double quotes group,
/// a backslash escapes the next character (outside single quotes).
fn split_words(line: &str) -> anyhow::Result<Vec<String>> {
    let (mut words, mut word, mut in_word) = (Vec::new(), String::new(), false);
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some('\''), '\'') | (Some('"'), '"') => quote = None,
            (Some('\''), _) => word.push(c),
            (_, '\\') => {
                word.push(chars.next().context("a trailing backslash")?);
                in_word = true;
            }
            (Some(_), _) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            (None, _) => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if quote.is_some() {
        bail!("unclosed quote in {line:?}");
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

/// An MCP server from a `--mcp` value; `taken` holds the names already used.
fn mcp_server(value: &str, taken: &mut Vec<String>) -> anyhow::Result<McpServer> {
    let (name, line) = match value.split_once('=') {
        Some((name, rest)) if is_valid_server_name(name) => (Some(name.to_owned()), rest),
        _ => (None, value),
    };
    let mut words = split_words(line)?.into_iter();
    let command = words.next().context("--mcp needs a command")?;
    let base = name.unwrap_or_else(|| {
        let stem = std::path::Path::new(&command)
            .file_stem()
            .map(|stem| stem.to_string_lossy().into_owned())
            .unwrap_or_default();
        let stem = stem.strip_prefix("mcp-server-").unwrap_or(&stem);
        let clean: String = stem
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .take(28)
            .collect();
        if clean.is_empty() {
            "mcp".to_owned()
        } else {
            clean
        }
    });
    let mut name = base.clone();
    let mut n = 2;
    while taken.contains(&name) {
        name = format!("{base}-{n}");
        n += 1;
    }
    taken.push(name.clone());
    Ok(McpServer::stdio(name, command, words))
}

const BUNDLED_TS: &str = include_str!("programs/crate_summary.ts");
const BUNDLED_PY: &str = include_str!("programs/crate_summary.py");

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let root = cli
        .root
        .clone()
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let root = root
        .canonicalize()
        .with_context(|| format!("--root {}", root.display()))?;
    if cli.program.is_some() && cli.lang == Lang::Both {
        bail!("--program needs --lang ts or --lang py");
    }
    let registry = Registry::new();
    registry.register_all(toolset::definitions(&root))?;
    TimeoutPolicy::new().install(&registry);
    let mut names = Vec::new();
    let mut servers = Vec::new();
    for value in &cli.mcp {
        let server = mcp_server(value, &mut names)?;
        let handle = registry
            .add_mcp_server(server)
            .await
            .with_context(|| format!("--mcp {value:?}"))?;
        println!(
            "mcp server {}: {} tools ({})",
            handle.server(),
            handle.tools().len(),
            handle.tools().join(", ")
        );
        servers.push(handle);
    }
    registry.set_mode(Mode::Code);
    let log = match &cli.events {
        Some(path) => Some(
            EventLog::start(&registry, path)
                .with_context(|| format!("--events {}", path.display()))?,
        ),
        None => None,
    };
    let sub_calls = Arc::new(AtomicUsize::new(0));
    let counter = sub_calls.clone();
    registry.on_result(move |view, _result| {
        if view.parent.is_some() {
            counter.fetch_add(1, Ordering::SeqCst);
        }
    });

    let languages: &[Lang] = match cli.lang {
        Lang::Both => &[Lang::Ts, Lang::Py],
        Lang::Ts => &[Lang::Ts],
        Lang::Py => &[Lang::Py],
    };
    println!("tools root: {}", root.display());
    for (index, lang) in languages.iter().enumerate() {
        let runtime: Arc<dyn CodeRuntime> = match (cli.runtime, lang) {
            (RuntimeKind::Subprocess, Lang::Py) => {
                Arc::new(SubprocessRuntime::python(SubprocessConfig::default()).await?)
            }
            (RuntimeKind::Subprocess, _) => {
                Arc::new(SubprocessRuntime::typescript(SubprocessConfig::default()).await?)
            }
            (RuntimeKind::Embedded, lang) => embedded(*lang)?,
        };
        registry.set_code_runtime(runtime.clone());
        let view = registry.model_view(None)?;
        let name = if *lang == Lang::Py {
            "Python"
        } else {
            "TypeScript"
        };
        println!("\n=== What the model sees in code mode ({name}) ===");
        println!("tools: {}", serde_json::to_string_pretty(&view.tools)?);
        for section in &view.sections {
            // The SDK section is long; show it in full once, then only its size.
            if index == 0 || section.id != "tools:sdk" {
                println!(
                    "\n--- prompt section {} (order {}) ---\n{}",
                    section.id, section.order, section.text
                );
            } else {
                println!(
                    "\n--- prompt section {} (order {}): {} lines ---",
                    section.id,
                    section.order,
                    section.text.lines().count()
                );
            }
        }
        let program = match &cli.program {
            Some(path) => std::fs::read_to_string(path)
                .with_context(|| format!("--program {}", path.display()))?,
            None if *lang == Lang::Py => BUNDLED_PY.to_owned(),
            None => BUNDLED_TS.to_owned(),
        };
        println!(
            "\n=== Running the {name} program ({}) ===",
            runtime.isolation().as_str()
        );
        sub_calls.store(0, Ordering::SeqCst);
        let started = Instant::now();
        let call = ToolCall::new(
            format!("run-{index}"),
            "run_code",
            json!({"code": program, "description": "Summarise Rust sources per folder"}),
        );
        let result = registry.execute(call).await;
        let elapsed = started.elapsed();
        match &result {
            ToolResult::Success { value, .. } => {
                println!("logs:");
                for line in value["logs"].as_array().into_iter().flatten() {
                    println!("  {}", line.as_str().unwrap_or_default());
                }
                println!(
                    "result: {}",
                    serde_json::to_string_pretty(&value["result"])?
                );
            }
            ToolResult::Failure { error, .. } => println!("failed: {}", error.message),
        }
        println!(
            "elapsed: {:.1} ms, tool calls: {}",
            elapsed.as_secs_f64() * 1000.0,
            sub_calls.load(Ordering::SeqCst)
        );
        runtime.dispose().await;
        if result.is_error() {
            bail!("the {name} program failed");
        }
    }
    for server in servers {
        server.disconnect().await;
    }
    if let (Some(log), Some(path)) = (log, &cli.events) {
        let events = log.finish().await?;
        println!("\n{events} events written to {}", path.display());
    }
    Ok(())
}

/// The embedded runtime for `lang`. Both languages run in `dsh-monty-worker`: `cargo build
/// --features embedded-python --bin dsh-monty-worker` puts it where this example looks (or set
/// `DSH_MONTY_WORKER`).
#[cfg(feature = "embedded-python")]
fn embedded(lang: Lang) -> anyhow::Result<Arc<dyn CodeRuntime>> {
    use dsh_tools::code::{EmbeddedConfig, EmbeddedRuntime};
    let config = EmbeddedConfig::default();
    let runtime = if lang == Lang::Py {
        EmbeddedRuntime::python(config)
    } else {
        EmbeddedRuntime::javascript(config)
    };
    Ok(Arc::new(runtime.context(
        "build the worker with `cargo build --features embedded-python --bin dsh-monty-worker`",
    )?))
}

#[cfg(not(feature = "embedded-python"))]
fn embedded(_: Lang) -> anyhow::Result<Arc<dyn CodeRuntime>> {
    bail!(
        "--runtime embedded needs the embedded runtimes: \
         cargo run --features embedded-python --example code_mode -- --runtime embedded"
    )
}
