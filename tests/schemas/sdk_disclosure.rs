//! Progressive disclosure and the compact SDK at run time: the index section, how a registry
//! chooses it (automatically above a size, or per scope), `sdk.describe` / `sdk.search` called from
//! TypeScript and Python programs, and the main job's programs written against the committed
//! compact SDK running (and, for TypeScript, type-checking against it).

use crate::toolset;

use crate::code_runtime_support;

use std::path::Path;
use std::sync::Arc;

use code_runtime_support::Lang;
use dsh_tools::code::{Budgets, CodeRuntime, SubprocessConfig};
use dsh_tools::prelude::*;
use dsh_tools::sdk::{self, Disclosure, Language, ToolSpec};
use dsh_tools::{Mode, Registry, ToolCall, ToolDefinition, ToolResult};
use serde_json::{Value, json};

async fn runtime(lang: Lang) -> Arc<dyn CodeRuntime> {
    let config = SubprocessConfig {
        budgets: Budgets {
            compute_ms: 20_000,
            max_wall_ms: 60_000,
            ..Budgets::default()
        },
        ..Default::default()
    };
    Arc::new(lang.runtime(config).await)
}

fn add() -> ToolDefinition {
    ToolDefinition::builder("add")
        .description("Sum two numbers. Exact for integers.")
        .parameters(json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}))
        .output_schema(json!({"type": "number"}))
        .concurrency_safe()
        .handler(|args: Value, _| async move {
            Ok(json!(args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0)))
        })
        .build()
        .expect("valid")
}

fn numbered(n: usize) -> ToolDefinition {
    ToolDefinition::builder(format!("tool-{n:02}"))
        .description(format!("Numbered tool {n} of a large set."))
        .handler(|_, _| async { Ok(json!(null)) })
        .build()
        .expect("valid")
}

fn run_code(code: &str) -> ToolCall {
    ToolCall::new(
        "run-1",
        "run_code",
        json!({"code": code, "description": "Test program"}),
    )
}

fn output(result: &ToolResult) -> &Value {
    result
        .value()
        .unwrap_or_else(|| panic!("run_code failed: {result:?}"))
}

fn sdk_section(registry: &Registry, scope: Option<&dsh_tools::AgentId>) -> String {
    let view = registry.model_view(scope).expect("view");
    view.sections
        .into_iter()
        .find(|section| section.id == "tools:sdk")
        .expect("sdk section")
        .text
}

#[test]
fn the_index_lists_one_line_per_tool_and_is_byte_stable() {
    let tools = vec![
        ToolSpec::new(
            "read_file",
            "Read a file. Then more text that the index leaves out.",
            json!({"type": "object"}),
            json!(true),
        ),
        ToolSpec::new(
            "API-get-user",
            "Notion | Retrieve a user with a very long description that goes on",
            json!({"type": "object"}),
            json!(true),
        ),
        ToolSpec::new(
            "API-get-self",
            "Notion | Retrieve your token's bot user\nError Responses:\n400: Bad request",
            json!({"type": "object"}),
            json!(true),
        ),
        ToolSpec::new(
            "zeta",
            "Other | One tool",
            json!({"type": "object"}),
            json!(true),
        ),
        ToolSpec::new("bad\nname */", "", json!({"type": "object"}), json!(true)),
    ];
    for language in [Language::TypeScript, Language::Python] {
        let index = sdk::index_section(language, &tools);
        let lines: Vec<&str> = index
            .lines()
            .skip_while(|l| *l != "Tools:")
            .skip(1)
            .collect();
        assert_eq!(
            lines,
            [
                // A run of tools sharing a label is listed under it once; a line break ends
                // the summary's sentence.
                "Notion |",
                " API-get-self: Retrieve your token's…",
                " API-get-user: Retrieve a user with a…",
                "\"bad\\nname */\"",
                "read_file: Read a file",
                "zeta: Other | One tool",
            ],
            "{index}"
        );
        assert!(index.contains("sdk.describe("), "{index}");
        assert!(!index.contains("interface ToolArgsMap") && !index.contains("class Tools"));
        let mut reversed = tools.clone();
        reversed.reverse();
        assert_eq!(sdk::index_section(language, &reversed), index);
    }
}

