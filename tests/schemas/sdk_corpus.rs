//! Renders the SDK of every real tool definition in the corpus (MCP `tools/list` captures and the
//! BFCL sample) in both languages. Skips, saying so, when the corpus is absent. The rendered text
//! is type-checked by `.ci/typecheck-sdk.sh`; here: every tool is present, nothing degrades
//! wholesale, and the output is stable.

use crate::corpus;

use std::collections::BTreeMap;
use std::process::Command;

use dsh_tools::sdk::{self, Language, ToolSpec};

/// `(source, tools)` per MCP capture and for the BFCL sample; `None` without the corpus.
fn sources() -> Option<Vec<(String, Vec<ToolSpec>)>> {
    let mut grouped: BTreeMap<String, Vec<ToolSpec>> = BTreeMap::new();
    for tool in corpus::tools()? {
        grouped
            .entry(tool.source.clone())
            .or_default()
            .push(tool.spec());
    }
    Some(grouped.into_iter().collect())
}

/// Renders every source's SDK in both languages into a temporary folder and runs
/// `.ci/typecheck-sdk.sh` over it (which also checks the committed `sdk/` and the generator's
/// goldens): `tsc --noEmit --strict` and `mypy --strict` must report nothing. The script installs
/// its pinned TypeScript and mypy under `.tools/` on first use.
#[test]
fn generated_sdks_type_check() {
    let Some(sources) = sources() else { return };
    let out = std::env::temp_dir().join(format!("dsh-sdk-typecheck-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary folder");
    for (source, tools) in &sources {
        let stem: String = source
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        std::fs::write(out.join(format!("{stem}.ts")), sdk::typescript(tools)).expect("write");
        std::fs::write(out.join(format!("{stem}.py")), sdk::python(tools)).expect("write");
        // What `sdk.describe` answers for a few of the source's tools stands on its own too.
        let names: Vec<String> = tools.iter().take(3).map(|t| t.name.clone()).collect();
        for (language, extension) in [(Language::TypeScript, "ts"), (Language::Python, "py")] {
            let described = sdk::describe(language, tools, &names).expect("known names");
            std::fs::write(out.join(format!("{stem}_described.{extension}")), described)
                .expect("write");
        }
    }
    let status = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/typecheck-sdk.sh"))
        .arg(&out)
        .status()
        .expect("bash runs");
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        status.success(),
        "generated SDKs do not type-check (see the tsc/mypy output above)"
    );
}

#[test]
fn every_corpus_tool_renders_in_both_languages() {
    let Some(sources) = sources() else { return };
    let mut total = 0;
    for (source, tools) in &sources {
        total += tools.len();
        let typescript = sdk::typescript(tools);
        let python = sdk::python(tools);
        for tool in tools {
            let key = if tool
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
            {
                format!("\n{}: ", tool.name)
            } else {
                format!("\n{}: ", serde_json::to_string(&tool.name).expect("quote"))
            };
            assert!(
                typescript.contains(&key),
                "{source}: {} missing from TypeScript",
                tool.name
            );
            // No tool degrades wholesale: an object schema keeps its object type.
            let member = &typescript[typescript.find(&key).expect("key") + key.len()..];
            if tool
                .parameters
                .get("properties")
                .is_some_and(|p| p.as_object().is_some_and(|m| !m.is_empty()))
            {
                assert!(
                    !member.starts_with("unknown"),
                    "{source}: {} degraded",
                    tool.name
                );
            }
            let quoted = serde_json::to_string(&tool.name).expect("quote");
            assert!(
                python.contains(&format!("async def {}(", tool.name))
                    || python.contains(&format!("# getattr(tools, {quoted})(")),
                "{source}: {} missing from Python",
                tool.name
            );
        }
        let mut reversed = tools.clone();
        reversed.reverse();
        assert_eq!(
            sdk::typescript(&reversed),
            typescript,
            "{source}: order-dependent"
        );
        assert_eq!(sdk::python(&reversed), python, "{source}: order-dependent");
    }
    assert!(total > 250, "read the whole corpus ({total} tools)");
}

