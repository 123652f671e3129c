//! Host memory per run and per protocol frame: how far this process's resident high-water mark
//! (`VmHWM`, reset first) rises above its resident size. Each test runs alone in a child process
//! of this binary ([`alone`]), so the mark it reads is its own.
//!
//! - A hostile child writing a 4 MB binding-call frame straight onto the protocol pipe costs the
//!   host less than 16 MB.
//! - A binding-call frame at the frame cap (1 MiB) costs the host at most 4 × its bytes, whatever
//!   it holds (SPEC §8.1).
//! - The output budget on every runtime: a completion that fits it exactly is returned, one byte
//!   more, output printed past it and a thrown error whose stack is past it end as
//!   `output-limit` with the fixed message; the host holds a few times the budget meanwhile,
//!   never a decoded tree of the completion. At the default budget a 20 MB completion returns.
//! - Through `run_code` on a registry, on every runtime, a completion of 5,000,000 small numbers
//!   (10 MB of JSON) and a 20 MB string cost the host at most 4 × their JSON bytes + 32 MiB:
//!   the tool result carries a completion as its text when its tree would cost more. Node.js
//!   and the pooled QuickJS encode that array within the default `max_memory_mb` (512).
//! - Monty returns a 40 MB string within 152 MiB of program memory: its JSON is written once.
//! - Empty log lines, the worst case per output byte, cost the host at most the budget plus 24
//!   bytes per line.
//! - Building the TypeScript runtime costs the host less than 16 MB: it reads only the head of
//!   the Node.js executable.

mod code_runtime_support;

use std::sync::Arc;

use code_runtime_support::*;
use dsh_tools::code::{Budgets, CodeRuntime, FailureKind, SubprocessConfig};
use dsh_tools::prelude::*;
use dsh_tools::{Mode, Registry, ToolCall};
use serde_json::json;

/// Set in the child process that runs one test alone: the test's name.
const ALONE: &str = "DSH_HOST_MEMORY_TEST";

/// Whether this process is the one to run test `name`. In the test harness's own process it runs
/// the test in a child process of this binary instead, asserts that it passed and returns
/// `false`.
fn alone(name: &str) -> bool {
    if std::env::var(ALONE).as_deref() == Ok(name) {
        return true;
    }
    let status = std::process::Command::new(std::env::current_exe().expect("this binary"))
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE, name)
        .status()
        .expect("the test binary runs");
    assert!(status.success(), "{name} failed in its own process");
    false
}

/// A field of this process's `/proc/self/status` in bytes, e.g. `VmHWM` (the resident
/// high-water mark).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .unwrap();
    line.trim()
        .trim_end_matches("kB")
        .trim()
        .parse::<u64>()
        .unwrap()
        * 1024
}

/// Starts a measurement: resets the resident high-water mark to the resident size now (Linux
/// `clear_refs` 5) and returns that size, so that an earlier peak hides nothing.
fn start_measuring() -> u64 {
    std::fs::write("/proc/self/clear_refs", "5").expect("the high-water mark resets");
    status_bytes("VmRSS")
}