#[tokio::test]
async fn large_sets_get_the_index_automatically_and_scopes_can_choose() {
    let registry = Registry::new();
    registry.register(add()).expect("registered");
    registry.set_code_runtime(runtime(Lang::TypeScript).await);
    registry.set_mode(Mode::Code);
    let small = sdk_section(&registry, None);
    assert!(small.contains("interface ToolArgsMap"), "{small}");
    for n in 0..31 {
        registry.register(numbered(n)).expect("registered");
    }
    // 32 tools: above the default 30, so the index.
    let large = sdk_section(&registry, None);
    assert!(
        !large.contains("interface ToolArgsMap") && large.contains("\ntool-30: "),
        "{large}"
    );
    registry.set_disclosure(Disclosure::Auto {
        max_tools: 100,
        max_bytes: 1_000_000,
    });
    assert!(sdk_section(&registry, None).contains("interface ToolArgsMap"));
    // A tight byte bound picks the index too.
    registry.set_disclosure(Disclosure::Auto {
        max_tools: 100,
        max_bytes: 500,
    });
    assert!(!sdk_section(&registry, None).contains("interface ToolArgsMap"));
    // Per scope, inherited by children that declare nothing.
    registry.set_disclosure(Disclosure::Full);
    let parent = registry.agent("parent");
    parent.disclose(Disclosure::Index);
    let child = registry.agent_with_parent("child", &parent);
    assert!(sdk_section(&registry, None).contains("interface ToolArgsMap"));
    assert!(!sdk_section(&registry, Some(parent.id())).contains("interface ToolArgsMap"));
    assert!(!sdk_section(&registry, Some(child.id())).contains("interface ToolArgsMap"));
    assert_eq!(registry.disclosure(Some(child.id())), Disclosure::Index);
    registry.code_runtime().expect("runtime").dispose().await;
}

const DESCRIBE_TS: &str = r#"
const text = await sdk.describe(["add"]);
const one = await sdk.describe("add");
const hits = await sdk.search("sum numbers");
let missing = "";
try { await sdk.describe(["nope"]); } catch (e) { missing = (e as Error).message; }
const sum = await tools.add({ a: 2, b: 3 });
return { declares: text.includes("add: { a: number; b: number };"), same: one === text, first: hits[0].name, count: hits.length, missing, sum };
"#;

const DESCRIBE_PY: &str = r#"
text = await sdk.describe(["add"])
one = await sdk.describe("add")
hits = await sdk.search("sum numbers")
missing = ""
try:
    await sdk.describe(["nope"])
except Exception as e:
    missing = str(e)
total = await tools.add(a=2, b=3)
# No arguments at all send the empty arguments object, which the tool's schema accepts.
await tools["tool-00"]()
both = ""
try:
    await tools.add({"a": 2}, b=3)
except ToolCallError as e:
    both = str(e)
return {"declares": "async def add(self, *, a: float, b: float) -> " in text, "same": one == text, "first": hits[0]["name"], "count": len(hits), "missing": missing, "sum": total, "both": both}
"#;

async fn describe_and_search_from_a_program(lang: Lang, program: &str) {
    let registry = Registry::new();
    registry.register(add()).expect("registered");
    for n in 0..3 {
        registry.register(numbered(n)).expect("registered");
    }
    registry.set_code_runtime(runtime(lang).await);
    registry.set_mode(Mode::Code);
    registry.set_disclosure(Disclosure::Index);
    let result = registry.execute(run_code(program)).await;
    let value = &output(&result)["result"];
    assert_eq!(value["declares"], json!(true), "{value}");
    assert_eq!(value["same"], json!(true), "{value}");
    assert_eq!(value["first"], json!("add"), "{value}");
    // "numbers" also starts no word of the numbered tools' text; "sum" neither: only `add`.
    assert_eq!(value["count"], json!(1), "{value}");
    assert!(
        value["missing"]
            .as_str()
            .is_some_and(|m| m.contains("no tool named \"nope\"")),
        "{value}"
    );
    assert_eq!(value["sum"].as_f64(), Some(5.0), "{value}");
    if lang == Lang::Python {
        // Keyword arguments are the arguments object; mixing them with a dict is refused.
        assert_eq!(
            value["both"],
            json!("pass the arguments as keywords or as one dict, not both"),
            "{value}"
        );
    }
    registry.code_runtime().expect("runtime").dispose().await;
}

#[tokio::test]
async fn typescript_programs_describe_and_search_tools() {
    describe_and_search_from_a_program(Lang::TypeScript, DESCRIBE_TS).await;
}

#[tokio::test]
async fn python_programs_describe_and_search_tools() {
    describe_and_search_from_a_program(Lang::Python, DESCRIBE_PY).await;
}

#[tokio::test]
async fn with_the_full_sdk_there_is_no_sdk_global() {
    let registry = Registry::new();
    registry.register(add()).expect("registered");
    registry.set_code_runtime(runtime(Lang::TypeScript).await);
    registry.set_mode(Mode::Code);
    registry.set_disclosure(Disclosure::Full);
    // `sdk` is an ordinary name then, free for the program.
    let result = registry
        .execute(run_code("const sdk = 1; return typeof sdk;"))
        .await;
    assert_eq!(output(&result)["result"], json!("number"));
    registry.code_runtime().expect("runtime").dispose().await;
}

/// The main job's programs, written against the committed compact SDK, run in both languages.
async fn crate_summary_runs(lang: Lang, program: &str) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let registry = Registry::new();
    registry
        .register_all(toolset::definitions(root))
        .expect("registered");
    registry.set_code_runtime(runtime(lang).await);
    registry.set_mode(Mode::Code);
    let result = registry.execute(run_code(program)).await;
    let value = output(&result);
    let summary = value["result"].as_array().expect("a summary list");
    assert!(
        summary
            .iter()
            .any(|row| row["folder"] == "dsh-tool-runtime" && row["lines"].as_u64() > Some(1000)),
        "{value}"
    );
    registry.code_runtime().expect("runtime").dispose().await;
}

