//! What only the embedded runtimes promise: a program cannot reach the host, hostile programs (deep
//! nesting in source and data, huge literals, recursion and allocation bombs) end in a typed
//! outcome while the host carries on, a hot loop stops within 20 ms of CPU time past its budget,
//! and a thousand runs leave the host's memory flat.
//!
//! The tests of this file measure the whole process (CPU time, resident size), so they take
//! one lock and run one at a time.

// The test calls libc directly (`sysconf` for the page size), with a SAFETY note at each block.
#![allow(unsafe_code)]

mod code_runtime_support;
#[path = "../src/bin/dsh-tools/toolset.rs"]
mod toolset;

use code_runtime_support::*;
use dsh_tools::code::{Budgets, CodeRuntime, EmbeddedConfig, EmbeddedRuntime, FailureKind};
use serde_json::json;
use tokio::sync::Mutex;

static ALONE: Mutex<()> = Mutex::const_new(());

fn config() -> EmbeddedConfig {
    EmbeddedConfig {
        budgets: Budgets {
            compute_ms: 1_000,
            max_wall_ms: 60_000,
            max_memory_mb: 128,
            ..Budgets::default()
        },
        ..EmbeddedConfig::default()
    }
}

fn javascript(config: EmbeddedConfig) -> EmbeddedRuntime {
    EmbeddedRuntime::javascript_in_process(config).expect("a valid config")
}