/// How far the resident size rose above `start` since [`start_measuring`].
fn grown_since(start: u64) -> u64 {
    status_bytes("VmHWM").saturating_sub(start)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_mb_argument_frame_costs_the_host_less_than_16_mb() {
    if !alone("a_4_mb_argument_frame_costs_the_host_less_than_16_mb") {
        return;
    }
    // 4 MiB of `0,`: the densest JSON array, ~36 times its size as a decoded value.
    let typescript = r#"const fs = await import('node:fs');
const bytes = Buffer.from('{"type":"call","id":1,"global":"tools","name":"echo","args":[' + '0,'.repeat(2 << 20) + '0]}\n');
let offset = 0;
while (offset < bytes.length) offset += fs.writeSync(3, bytes, offset, bytes.length - offset);
return 'sent';"#;
    let python = r#"import os
data = memoryview(('{"type":"call","id":1,"global":"tools","name":"echo","args":[' + '0,' * (2 << 20) + '0]}\n').encode())
while data:
    data = data[os.write(3, data):]
return 'sent'"#;
    let tools = Tools::new();
    for lang in [Lang::TypeScript, Lang::Python] {
        // The default frame limit (1 MiB) and one that lets the frame be buffered whole.
        for max_frame_bytes in [SubprocessConfig::default().max_frame_bytes, 8 << 20] {
            let config = SubprocessConfig {
                max_frame_bytes,
                ..small()
            };
            let rt = lang.runtime(config).await;
            assert_value(&tools.run(&rt, "return 'warm'").await, json!("warm"));
            let before = start_measuring();
            let out = tools.run(&rt, lang.pick(typescript, python)).await;
            assert_value(&out, json!("sent"));
            let grown = grown_since(before);
            assert!(
                grown < 16 << 20,
                "{lang:?}, max_frame_bytes {max_frame_bytes}: the host grew by {grown} bytes"
            );
            rt.dispose().await;
        }
    }
    // The call was refused, never dispatched.
    assert_eq!(tools.calls.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// The frame cap of the subprocess runtimes (`max_frame_bytes`, default 1 MiB).
const FRAME_CAP: u64 = 1 << 20;

/// Call frames just under the frame cap, from all string to all dense numbers: for each share
/// of `0,` elements, `[<string>, 0, 0, …]` whose frame is 256 bytes short of the cap. Sent with
/// `tools.report`, which answers `null`, so a reply costs nothing.
fn frame_program(lang: Lang, zeros_per_mille: u64) -> String {
    let body = FRAME_CAP - 256;
    let zeros = (body - 64) * zeros_per_mille / 1000 / 2;
    let string = body - 64 - 2 * zeros;
    match lang {
        Lang::TypeScript => format!(
            "const a = new Array({zeros} + 1).fill(0);\na[0] = 's'.repeat({string});\n\
             try {{ await tools.report(a); return 'admitted'; }} catch {{ return 'refused'; }}"
        ),
        Lang::Python => format!(
            "a = [0] * ({zeros} + 1)\na[0] = 's' * {string}\n\
             try:\n    await tools.report(a)\n    return 'admitted'\n\
             except Exception:\n    return 'refused'"
        ),
    }
}

/// Set in a child process that measures one frame: its share of dense numbers, per mille.
const SHARE: &str = "DSH_FRAME_SHARE";

/// Shares of dense numbers swept: the costliest frame the host still decodes lies between a
/// string (its bytes once) and dense numbers (refused).
const SHARES: [u64; 15] = [0, 2, 4, 6, 8, 10, 12, 16, 24, 32, 64, 125, 250, 500, 1000];

/// In its own process: sends one frame of `per_mille` dense numbers; prints
/// `frame-memory <admitted> <bytes the host grew>`.
async fn measure_one_frame(per_mille: u64) {
    let tools = Tools::new();
    let rt = Lang::TypeScript.runtime(small()).await;
    assert_value(&tools.run(&rt, "return 'warm'").await, json!("warm"));
    let before = start_measuring();
    let out = tools
        .run(&rt, &frame_program(Lang::TypeScript, per_mille))
        .await;
    let grown = grown_since(before);
    assert_eq!(out.error, None, "{per_mille}‰: {out:?}");
    let admitted = out.value.is_some_and(|v| v == json!("admitted"));
    assert_eq!(
        tools.calls.load(std::sync::atomic::Ordering::SeqCst),
        usize::from(admitted)
    );
    println!("frame-memory {admitted} {grown}");
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_frame_at_the_frame_cap_costs_the_host_at_most_4_times_its_bytes() {
    let name = "a_call_frame_at_the_frame_cap_costs_the_host_at_most_4_times_its_bytes";
    if let Ok(share) = std::env::var(SHARE) {
        measure_one_frame(share.parse().expect("a share")).await;
        return;
    }
    // One process per frame: the high-water mark each reads is that frame's alone.
    let mut worst = 0.0f64;
    let mut admitted = Vec::new();
    for per_mille in SHARES {
        let out = std::process::Command::new(std::env::current_exe().expect("this binary"))
            .args([name, "--exact", "--nocapture", "--test-threads=1"])
            .env(SHARE, per_mille.to_string())
            .output()
            .expect("the test binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{per_mille}‰: {stdout}");
        let line = stdout
            .lines()
            .find_map(|l| Some(l.split_once("frame-memory ")?.1))
            .expect("a measurement");
        let (taken, grown) = line.split_once(' ').expect("two fields");
        let ratio = grown.parse::<f64>().expect("bytes") / FRAME_CAP as f64;
        println!(
            "{per_mille:>4}‰ dense numbers: admitted {taken}, host grew {ratio:.2}× the frame"
        );
        worst = worst.max(ratio);
        if taken == "true" {
            admitted.push(per_mille);
        }
    }
    assert!(
        worst <= 4.0,
        "a 1 MiB call frame cost the host {worst:.2}× its bytes"
    );
    // Both ends of the sweep were met: frames of strings decode, the densest are refused.
    assert!(
        admitted.contains(&0) && !admitted.contains(&1000),
        "{admitted:?}"
    );
}

/// The output budget of the tests below, small so they stay fast.
const BUDGET: u64 = 4 << 20;

/// A program returning `["sss…", 0, 0, …]` whose compact JSON is exactly `len` bytes: half of
/// the budget as dense numbers (tens of times their bytes as a decoded tree), the rest a string.
fn completion_of(lang: Lang, len: u64) -> String {
    let zeros = BUDGET / 4;
    // `["` + string + `"` + `,0` per zero + `]`.
    let string = len - 4 - 2 * zeros;
    match lang {
        Lang::TypeScript => format!(
            "const a = new Array({zeros} + 1).fill(0);\na[0] = 's'.repeat({string});\nreturn a;"
        ),
        Lang::Python => format!("a = [0] * ({zeros} + 1)\na[0] = 's' * {string}\nreturn a"),
    }
}

/// The four output-budget cases on `rt`, whose budget is [`BUDGET`], with the host's resident
/// size asserted over them.
async fn the_output_budget_holds(rt: Arc<dyn CodeRuntime>, lang: Lang) {
    let diagnostic = format!("outer output exceeded {BUDGET} bytes");
    assert_value(&run(rt.as_ref(), "return 'warm'").await, json!("warm"));
    let before = start_measuring();
    // The logs array `[]` is 2 bytes of the budget: a completion of the rest fits exactly.
    let out = run(rt.as_ref(), &completion_of(lang, BUDGET - 2)).await;
    assert_eq!(out.error, None, "{:?}", out.error);
    let text = out.value.expect("the completion");
    assert_eq!(text.as_str().len() as u64, BUDGET - 2);
    assert!(text.as_str().starts_with(r#"["sss"#) && text.as_str().ends_with(",0,0]"));
    drop(text);
    let grown = grown_since(before);
    let out = run(rt.as_ref(), &completion_of(lang, BUDGET - 1)).await;
    assert_failure(&out, FailureKind::OutputLimit, &diagnostic);
    assert_eq!(out.error.unwrap().message, diagnostic);
    let out = run(
        rt.as_ref(),
        lang.pick(
            "for (let i = 0; i < 50; i++) console.log('x'.repeat(100000));\nreturn 1;",
            "for i in range(50):\n    print('x' * 100000)\nreturn 1",
        ),
    )
    .await;
    assert_failure(&out, FailureKind::OutputLimit, &diagnostic);
    let logs: u64 = out.logs.iter().map(|l| l.len() as u64 + 3).sum();
    assert!(logs <= BUDGET && out.logs.len() >= 40, "{}", out.logs.len());
    let out = run(
        rt.as_ref(),
        lang.pick(
            &format!("throw new Error('x'.repeat({}));", 2 * BUDGET),
            &format!("raise Exception('x' * {})", 2 * BUDGET),
        ),
    )
    .await;
    assert_failure(&out, FailureKind::OutputLimit, &diagnostic);
    rt.dispose().await;
    // A decoded tree of the exact completion alone would take over 40 × the budget.
    let grown = grown.max(grown_since(before));
    assert!(
        grown < 8 * BUDGET,
        "{lang:?}: the host grew by {grown} bytes for a {BUDGET}-byte budget"
    );
}

/// [`BUDGET`], with compute time for interpreters built without optimizations to make a
/// million-element array.
fn budgets() -> Budgets {
    Budgets {
        max_output_bytes: BUDGET,
        max_memory_mb: 512,
        compute_ms: 30_000,
        max_wall_ms: 60_000,
        ..small().budgets
    }
}

fn subprocess() -> SubprocessConfig {
    SubprocessConfig {
        budgets: budgets(),
        ..small()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_budget_holds_on_subprocess_typescript() {
    if alone("the_output_budget_holds_on_subprocess_typescript") {
        let rt = Lang::TypeScript.runtime(subprocess()).await;
        the_output_budget_holds(Arc::new(rt), Lang::TypeScript).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_budget_holds_on_subprocess_python() {
    if alone("the_output_budget_holds_on_subprocess_python") {
        let rt = Lang::Python.runtime(subprocess()).await;
        the_output_budget_holds(Arc::new(rt), Lang::Python).await;
    }
}

#[cfg(feature = "embedded-python")]
fn embedded() -> dsh_tools::code::EmbeddedConfig {
    dsh_tools::code::EmbeddedConfig {
        budgets: budgets(),
        ..dsh_tools::code::EmbeddedConfig::default()
    }
}

#[cfg(feature = "embedded-python")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_budget_holds_on_pooled_quickjs() {
    if alone("the_output_budget_holds_on_pooled_quickjs") {
        let rt = dsh_tools::code::EmbeddedRuntime::javascript(embedded()).expect("a runtime");
        the_output_budget_holds(Arc::new(rt), Lang::TypeScript).await;
    }
}

#[cfg(feature = "embedded-python")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_output_budget_holds_on_monty() {
    if alone("the_output_budget_holds_on_monty") {
        let rt = dsh_tools::code::EmbeddedRuntime::python(embedded()).expect("a runtime");
        the_output_budget_holds(Arc::new(rt), Lang::Python).await;
    }
}

/// At the default budget (64 MiB) a 20 MB completion is returned, in both subprocess
/// languages, and the host holds a few times its bytes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_mb_completion_returns_at_the_default_budget() {
    if !alone("a_20_mb_completion_returns_at_the_default_budget") {
        return;
    }
    let config = SubprocessConfig {
        budgets: Budgets {
            max_memory_mb: 512,
            ..small().budgets
        },
        ..small()
    };
    assert_eq!(
        config.budgets.max_output_bytes,
        Budgets::default().max_output_bytes
    );
    for lang in [Lang::TypeScript, Lang::Python] {
        let rt = lang.runtime(config.clone()).await;
        assert_value(&run(&rt, "return 'warm'").await, json!("warm"));
        let before = start_measuring();
        let out = run(
            &rt,
            lang.pick("return 'a'.repeat(20_000_000);", "return 'a' * 20_000_000"),
        )
        .await;
        assert_eq!(out.error, None, "{lang:?}: {:?}", out.error);
        let text = out.value.expect("the completion");
        assert_eq!(text.as_str().len(), 20_000_002);
        assert!(
            text.as_str()
                .bytes()
                .skip(1)
                .take(20_000_000)
                .all(|b| b == b'a')
        );
        let grown = grown_since(before);
        assert!(
            grown < 80_000_000,
            "{lang:?}: the host grew by {grown} bytes"
        );
        rt.dispose().await;
    }
}

/// What the host may grow by for a `run_code` completion of `bytes` JSON bytes: 4 × them plus
/// 32 MiB (the runtime's read buffers, the registry, one tree of at most 16 MiB).
fn run_code_bound(bytes: u64) -> u64 {
    4 * bytes + (32 << 20)
}

/// Through `run_code` on a code-mode registry over `rt`: a completion of 5,000,000 ones
/// (`[1,1,…]`, 10,000,001 bytes, some 100 × that as a decoded tree) and a 20,000,000-byte
/// string each return, the model reading their text, with the host's growth within
/// [`run_code_bound`] of their bytes.
async fn run_code_holds_large_completions(rt: Arc<dyn CodeRuntime>, lang: Lang) {
    let registry = Registry::new();
    registry.set_code_runtime(rt.clone());
    registry.set_mode(Mode::Code);
    let call = |id: &str, code: &str| {
        ToolCall::new(
            id,
            "run_code",
            json!({"code": code, "description": "Return a large value"}),
        )
    };
    let warm = registry
        .execute(call("warm", lang.pick("return 'warm';", "return 'warm'")))
        .await;
    assert_eq!(warm.text(), "warm", "{warm:?}");
    let ones = lang.pick(
        "return new Array(5_000_000).fill(1);",
        "return [1] * 5_000_000",
    );
    let string = lang.pick("return 'a'.repeat(20_000_000);", "return 'a' * 20_000_000");
    for (id, code, bytes) in [
        ("ones", ones, 10_000_001u64),
        ("string", string, 20_000_002),
    ] {
        let before = start_measuring();
        let result = registry.execute(call(id, code)).await;
        let grown = grown_since(before);
        let bound = run_code_bound(bytes);
        assert!(
            grown <= bound,
            "{lang:?} {id}: the host grew by {grown} bytes for a {bytes}-byte completion \
             (bound {bound})"
        );
        assert!(!result.is_error(), "{lang:?} {id}: {:?}", result.error());
        let text = result.text();
        let output = result.value().expect("a value");
        assert_eq!(output["logs"], json!([]));
        if id == "ones" {
            // Its tree would take far more than its text: the result is the compact text.
            assert_eq!(text.len() as u64, bytes);
            assert!(text.starts_with("[1,1,") && text.ends_with(",1]"));
            assert!(text[1..text.len() - 1].split(',').all(|one| one == "1"));
            assert_eq!(output.get("result"), None);
            assert_eq!(output["resultJson"].as_str(), Some(text.as_str()));
        } else {
            assert_eq!(text.len() as u64, bytes - 2);
            assert!(text.bytes().all(|b| b == b'a'));
            assert_eq!(output["result"].as_str().map(str::len), Some(text.len()));
        }
        println!("{lang:?} {id}: the host grew by {grown} bytes for {bytes} bytes of JSON");
    }
    rt.dispose().await;
}

/// Default budgets (64 MiB of output, 512 MiB of program memory), with compute time for
/// interpreters built without optimizations. Monty gets `max_memory_mb` 2048: it hands the
/// host its completion as a tree of its own objects, which takes more than 512 MiB for the
/// array.
fn run_code_budgets(max_memory_mb: u64) -> Budgets {
    Budgets {
        max_memory_mb,
        compute_ms: 60_000,
        max_wall_ms: 120_000,
        ..Budgets::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_holds_large_completions_on_subprocess_typescript() {
    if alone("run_code_holds_large_completions_on_subprocess_typescript") {
        let config = SubprocessConfig {
            budgets: run_code_budgets(Budgets::default().max_memory_mb),
            ..small()
        };
        let rt = Lang::TypeScript.runtime(config).await;
        run_code_holds_large_completions(Arc::new(rt), Lang::TypeScript).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_holds_large_completions_on_subprocess_python() {
    if alone("run_code_holds_large_completions_on_subprocess_python") {
        let config = SubprocessConfig {
            budgets: run_code_budgets(Budgets::default().max_memory_mb),
            ..small()
        };
        let rt = Lang::Python.runtime(config).await;
        run_code_holds_large_completions(Arc::new(rt), Lang::Python).await;
    }
}

#[cfg(feature = "embedded-python")]
fn run_code_embedded(max_memory_mb: u64) -> dsh_tools::code::EmbeddedConfig {
    dsh_tools::code::EmbeddedConfig {
        budgets: run_code_budgets(max_memory_mb),
        ..dsh_tools::code::EmbeddedConfig::default()
    }
}

#[cfg(feature = "embedded-python")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_holds_large_completions_on_pooled_quickjs() {
    if alone("run_code_holds_large_completions_on_pooled_quickjs") {
        let config = run_code_embedded(Budgets::default().max_memory_mb);
        let rt = dsh_tools::code::EmbeddedRuntime::javascript(config).expect("a runtime");
        run_code_holds_large_completions(Arc::new(rt), Lang::TypeScript).await;
    }
}

#[cfg(feature = "embedded-python")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_code_holds_large_completions_on_monty() {
    if alone("run_code_holds_large_completions_on_monty") {
        let rt =
            dsh_tools::code::EmbeddedRuntime::python(run_code_embedded(2048)).expect("a runtime");
        run_code_holds_large_completions(Arc::new(rt), Lang::Python).await;
    }
}

/// Monty writes a completion's JSON straight into its `done` frame, strings escaped in place: a
/// 40 MB string returns with 152 MiB of program memory (it took more than 168 MiB while the
/// worker copied the string's JSON twice over).
#[cfg(feature = "embedded-python")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn monty_returns_a_40_mb_string_within_152_mib() {
    let rt = dsh_tools::code::EmbeddedRuntime::python(run_code_embedded(152)).expect("a runtime");
    let out = run(&rt, "return 'a' * 40_000_000").await;
    assert_eq!(out.error, None, "{:?}", out.error);
    let text = out.value.expect("the completion");
    assert_eq!(text.as_str().len(), 40_000_002);
    assert!(
        text.as_str()
            .bytes()
            .skip(1)
            .take(40_000_000)
            .all(|b| b == b'a')
    );
    rt.dispose().await;
}

/// Empty log lines cost the host the most per output byte: each is 3 bytes of the budget (`""`
/// and its comma) and a 24-byte `String` in `RunOutcome::logs`. Host memory for logs is at most
/// the budget plus 24 bytes per line (here 4 MiB of empty lines: about 1.4 million of them).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn empty_log_lines_cost_the_host_24_bytes_each() {
    if !alone("empty_log_lines_cost_the_host_24_bytes_each") {
        return;
    }
    const CAP: u64 = 4 << 20;
    let config = SubprocessConfig {
        budgets: Budgets {
            max_output_bytes: CAP,
            max_wall_ms: 120_000,
            ..budgets()
        },
        ..small()
    };
    let rt = Lang::TypeScript.runtime(config).await;
    assert_value(&run(&rt, "return 'warm'").await, json!("warm"));
    let before = start_measuring();
    let started = std::time::Instant::now();
    let out = run(&rt, "for (;;) console.log('')").await;
    let grown = grown_since(before);
    let diagnostic = format!("outer output exceeded {CAP} bytes");
    // The logs printed keep their room; the diagnostic is cut to what they leave (DSH's exact
    // accounting), here all or nearly all of it.
    let error = out.error.as_ref().expect("an output-limit failure");
    assert_eq!(error.kind, FailureKind::OutputLimit);
    assert!(diagnostic.starts_with(&error.message), "{}", error.message);
    let lines = out.logs.len() as u64;
    assert!((CAP - 2 - diagnostic.len() as u64 - 2) / 3 <= lines && lines <= (CAP - 2 + 1) / 3);
    let bound = CAP + 24 * lines;
    eprintln!(
        "{lines} empty lines: host grew {grown} bytes (bound {bound}) in {:?}",
        started.elapsed()
    );
    assert!(grown <= bound, "{grown} > {bound}");
}

/// Building the TypeScript runtime reads only the head of the Node.js executable (some 100 MiB)
/// to find its ELF program interpreter, which the sandbox lets the child execute: the host's
/// resident peak stays far below the interpreter's size.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn building_the_typescript_runtime_does_not_load_the_interpreter() {
    if !alone("building_the_typescript_runtime_does_not_load_the_interpreter") {
        return;
    }
    let before = start_measuring();
    let rt = Lang::TypeScript.runtime(small()).await;
    let grown = grown_since(before);
    rt.dispose().await;
    assert!(
        grown < 16 << 20,
        "the host grew by {grown} bytes building the runtime"
    );
}