#[test]
fn corpus_constructs_map_to_named_types_and_unions() {
    let Some(sources) = sources() else { return };
    let find = |suffix: &str| {
        sources
            .iter()
            .find(|(source, _)| format!("{source}.json").ends_with(suffix))
            .map(|(_, tools)| tools.clone())
            .expect("capture present")
    };
    // Notion: `$defs` + `$ref` become named types; `oneOf` a union.
    let notion = sdk::render(Language::TypeScript, &find("notion-mcp-server.json"));
    assert!(
        notion.contains("\ntype MovePageParentRequest = "),
        "{notion}"
    );
    // mcp-server-time: pydantic `$defs` in the output schema.
    let time = sdk::render(Language::Python, &find("mcp-server-time.json"));
    assert!(time.contains("source: TimeResult"), "{time}");
    // mcp-server-git: `anyOf [string, null]` is an optional union.
    let git = sdk::render(Language::TypeScript, &find("mcp-server-git.json"));
    assert!(git.contains("string | null"), "{git}");
}

/// Tools that answer alike (TypeScript: one `Record` over their names that `ToolOutputMap`
/// extends; Python: one class named after its keys). A program reading each tool's answer must
/// type-check with the right fields, and reading a field the shape lacks must not.
#[test]
fn shared_output_types_type_check_as_each_tools_answer() {
    let done = serde_json::json!({"type": "object",
        "properties": {"ok": {"type": "boolean"}, "note": {"type": "string"}}, "required": ["ok"]});
    let count = serde_json::json!({"type": "object",
        "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    let args = serde_json::json!({"type": "object", "properties": {}});
    let tools = vec![
        ToolSpec::new("remove", "", args.clone(), done.clone()),
        ToolSpec::new("undo-all", "", args.clone(), done.clone()),
        ToolSpec::new("count", "", args.clone(), count),
        ToolSpec::new("purge", "", args.clone(), done),
        ToolSpec::new("anything", "", args, serde_json::json!({})),
    ];
    let typescript = sdk::typescript(&tools);
    assert!(
        typescript.contains("Record<\"purge\" | \"remove\" | \"undo-all\", {"),
        "{typescript}"
    );
    let python = sdk::python(&tools);
    assert_eq!(python.matches("class OkNoteOutput(").count(), 1, "{python}");
    assert_eq!(python.matches("-> OkNoteOutput").count(), 3, "{python}");
    let out = std::env::temp_dir().join(format!("dsh-sdk-shared-{}", std::process::id()));
    std::fs::create_dir_all(&out).expect("temporary folder");
    let program_ts = r#"
async function check(): Promise<void> {
 const removed: boolean = (await tools.remove({})).ok;
 const undone: string | undefined = (await tools["undo-all"]({})).note;
 const counted: number = (await tools.count({})).n;
 const any: JsonValue = await tools.anything({});
 // @ts-expect-error a shared shape has only its own fields
 (await tools.purge({})).n;
 // @ts-expect-error and a tool of its own keeps its own
 (await tools.count({})).ok;
 console.log(removed, undone, counted, any);
}
"#;
    let program_py = r#"

async def check(tools: Tools) -> None:
    removed: bool = (await tools.remove())["ok"]
    counted: int = (await tools.count())["n"]
    purged = await tools.purge()
    print(removed, counted, purged["ok"], purged.get("note"))
    purged["n"]  # type: ignore[typeddict-item]
"#;
    std::fs::write(out.join("shared.ts"), format!("{typescript}{program_ts}")).expect("write");
    std::fs::write(out.join("shared.py"), format!("{python}{program_py}")).expect("write");
    let status = Command::new("bash")
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/.ci/typecheck-sdk.sh"))
        .arg(&out)
        .status()
        .expect("bash runs");
    let _ = std::fs::remove_dir_all(&out);
    assert!(status.success(), "see the tsc/mypy output above");
}
