//! Renders the code-mode SDK (TypeScript and Python) of every tool in a corpus of real tool
//! definitions, so a type checker can be run over the result.
//!
//! Usage: `cargo run --example render_sdk -- --corpus DIR --out DIR`
//!
//! Reads `DIR/mcp-tools/<server>.json` (MCP `tools/list` responses: `inputSchema`,
//! `outputSchema`) and `DIR/bfcl/functions_sample.jsonl` (Berkeley Function Calling Leaderboard
//! definitions, whose schema dialect is mapped to JSON Schema first). Writes one SDK per source
//! as `OUT/<source>.ts` and `OUT/<source>.py` (source names with `-` turned into `_`, so each
//! Python file is an importable module), only when the bytes changed.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use dsh_tools::sdk::{self, Language, ToolSpec};
use serde_json::{Map, Value};

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("render_sdk: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let (corpus, out) = parse_args(std::env::args().skip(1))?;
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut sources = mcp_sources(&corpus.join("mcp-tools"))?;
    sources.push((
        "bfcl".to_owned(),
        bfcl_tools(&corpus.join("bfcl/functions_sample.jsonl"))?,
    ));
    for (source, tools) in sources {
        let stem = source.replace('-', "_");
        for (language, extension) in [(Language::TypeScript, "ts"), (Language::Python, "py")] {
            let path = out.join(format!("{stem}.{extension}"));
            let text = sdk::render(language, &tools);
            sdk::write_if_changed(&path, &text)
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        println!("{stem}: {} tools", tools.len());
    }
    Ok(())
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<(PathBuf, PathBuf), String> {
    const USAGE: &str = "usage: render_sdk --corpus DIR --out DIR";
    let (mut corpus, mut out) = (None, None);
    while let Some(flag) = args.next() {
        let slot = match flag.as_str() {
            "--corpus" => &mut corpus,
            "--out" => &mut out,
            other => return Err(format!("unknown argument `{other}`; {USAGE}")),
        };
        *slot = Some(PathBuf::from(
            args.next()
                .ok_or(format!("{flag} needs a value; {USAGE}"))?,
        ));
    }
    match (corpus, out) {
        (Some(corpus), Some(out)) => Ok((corpus, out)),
        _ => Err(USAGE.to_owned()),
    }
}

fn read_json(path: &Path) -> Result<Value, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not JSON: {e}", path.display()))
}

/// One tool list per MCP server capture, sorted by file name.
fn mcp_sources(dir: &Path) -> Result<Vec<(String, Vec<ToolSpec>)>, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            name.ends_with(".json") && !name.ends_with(".initialize.json")
        })
        .collect();
    paths.sort();
    let mut sources = Vec::new();
    for path in paths {
        let server = path
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default()
            .to_owned();
        let response = read_json(&path)?;
        let listed = response
            .pointer("/result/tools")
            .and_then(Value::as_array)
            .ok_or(format!("{} has no result.tools array", path.display()))?;
        let tools = listed
            .iter()
            .map(|tool| {
                let text = |key: &str| tool.get(key).and_then(Value::as_str).unwrap_or_default();
                ToolSpec::new(
                    text("name"),
                    text("description"),
                    tool.get("inputSchema")
                        .cloned()
                        .unwrap_or(Value::Bool(true)),
                    tool.get("outputSchema")
                        .cloned()
                        .unwrap_or(Value::Bool(true)),
                )
            })
            .collect();
        sources.push((server, tools));
    }
    Ok(sources)
}

/// The BFCL sample: one `{"function": {name, description, parameters, response?}}` per line.
fn bfcl_tools(path: &Path) -> Result<Vec<ToolSpec>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut tools = Vec::new();
    for (number, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let record: Value = serde_json::from_str(line)
            .map_err(|e| format!("{}:{}: not JSON: {e}", path.display(), number + 1))?;
        let function = record.get("function").cloned().unwrap_or(Value::Null);
        let text = |key: &str| {
            function
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
        };
        let mut parameters = function
            .get("parameters")
            .cloned()
            .unwrap_or(Value::Bool(true));
        let mut output = function
            .get("response")
            .cloned()
            .unwrap_or(Value::Bool(true));
        bfcl_to_json_schema(&mut parameters);
        bfcl_to_json_schema(&mut output);
        tools.push(ToolSpec::new(
            text("name"),
            text("description"),
            parameters,
            output,
        ));
    }
    Ok(tools)
}

/// Rewrites BFCL's schema dialect to JSON Schema in place, following BFCL's own converter
/// (`bfcl_eval/constants/type_mappings.py`, `GORILLA_TO_OPENAPI`) except that `any` drops the
/// `type` (any value) instead of becoming `string`. Drops the non-standard `optional: bool` and
/// boolean `required`. Iterative, so nesting depth costs no stack.
fn bfcl_to_json_schema(schema: &mut Value) {
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                rewrite_keywords(map);
                stack.extend(map.values_mut());
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            _ => {}
        }
    }
}

fn rewrite_keywords(map: &mut Map<String, Value>) {
    if let Some(Value::String(ty)) = map.get("type") {
        let mapped = match ty.as_str() {
            "integer" | "byte" | "short" | "long" | "Bigint" => Some("integer"),
            "number" | "float" | "double" => Some("number"),
            "string" | "char" | "String" => Some("string"),
            "boolean" | "bool" | "Boolean" => Some("boolean"),
            "array" | "list" | "tuple" | "ArrayList" | "Array" | "Queue" | "Stack" => Some("array"),
            "dict" | "object" | "HashMap" | "Hashtable" => Some("object"),
            "any" | "Any" | "" => None,
            _ => Some("string"),
        };
        match mapped {
            Some(mapped) => {
                map.insert("type".to_owned(), Value::String(mapped.to_owned()));
            }
            None => {
                map.remove("type");
            }
        }
    }
    map.remove("optional");
    if map.get("required").is_some_and(Value::is_boolean) {
        map.remove("required");
    }
}