/// Resident size of this process in bytes.
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").expect("statm");
    let pages: u64 = statm
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("resident pages");
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_cannot_reach_the_host() {
    let _alone = ALONE.lock().await;
    let rt = javascript(config());
    assert_eq!(rt.isolation().as_str(), "in-process interpreter");
    let out = run(
        &rt,
        r#"const names = ['require', 'process', 'std', 'os', 'fetch', 'Deno', 'Bun', 'module',
  'exports', 'XMLHttpRequest', 'WebSocket', 'setTimeout', 'setInterval',
  'importScripts', 'host', 'Buffer', 'scriptArgs', 'print'];
const seen: Record<string, string> = {};
const global = (() => {}).constructor('return this')();
for (const n of names) seen[n] = typeof (globalThis as any)[n] + '/' + typeof global[n];
let imported = 'resolved';
try { await import('os'); } catch (e) { imported = 'rejected'; }
let required = 'ran';
try { (0, eval)("require('fs')"); } catch (e) { required = (e as Error).name; }
const own = Object.getOwnPropertyNames(globalThis).filter((n) => /dsh|host|tools|console/i.test(n));
return { seen, imported, required, own, same: global === globalThis };"#,
    )
    .await;
    let undefined: serde_json::Map<String, serde_json::Value> = [
        "require",
        "process",
        "std",
        "os",
        "fetch",
        "Deno",
        "Bun",
        "module",
        "exports",
        "XMLHttpRequest",
        "WebSocket",
        "setTimeout",
        "setInterval",
        "importScripts",
        "host",
        "Buffer",
        "scriptArgs",
        "print",
    ]
    .into_iter()
    .map(|n| (n.to_owned(), json!("undefined/undefined")))
    .collect();
    assert_value(
        &out,
        json!({"seen": undefined, "imported": "rejected", "required": "ReferenceError",
            "own": [], "same": true}),
    );
    // Nothing a run leaves behind reaches the next one.
    let first = run(
        &rt,
        "(globalThis as any).leak = 42; Object.prototype.x = 1; return 1",
    )
    .await;
    assert_value(&first, json!(1));
    let second = run(
        &rt,
        "return [typeof (globalThis as any).leak, typeof ({} as any).x]",
    )
    .await;
    assert_value(&second, json!(["undefined", "undefined"]));
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_hot_loop_stops_within_20ms_of_cpu_past_the_budget() {
    let _alone = ALONE.lock().await;
    let rt = javascript(EmbeddedConfig {
        budgets: Budgets {
            compute_ms: 300,
            ..Budgets::default()
        },
        ..config()
    });
    // Warm up the thread and allocator paths so the measured run is the loop alone.
    assert_value(&run(&rt, "return 1").await, json!(1));
    let before = process_cpu_ms();
    let out = run(&rt, "let n = 0;\nwhile (true) { n++; }").await;
    let used = process_cpu_ms() - before;
    assert_failure(
        &out,
        FailureKind::Timeout,
        "compute budget exhausted (300ms of CPU time)",
    );
    // The whole process, stripping and the host's own threads included, used at most the
    // budget plus 20 ms of CPU time for the run.
    assert!(used >= 300.0, "{used} ms");
    assert!(used <= 320.0, "{used} ms");
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_hostile_programs_end_in_a_typed_outcome_and_the_host_carries_on() {
    let _alone = ALONE.lock().await;
    let rt = javascript(config());
    let deep = 100_000;
    let open_arrays = "[".repeat(deep);
    let close_arrays = "]".repeat(deep);
    let cases: Vec<(String, &[FailureKind])> = vec![
        // Nesting in source: arrays, parentheses, blocks, object literals, functions.
        (
            format!("return {open_arrays}{close_arrays};"),
            &[FailureKind::Exception],
        ),
        (
            format!("return {}1{};", "(".repeat(deep), ")".repeat(deep)),
            &[FailureKind::Exception],
        ),
        (
            format!("{}{}", "{".repeat(deep), "}".repeat(deep)),
            &[FailureKind::Exception],
        ),
        (
            format!("return {}1{};", "{a:".repeat(deep), "}".repeat(deep)),
            &[FailureKind::Exception],
        ),
        (
            format!("return {}1{};", "() => ".repeat(deep / 10), ""),
            &[FailureKind::Exception, FailureKind::MemoryLimit],
        ),
        // Nesting in data: parsed, built in a loop, printed, serialised, returned, passed on.
        (
            format!("return JSON.parse('{open_arrays}{close_arrays}');"),
            &[FailureKind::Exception, FailureKind::InvalidOutput],
        ),
        (
            "let v: any = []; for (let i = 0; i < 100000; i++) v = [v]; return v;".to_owned(),
            &[FailureKind::InvalidOutput],
        ),
        (
            "let v: any = []; for (let i = 0; i < 100000; i++) v = [v]; return JSON.stringify(v).length;"
                .to_owned(),
            &[FailureKind::Exception],
        ),
        (
            "let v: any = []; for (let i = 0; i < 100000; i++) v = [v]; return String(v);".to_owned(),
            &[FailureKind::Exception],
        ),
        (
            "let v: any = {}; for (let i = 0; i < 100000; i++) v = {v}; console.log(v); return 1;"
                .to_owned(),
            &[],
        ),
        (
            "let v: any = 0; for (let i = 0; i < 100000; i++) v = [v]; return await tools.echo(v);"
                .to_owned(),
            &[FailureKind::Exception],
        ),
        // Huge literals.
        (
            format!("return '{}'.length;", "x".repeat(200_000)),
            &[],
        ),
        (
            format!("return [{}].length;", "1,".repeat(100_000)),
            &[],
        ),
        // Recursion bombs.
        (
            "function f(): number { return f() + 1; }\nreturn f();".to_owned(),
            &[FailureKind::Exception],
        ),
        (
            "const o: any = { get x(): any { return o.x; } };\nreturn o.x;".to_owned(),
            &[FailureKind::Exception],
        ),
        (
            "const p: any = new Proxy({}, { get: (t, k, r) => r[k] });\nreturn p.x;".to_owned(),
            &[FailureKind::Exception],
        ),
        (
            "async function f(): Promise<number> { return 1 + await f(); }\nreturn await f();"
                .to_owned(),
            &[FailureKind::Exception],
        ),
        (
            "const a: any[] = []; a.push(a);\nreturn a.join(',');".to_owned(),
            &[FailureKind::Exception],
        ),
        // Built-ins the bootstrap needs, broken by the program: the outcome is still reported.
        (
            "(RegExp.prototype as any).test = () => { throw 1; };\nreturn { a: 1 };".to_owned(),
            &[FailureKind::InvalidOutput, FailureKind::Exception],
        ),
        (
            "(RegExp.prototype as any).test = () => { throw 1; };\nthrow new Error('plain');"
                .to_owned(),
            &[FailureKind::Exception],
        ),
        (
            "(Promise.prototype as any).then = function () { return this; };\nreturn 1;"
                .to_owned(),
            &[],
        ),
        (
            "const p = new Proxy({}, { getPrototypeOf() { throw 1; }, get() { throw 2; } });\n\
             return { get a() { throw p; } };"
                .to_owned(),
            &[FailureKind::InvalidOutput, FailureKind::Exception],
        ),
        (
            "Object.defineProperty(Error.prototype, 'code', { set() { throw 7; }, configurable: true });\n\
             try { await tools.fail({}); return 'ok'; } catch (e) { return 'caught ' + e; }"
                .to_owned(),
            &[],
        ),
        // Allocation bombs.
        (
            "let s = 'x';\nwhile (true) s += s;".to_owned(),
            &[FailureKind::MemoryLimit, FailureKind::Exception],
        ),
        (
            "try { new ArrayBuffer(2 ** 30); } catch {}\nreturn 'caught';".to_owned(),
            &[FailureKind::MemoryLimit],
        ),
        (
            "const keep = [];\ntry { while (true) keep.push({ a: [1, 2, 3], s: 'x' + keep.length }); } catch {}\nreturn keep.length;"
                .to_owned(),
            &[FailureKind::MemoryLimit],
        ),
        (
            "let p = Promise.resolve();\nwhile (true) p = p.then(() => {});".to_owned(),
            &[FailureKind::MemoryLimit, FailureKind::Timeout],
        ),
        // Catastrophic backtracking is interrupted like any other loop.
        (
            "return /(a+)+$/.test('a'.repeat(40) + 'b');".to_owned(),
            &[FailureKind::Timeout],
        ),
    ];
    let tools = Tools::new();
    for (program, kinds) in &cases {
        let out = tools.run(&rt, program).await;
        let kind = out.error.as_ref().map(|e| e.kind);
        let shown = &program[..program.len().min(80)];
        if kinds.is_empty() {
            assert_eq!(kind, None, "{shown}: {out:?}");
        } else {
            assert!(
                kind.is_some_and(|k| kinds.contains(&k)),
                "{shown}: {:?}",
                out.error
            );
        }
        // The host is unharmed and the next run starts clean.
        assert_value(&run(&rt, "return 'alive'").await, json!("alive"));
    }
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn javascript_a_thousand_runs_leave_host_memory_flat() {
    let _alone = ALONE.lock().await;
    let rt = javascript(config());
    let tools = Tools::new();
    let program = "const big = new Array(10000).fill('x').map((s, i) => s + i);\n\
                   const echoed = await tools.echo({n: big.length});\n\
                   console.log('made', echoed.n);\nreturn big.length;";
    let mut ok = 0;
    for _ in 0..100 {
        ok += usize::from(
            tools
                .run(&rt, program)
                .await
                .value
                .is_some_and(|v| v == json!(10000)),
        );
    }
    let warm = rss_bytes();
    for _ in 0..1_000 {
        ok += usize::from(
            tools
                .run(&rt, program)
                .await
                .value
                .is_some_and(|v| v == json!(10000)),
        );
    }
    let after = rss_bytes();
    assert_eq!(ok, 1_100);
    assert_eq!(tools.calls.load(std::sync::atomic::Ordering::SeqCst), 1_100);
    assert!(
        after as f64 <= warm as f64 * 1.10,
        "resident size grew from {warm} to {after} bytes"
    );
    rt.dispose().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_main_jobs_typescript_program_gives_identical_results_embedded_and_in_a_subprocess() {
    let _alone = ALONE.lock().await;
    let program = include_str!("../examples/programs/crate_summary.ts");
    let subprocess = dsh_tools::code::SubprocessRuntime::typescript(Default::default())
        .await
        .expect("node on PATH");
    assert_main_job_alike(
        std::sync::Arc::new(javascript(EmbeddedConfig::default())),
        std::sync::Arc::new(subprocess),
        repo_tools,
        program,
    )
    .await;
}

/// Every argument shape a program can pass, some plain data the host reads itself, some it
/// leaves to the bootstrap's encoder (getters, proxies, class instances, integers past 2^53).
const ARGUMENT_SHAPES: &str = r#"let getterCalls = 0;
const counted = { get a() { getterCalls++; return getterCalls; } };
const withExtra: any = [1, 2];
withExtra.extra = 'not an index';
const cases: any[] = [
  {i: 1}, [1, 'two', null, true, false], 'é\n"😀\u0001', '',
  0, 1.5 * 2, 0.1 + 0.2, -1, -1.5e-7, 2 ** 31, -(2 ** 31) - 1, 2 ** 53, 2 ** 53 + 2, 2 ** 60,
  -(2 ** 60), 1e20, 1e21, 1.7976931348623157e308, 5e-324,
  {a: {b: {c: []}}}, Object.create(null), Object.assign(Object.create(null), {k: 1}),
  JSON.parse('{"__proto__": 1, "x": 2}'), {1: 'one', b: 2, 0: 'zero'},
  counted, new Proxy({p: 1}, {}), new Proxy([1, 2], {}), withExtra,
  -0, NaN, Infinity, undefined, () => 1, Symbol('s'), 10n, '\ud800', {['\udc00']: 1}, [1, , 2],
  [undefined], {u: undefined}, new Date(0), new Map(), new (class Point { x = 1 })(),
  Object.create({}), [new Uint8Array(2)], {get bad() { throw new Error('no'); }},
  new Proxy({q: 1}, {get() { throw new Error('trap'); }}),
];
let deep: any = 0;
for (let i = 0; i < 4096; i++) deep = i % 2 ? {k: deep} : [deep];
const out: any[] = [];
for (const c of [...cases, deep, [deep]]) {
  try {
    const back = await tools.echo(c);
    out.push(c === deep ? 'deep' : back);
  } catch (e: any) {
    out.push('refused: ' + e.message);
  }
}
let hijacked = false;
Object.defineProperty(Object.prototype, 'a', { set() { hijacked = true; }, configurable: true });
const r = await tools.reply(null);
delete (Object.prototype as any).a;
return {out, getterCalls, hijacked, own: Object.keys(r), plain: Object.getPrototypeOf(r) === Object.prototype,
  protoKey: r.__proto__, big: r.big === 18446744073709552000, neg: r.neg === -9223372036854775808,
  f: r.f, list: r.list, a: r.a};"#;

/// Runs [`ARGUMENT_SHAPES`] on `rt`; returns the outcome and the arguments `echo` received
/// (deep ones as their depth).
async fn argument_shapes(
    rt: &dyn CodeRuntime,
) -> (dsh_tools::code::RunOutcome, Vec<serde_json::Value>) {
    use dsh_tools::code::{BindingCall, BindingNamespace, RunRequest};
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = seen.clone();
    let request = RunRequest::new(ARGUMENT_SHAPES)
        .binding(BindingNamespace::tools(["echo", "reply"]))
        .dispatch(dispatch(move |call: BindingCall| {
            let record = record.clone();
            async move {
                if call.name == "reply" {
                    return Ok(json!({"__proto__": [1], "big": u64::MAX, "neg": i64::MIN,
                        "f": 0.1, "list": [1, {"a": [true, null]}], "a": 1}));
                }
                // Deep values are measured and dropped where the stack is known to be ample.
                let args = call.args;
                let (entry, args) = std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn(move || {
                        let d = depth(&args);
                        let entry = if d > 64 {
                            json!({"depth": d})
                        } else {
                            args.clone()
                        };
                        (entry, if d > 64 { json!(null) } else { args })
                    })
                    .unwrap()
                    .join()
                    .unwrap();
                record.lock().unwrap().push(entry);
                Ok(args)
            }
        }));
    let out = rt.run(request).await.expect("a valid request");
    let seen = seen.lock().unwrap().clone();
    (out, seen)
}

/// The host reads arguments and builds replies itself; what the program sees and what the
/// dispatcher receives are exactly what the subprocess runtime's encoder and `JSON.parse` give.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn binding_values_cross_exactly_as_through_the_subprocess_encoder() {
    let _alone = ALONE.lock().await;
    let embedded = javascript(config());
    let subprocess = dsh_tools::code::SubprocessRuntime::typescript(small())
        .await
        .expect("node on PATH");
    let (in_process, in_process_seen) = argument_shapes(&embedded).await;
    let (child, child_seen) = argument_shapes(&subprocess).await;
    embedded.dispose().await;
    subprocess.dispose().await;
    assert_eq!(in_process.error, None, "{in_process:?}");
    assert_eq!(in_process.value, child.value);
    assert_eq!(in_process_seen, child_seen);
    let value = in_process.value.expect("a value").to_value();
    assert_eq!(value["getterCalls"], 1, "a getter runs once");
    assert_eq!(
        value["hijacked"], false,
        "replies define their own properties"
    );
    assert_eq!(
        value["own"],
        json!(["__proto__", "big", "neg", "f", "list", "a"])
    );
    assert_eq!(value["plain"], true);
    assert_eq!(value["protoKey"], json!([1]));
    assert_eq!((&value["big"], &value["neg"]), (&json!(true), &json!(true)));
    let out = value["out"].as_array().expect("one entry per case");
    let refused = out
        .iter()
        .filter(|v| v.as_str() == Some("refused: binding arguments must be lossless JSON"))
        .count();
    // From `-0` through the throwing proxy, and the value one level too deep.
    assert_eq!(refused, 20, "{out:?}");
    assert_eq!(out[out.len() - 2], "deep");
    let seen = &in_process_seen;
    assert_eq!(seen[0], json!({"i": 1}));
    assert_eq!(seen[5], json!(3), "an integral double is an integer");
    assert_eq!(
        seen[13],
        json!(1152921504606847000u64),
        "2^60 as the encoder prints it"
    );
    assert_eq!(seen[22], json!({"__proto__": 1, "x": 2}));
    assert_eq!(seen[23], json!({"0": "zero", "1": "one", "b": 2}));
    assert_eq!(seen[24], json!({"a": 1}));
    assert_eq!(seen[27], json!([1, 2]));
    assert_eq!(seen[seen.len() - 1], json!({"depth": 4096}));
}

/// The main job's tools: the example toolset over this repository.
fn repo_tools() -> Vec<dsh_tools::ToolDefinition> {
    toolset::definitions(env!("CARGO_MANIFEST_DIR"))
}
