//! Renders an event log as a self-contained HTML page: one card per tool call, in order, drawn
//! the way each tool presents itself.
//!
//! ```text
//! cargo run --example code_mode -- --lang ts --events target/events.jsonl
//! cargo run --example replay -- target/events.jsonl --html target/replay.html
//! ```

use std::path::PathBuf;

use anyhow::Context;
use clap::Parser;
use dsh_tools::events::read_log;
use dsh_tools::presentation::render_html;

/// Render an event log (`.jsonl`, or `.zst` for zstd) as one HTML page.
#[derive(Parser, Debug)]
struct Cli {
    /// The event log, as written by `EventLog` (e.g. the main job's `--events`).
    log: PathBuf,
    /// Where to write the page (default: the log's path with `.html`).
    #[arg(long)]
    html: Option<PathBuf>,
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    let events = read_log(&cli.log)?;
    let out = cli.html.unwrap_or_else(|| cli.log.with_extension("html"));
    std::fs::write(&out, render_html(&events))
        .with_context(|| format!("--html {}", out.display()))?;
    println!("{} events → {}", events.len(), out.display());
    Ok(())
}