#[tokio::test]
async fn the_typescript_crate_summary_runs() {
    crate_summary_runs(
        Lang::TypeScript,
        include_str!("../../examples/programs/crate_summary.ts"),
    )
    .await;
}

#[tokio::test]
async fn the_python_crate_summary_runs() {
    crate_summary_runs(
        Lang::Python,
        include_str!("../../examples/programs/crate_summary.py"),
    )
    .await;
}

/// The TypeScript program type-checks against the committed SDK (`tsc --strict`), and so does
/// what `sdk.describe` returns (declarations only), in both languages.
#[test]
fn the_program_and_described_declarations_type_check() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let out = std::env::temp_dir().join(format!("dsh-sdk-program-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary folder");
    let sdk_text = std::fs::read_to_string(root.join("sdk/tools.ts")).expect("committed SDK");
    let program = include_str!("../../examples/programs/crate_summary.ts");
    std::fs::write(
        out.join("crate_summary.ts"),
        format!("{sdk_text}\nexport async function main() {{\n{program}\n}}\n"),
    )
    .expect("write");
    let registry = Registry::new();
    registry
        .register_all(toolset::definitions(root))
        .expect("registered");
    let specs = registry.tool_specs(None);
    let names = vec!["grep".to_owned(), "read_file".to_owned()];
    for (language, file) in [
        (Language::TypeScript, "described.ts"),
        (Language::Python, "described.py"),
    ] {
        let text = sdk::describe(language, &specs, &names).expect("known tools");
        assert!(!text.contains("Writing code for run_code") && !text.contains("list_files"));
        std::fs::write(out.join(file), text).expect("write");
    }
    let status = std::process::Command::new("bash")
        .arg(root.join(".ci/typecheck-sdk.sh"))
        .arg(&out)
        .status()
        .expect("bash runs");
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        status.success(),
        "type errors (see the tsc/mypy output above)"
    );
}

/// The guide's SDK excerpt (chapter "Tools and schemas") is a verbatim piece of the committed
/// `sdk/tools.ts`.
#[test]
fn the_guide_excerpt_matches_the_committed_sdk() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("docs/guide/01-tools.md")).expect("guide");
    let start = guide
        .find("<!-- sdk-excerpt:start -->\n```ts\n")
        .expect("excerpt start")
        + "<!-- sdk-excerpt:start -->\n```ts\n".len();
    let end = guide[start..]
        .find("```\n<!-- sdk-excerpt:end -->")
        .expect("excerpt end");
    let excerpt = &guide[start..start + end];
    let sdk_text = std::fs::read_to_string(root.join("sdk/tools.ts")).expect("committed SDK");
    assert!(
        excerpt.lines().count() > 2 && sdk_text.contains(excerpt),
        "the guide's excerpt is stale:\n{excerpt}"
    );
}

#[test]
fn describe_renders_each_name_once_and_refuses_unknown_names() {
    let tools = vec![
        ToolSpec::new(
            "a",
            "First.",
            json!({"type": "object", "properties": {"x": {"type": "string"}}}),
            json!(true),
        ),
        ToolSpec::new(
            "b",
            "Second.",
            json!({"type": "object"}),
            json!({"type": "string"}),
        ),
    ];
    for language in [Language::TypeScript, Language::Python] {
        let once = sdk::describe(language, &tools, &["a".to_owned()]).expect("known");
        let repeated = vec!["a".to_owned(); 10_000];
        assert_eq!(
            sdk::describe(language, &tools, &repeated).expect("known"),
            once
        );
        assert!(
            once.contains("First.") && !once.contains("Second."),
            "{once}"
        );
        let both =
            sdk::describe(language, &tools, &["b".to_owned(), "a".to_owned()]).expect("known");
        assert_eq!(
            both,
            sdk::describe(language, &tools, &["a".to_owned(), "b".to_owned()]).expect("known")
        );
        assert_eq!(
            sdk::describe(language, &tools, &["a".to_owned(), "zz".to_owned()]),
            Err(sdk::DescribeError::UnknownTool("zz".to_owned()))
        );
    }
    let hits: Vec<&str> = sdk::search(&tools, "second")
        .iter()
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(hits, ["b"]);
    assert!(sdk::search(&tools, "nothing matches").is_empty());
}

/// A tool declared destructive says so in its SDK comment, in one word; a read-only one and
/// one that declares nothing say nothing.
#[test]
fn a_destructive_tool_says_so_in_the_sdk() {
    /// Delete a file.
    #[dsh_tools::tool(destructive)]
    async fn delete(path: String) -> String {
        path
    }
    /// Look at a file.
    #[dsh_tools::tool(read_only)]
    async fn look(path: String) -> String {
        path
    }
    let registry = Registry::new();
    registry.register(DeleteTool).unwrap();
    registry.register(LookTool).unwrap();
    for language in [Language::TypeScript, Language::Python] {
        let sdk = registry.sdk(None, language);
        assert!(sdk.contains("(destructive) Delete a file."), "{sdk}");
        assert!(!sdk.contains("(destructive) Look"), "{sdk}");
    }
}
