//! The replay page of a real main-job run, loaded in Debian's headless Chromium: no console
//! output, one card per call with the kinds the tools present, and a screenshot under the target
//! dir (`replay/<pid>/replay.png`).
//!
//! The run is the main job's (`examples/code_mode.rs --lang ts --events …`): the example toolset
//! over this repository in code mode, the bundled TypeScript program, then a second program that
//! searches, stats a file and reads a missing one. Chromium is installed by
//! `.ci/install-browser.sh`; where it cannot be, the browser part prints that it skipped.

use crate::toolset;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use dsh_tools::code::{CodeRuntime, SubprocessConfig, SubprocessRuntime};
use dsh_tools::events::{EventLog, LoggedEvent, ToolEvent, read_log};
use dsh_tools::guards::TimeoutPolicy;
use dsh_tools::prelude::*;
use dsh_tools::presentation::render_html;
use dsh_tools::{Mode, Registry, ToolCall};
use serde_json::json;

const BUNDLED_TS: &str = include_str!("../../examples/programs/crate_summary.ts");

/// A second program, so the page also shows search matches, a generic card and a failure.
const SEARCH_TS: &str = r#"
const [hits, stats] = await Promise.all([
  tools.grep({ pattern: "pub fn render_html|pub fn read_log", dir: "dsh-tool-runtime/src" }),
  tools.file_stats({ path: "Cargo.toml" }),
]);
let missing = "";
try {
  await tools.read_file({ path: "docs/no-such-file.md" });
} catch (err) {
  missing = (err as Error).message;
}
console.log(`${hits.matches.length} definitions; Cargo.toml has ${stats.lines} lines`);
return { definitions: hits.matches.map((m) => `${m.path}:${m.line_number}`), missing };
"#;

fn out_dir() -> PathBuf {
    // One directory per test process: runs of this suite from other checkouts share the target dir.
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("replay")
        .join(std::process::id().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs the main job's code-mode session with an event log and returns the log's path.
async fn main_job_log(dir: &Path) -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .canonicalize()
        .unwrap();
    let registry = Registry::new();
    registry.register_all(toolset::definitions(&root)).unwrap();
    TimeoutPolicy::new().install(&registry);
    registry.set_mode(Mode::Code);
    let path = dir.join("events.jsonl.zst");
    let log = EventLog::start(&registry, &path).unwrap();
    let runtime: Arc<dyn CodeRuntime> = Arc::new(
        SubprocessRuntime::typescript(SubprocessConfig::default())
            .await
            .expect("node is installed"),
    );
    registry.set_code_runtime(runtime.clone());
    for (id, code, description) in [
        ("run-0", SEARCH_TS, "Find the replay entry points"),
        ("run-1", BUNDLED_TS, "Summarise Rust sources per folder"),
    ] {
        let result = registry
            .execute(ToolCall::new(
                id,
                "run_code",
                json!({"code": code, "description": description}),
            ))
            .await;
        assert!(!result.is_error(), "{id}: {result:?}");
    }
    runtime.dispose().await;
    log.finish().await.unwrap();
    path
}

/// Installs Chromium with the project's script; `None` (after saying why) where it cannot.
fn browser() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/install-browser.sh");
    match std::process::Command::new("bash").arg(&script).output() {
        Ok(out) if out.status.success() => {
            let path = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            Some(PathBuf::from(path))
        }
        Ok(out) => {
            eprintln!(
                "SKIPPED the browser checks: .ci/install-browser.sh could not install chromium:\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            None
        }
        Err(err) => {
            eprintln!("SKIPPED the browser checks: cannot run .ci/install-browser.sh: {err}");
            None
        }
    }
}

/// Runs headless Chromium on `page` with `extra` flags; returns (stdout, console lines).
async fn chromium(browser: &Path, page: &Path, extra: &[String]) -> (String, Vec<String>, String) {
    let profile = tempfile_dir();
    let mut command = tokio::process::Command::new(browser);
    command
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let child = command.spawn().expect("chromium starts");
    // A failure bound only: a loaded machine may take long to start a browser.
    let out = tokio::time::timeout(Duration::from_secs(300), child.wait_with_output())
        .await
        .expect("chromium finishes within 5 minutes")
        .unwrap();
    let _ = std::fs::remove_dir_all(&profile);
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let console = stderr
        .lines()
        .filter(|line| line.contains(":CONSOLE"))
        .map(str::to_owned)
        .collect();
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        console,
        stderr,
    )
}

