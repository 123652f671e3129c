//! Differential test of the TypeScript type stripper: every program of
//! `tests/strip_corpus/programs.ts`, plus the statement-boundary matrices built below, runs once
//! after our stripping (through the TypeScript code runtime) and once after the TypeScript
//! compiler's `transpileModule` (the pinned `typescript` of `.ci/install-tools.sh`). Logs, values
//! and errors must be identical, and a runtime error's line must be the source line marked
//! `// @throws`.

use crate::code_runtime_support;

use std::path::Path;
use std::process::{Command, Stdio};

use code_runtime_support::*;
use dsh_tools::code::{Budgets, CodeRuntime, FailureKind, SubprocessConfig};
use futures::stream::{self, StreamExt};
use serde_json::{Value, json};

/// Erased statements, each between two statements without semicolons.
const ERASED_STATEMENTS: &[&str] = &[
    "type T = number",
    "type U =\n  | 'a'\n  | 'b'",
    "interface I { a: number }",
    "interface J {\n  b: string\n}",
    "declare const d: number",
    "declare function df(): void",
    "declare let dl: string",
    "declare class DC { m(): void }",
];

/// Lines that continue the previous statement when nothing ends it.
const NEXT_LINES: &[&str] = &[
    "(console.log('paren'))",
    "[1, 2].forEach((x) => console.log('item', x))",
    "`tpl`.length && console.log('template')",
    "+1 && console.log('plus')",
    "-1 && console.log('minus')",
    "/re/.test('re') && console.log('regex')",
    "++v",
];

/// Erased modifiers and the member starts they stand before.
const MODIFIERS: &[&str] = &["private", "public", "protected", "readonly"];
const MEMBERS: &[&str] = &[
    "['k'] = 1",
    "*g() { yield 1 }",
    "'s' = 2",
    "[Symbol.iterator]() { return [][Symbol.iterator]() }",
];

/// Erased whole members, before a member that would continue them.
const ERASED_MEMBERS: &[&str] = &[
    "static [key: string]: any",
    "declare z: number",
    "m(): void",
];

fn corpus() -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/strip_corpus/programs.ts");
    let text = std::fs::read_to_string(path).unwrap();
    let mut programs: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("// ==== ") {
            programs.push((name.to_owned(), String::new()));
        } else if let Some((_, source)) = programs.last_mut() {
            source.push_str(line);
            source.push('\n');
        }
    }
    for (i, erased) in ERASED_STATEMENTS.iter().enumerate() {
        for (j, next) in NEXT_LINES.iter().enumerate() {
            programs.push((
                format!("statement {i} before line {j}"),
                format!("let v = 1\nlet w = v\n{erased}\n{next}\nconsole.log('v', v, 'w', w)\n"),
            ));
        }
    }
    for modifier in MODIFIERS {
        for (j, member) in MEMBERS.iter().enumerate() {
            if *modifier == "readonly" && member.contains('(') {
                // `readonly` belongs to fields only.
                continue;
            }
            programs.push((
                format!("{modifier} before member {j}"),
                format!(
                    "const v = 1\nclass C {{\n  x = v\n  {modifier} {member}\n}}\nconsole.log(Object.getOwnPropertyNames(C.prototype), Object.keys(new C()), new C().x)\n"
                ),
            ));
        }
    }
    for (i, erased) in ERASED_MEMBERS.iter().enumerate() {
        for (j, member) in MEMBERS.iter().enumerate() {
            programs.push((
                format!("erased member {i} before member {j}"),
                format!(
                    "const v = 1\nclass C {{\n  x = v\n  {erased}\n  {member}\n}}\nconsole.log(Object.getOwnPropertyNames(C.prototype), Object.keys(new C()), new C().x)\n"
                ),
            ));
        }
    }
    programs
}

/// The installed `typescript` package, or why there is none.
fn typescript() -> Result<std::path::PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("bash")
        .arg(root.join(".ci/install-tools.sh"))
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("could not run .ci/install-tools.sh: {e}"))?;
    if !status.success() {
        return Err(format!(".ci/install-tools.sh failed: {status}"));
    }
    let package = root.join(".tools/node/node_modules/typescript");
    package
        .join("package.json")
        .exists()
        .then_some(package)
        .ok_or_else(|| "typescript is not installed".to_owned())
}

fn reference(typescript: &Path, programs: &[(String, String)]) -> Vec<Value> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/strip_corpus/reference.mjs");
    let input: Vec<Value> = programs
        .iter()
        .map(|(name, source)| json!({ "name": name, "source": source }))
        .collect();
    let mut child = Command::new("node")
        .arg(script)
        .arg(typescript)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("node runs");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin
            .write_all(serde_json::to_string(&input).unwrap().as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "the reference runner failed");
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The source line of a runtime error our run reported (`program.ts:<line>:<column>`).
fn error_line(message: &str) -> Option<usize> {
    let rest = message.split("program.ts:").nth(1)?;
    rest.split(':').next()?.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_stripping_runs_like_transpile_module() {
    let programs = corpus();
    assert!(programs.len() >= 150, "only {} programs", programs.len());
    let typescript = match typescript() {
        Ok(path) => path,
        Err(why) => {
            eprintln!("skipped: the differential test needs the pinned typescript: {why}");
            return;
        }
    };
    let expected = reference(&typescript, &programs);
    assert_eq!(expected.len(), programs.len());
    let rt = Lang::TypeScript
        .runtime(SubprocessConfig {
            budgets: Budgets {
                compute_ms: 10_000,
                ..Budgets::default()
            },
            ..small()
        })
        .await;
    let ours: Vec<_> = stream::iter(&programs)
        .map(|(_, source)| run(&rt, source))
        .buffered(2)
        .collect()
        .await;
    let mut mismatches = Vec::new();
    for (((name, source), want), got) in programs.iter().zip(&expected).zip(&ours) {
        let mut problems = Vec::new();
        let diagnostics = want["diagnostics"].as_array().unwrap();
        if !diagnostics.is_empty() {
            problems.push(format!("TypeScript rejects the program: {diagnostics:?}"));
        }
        let logs: Vec<Value> = got.logs.iter().map(|l| json!(l)).collect();
        if Value::Array(logs) != want["logs"] {
            problems.push(format!("logs {:?} != {}", got.logs, want["logs"]));
        }
        match (&got.error, want["error"].as_str()) {
            (None, None) => {
                let value = got.value.as_ref().map_or(Value::Null, |v| v.to_value());
                if value != want["value"] {
                    problems.push(format!("value {value} != {}", want["value"]));
                }
            }
            (Some(error), Some(reference)) if error.kind == FailureKind::Exception => {
                let first = error.message.lines().next().unwrap_or("");
                if first != reference {
                    problems.push(format!("error {first:?} != {reference:?}"));
                }
                let marked = source
                    .lines()
                    .position(|l| l.contains("// @throws"))
                    .map(|i| i + 1);
                if error_line(&error.message) != marked {
                    problems.push(format!(
                        "error at line {:?}, marked {marked:?}: {}",
                        error_line(&error.message),
                        error.message
                    ));
                }
            }
            (error, reference) => problems.push(format!("error {error:?} != {reference:?}")),
        }
        if !problems.is_empty() {
            mismatches.push(format!("{name}:\n  {}", problems.join("\n  ")));
        }
    }
    rt.dispose().await;
    assert!(
        mismatches.is_empty(),
        "{} of {} programs differ:\n{}",
        mismatches.len(),
        programs.len(),
        mismatches.join("\n")
    );
}