/// A fresh profile directory per browser run.
fn tempfile_dir() -> PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("dsh-replay-profile-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One `<article class="card">` of the dumped DOM.
#[derive(Debug)]
struct Card {
    call_id: String,
    tool: String,
    kind: String,
    card: String,
    class: String,
    parent: Option<String>,
}

/// The cards of a DOM in document order, each with the card it is nested in.
fn cards(dom: &str) -> Vec<Card> {
    let tags = regex::Regex::new(r"<article ([^>]*)>|</article>").unwrap();
    let attribute = regex::Regex::new(r#"([a-z-]+)="([^"]*)""#).unwrap();
    let mut stack: Vec<String> = Vec::new();
    let mut cards = Vec::new();
    for tag in tags.captures_iter(dom) {
        let Some(attributes) = tag.get(1) else {
            stack.pop();
            continue;
        };
        let attributes: HashMap<&str, &str> = attribute
            .captures_iter(attributes.as_str())
            .map(|c| (c.get(1).unwrap().as_str(), c.get(2).unwrap().as_str()))
            .collect();
        let call_id = attributes["data-call-id"].to_owned();
        cards.push(Card {
            call_id: call_id.clone(),
            tool: attributes["data-tool"].to_owned(),
            kind: attributes["data-kind"].to_owned(),
            card: attributes["data-card"].to_owned(),
            class: attributes["class"].to_owned(),
            parent: stack.last().cloned(),
        });
        stack.push(call_id);
    }
    cards
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_replay_page_of_a_main_job_run_loads_and_shows_every_call() {
    let dir = out_dir();
    let log = main_job_log(&dir).await;
    let events = read_log(&log).unwrap();
    let mut calls: Vec<(String, String, Option<String>)> = Vec::new();
    for event in &events {
        if let LoggedEvent::Tool(ToolEvent::Call {
            call_id,
            name,
            parent,
            ..
        }) = event
        {
            calls.push((call_id.clone(), name.clone(), parent.clone()));
        }
    }
    assert!(
        calls.len() > 10,
        "the bundled program reads every Rust file: {}",
        calls.len()
    );
    let page = dir.join("replay.html");
    std::fs::write(&page, render_html(&events)).unwrap();

    let Some(browser) = browser() else {
        return;
    };
    let (dom, console, _) = chromium(&browser, &page, &["--dump-dom".to_owned()]).await;
    assert!(
        console.is_empty(),
        "the page logs nothing to the console: {console:#?}"
    );

    let cards = cards(&dom);
    let ids: Vec<&str> = cards.iter().map(|card| card.call_id.as_str()).collect();
    let expected: Vec<&str> = calls.iter().map(|(id, _, _)| id.as_str()).collect();
    assert_eq!(
        ids, expected,
        "one card per call, in the order the calls started"
    );
    for (card, (_, name, parent)) in cards.iter().zip(&calls) {
        assert_eq!(&card.tool, name);
        assert_eq!(&card.parent, parent, "{} nests under its run", card.call_id);
        let expected = match (name.as_str(), card.class.contains("failed")) {
            (_, true) => ("read", "error"),
            ("run_code", false) => ("execute", "generic"),
            ("read_file", false) => ("read", "read"),
            ("list_files" | "grep", false) => ("search", "search"),
            ("file_stats", false) => ("read", "generic"),
            (other, _) => panic!("unexpected tool {other}"),
        };
        assert_eq!(
            (card.kind.as_str(), card.card.as_str()),
            expected,
            "{card:?}"
        );
    }
    let failed: Vec<&Card> = cards
        .iter()
        .filter(|c| c.class.contains("failed"))
        .collect();
    assert_eq!(failed.len(), 1, "the missing file is the one failure");
    assert_eq!(failed[0].tool, "read_file");
    for (run, description) in [
        ("run-0", "Find the replay entry points"),
        ("run-1", "Summarise Rust sources per folder"),
    ] {
        let at = dom.find(&format!("data-call-id=\"{run}\"")).unwrap();
        let title = format!("<span class=\"title\">{description}</span>");
        assert_eq!(
            dom[at..].find(&title).map(|offset| offset < 600),
            Some(true),
            "the {run} card is titled by its description"
        );
    }
    for tool in ["grep", "file_stats", "list_files", "read_file", "run_code"] {
        assert!(cards.iter().any(|card| card.tool == tool), "a {tool} card");
    }

    let screenshot = dir.join("replay.png");
    let _ = std::fs::remove_file(&screenshot);
    let (_, console, stderr) = chromium(
        &browser,
        &page,
        &[
            format!("--screenshot={}", screenshot.display()),
            "--window-size=1200,1500".to_owned(),
            "--hide-scrollbars".to_owned(),
        ],
    )
    .await;
    assert!(console.is_empty(), "{console:#?}");
    let png = std::fs::read(&screenshot)
        .unwrap_or_else(|err| panic!("no screenshot ({err}); chromium said:\n{stderr}"));
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    println!("screenshot: {}", screenshot.display());
}

#[tokio::test]
async fn the_console_check_sees_a_script_error() {
    let Some(browser) = browser() else {
        return;
    };
    let page = out_dir().join("broken.html");
    std::fs::write(
        &page,
        "<!DOCTYPE html><html><body><script>missingFunction();</script></body></html>",
    )
    .unwrap();
    let (_, console, _) = chromium(&browser, &page, &["--dump-dom".to_owned()]).await;
    assert!(
        console.iter().any(|line| line.contains("missingFunction")),
        "a thrown error reaches the console lines: {console:#?}"
    );
}

/// Marks the body with what is wider than its box, measured after layout: a card, or any element
/// of a card's body (a code table that needs a horizontal scroll bar hides the end of a line).
/// The summary line is left out: its title ends in an ellipsis by design.
const MEASURE_OVERFLOW: &str = "<script>\
const wide = [];\
for (const card of document.querySelectorAll('article.card')) {\
  if (card.scrollWidth > card.clientWidth + 1) wide.push(card.dataset.callId);\
  for (const e of card.querySelectorAll('.body *')) {\
    if (e.closest('summary') === null && e.scrollWidth > e.clientWidth + 1 && e.clientWidth > 0)\
      wide.push(e.tagName + '.' + e.className);\
  }\
}\
if (document.documentElement.scrollWidth > innerWidth + 1) wide.push('page');\
document.body.setAttribute('data-overflowing', wide.join(',') || 'none');\
</script>";

#[tokio::test]
async fn long_program_lines_arguments_and_messages_stay_inside_their_card() {
    let long = "x".repeat(3_000);
    let program = format!("const data = \"{long}\";\nreturn data.length;");
    let events = vec![
        LoggedEvent::Tool(ToolEvent::Call {
            call_id: "run".into(),
            root_call_id: "run".into(),
            name: "run_code".into(),
            arguments: Arc::new(json!({"program": program})),
            agent: None,
            parent: None,
            view: Some(dsh_tools::presentation::CallView::Generic {
                title: "A program with one long line".into(),
                kind: dsh_tools::presentation::ToolCallKind::Execute,
                raw_input: Some(serde_json::Value::String(program.clone())),
                content: vec![],
                locations: vec![],
            }),
            at_ms: 1_700_000_000_000,
        }),
        LoggedEvent::Tool(ToolEvent::Result {
            call_id: "run".into(),
            root_call_id: "run".into(),
            name: "run_code".into(),
            agent: None,
            parent: None,
            result: Arc::new(dsh_tools::ToolResult::coded_failure(
                dsh_tools::result::ErrorCode::InvalidArgs,
                format!("unknown property \"{long}\""),
            )),
            view: None,
            at_ms: 1_700_000_000_250,
            duration_ms: 250.0,
        }),
    ];
    let html = render_html(&events).replace("</body>", &format!("{MEASURE_OVERFLOW}</body>"));
    let page = out_dir().join("long-lines.html");
    std::fs::write(&page, html).unwrap();
    let Some(browser) = browser() else {
        return;
    };
    let (dom, console, _) = chromium(
        &browser,
        &page,
        &["--dump-dom".to_owned(), "--window-size=1000,800".to_owned()],
    )
    .await;
    assert!(console.is_empty(), "{console:#?}");
    assert!(
        dom.contains("data-overflowing=\"none\""),
        "nothing in a card is wider than its box: {}",
        dom.split("data-overflowing=")
            .nth(1)
            .map_or("no mark", |rest| &rest[..rest.len().min(80)])
    );
}
