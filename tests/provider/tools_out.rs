//! Tools out: each provider's tool entries, strict per tool with a report where not, in every mode.

use dsh_tools::provider::{Provider, ToolLoop};
use dsh_tools::{Mode, ToolDefinition};
use serde_json::{Value, json};

use crate::support::{at, registry, with_code_runtime};

fn entries(provider: Provider, tools: &Value) -> Vec<Value> {
    match provider {
        Provider::Gemini => at(tools, "/0/functionDeclarations")
            .as_array()
            .unwrap()
            .clone(),
        _ => tools.as_array().unwrap().clone(),
    }
}

#[test]
fn strict_where_the_schema_admits_it_and_a_report_where_not() {
    let registry = registry();
    for provider in Provider::ALL {
        let out = ToolLoop::new(&registry, None, provider).tools().unwrap();
        assert_eq!(out.system, None, "native mode has no system text");
        let entries = entries(provider, &out.tools);
        assert_eq!(entries.len(), 7, "{provider}");
        assert_eq!(out.reports.len(), 1, "{provider}: {:?}", out.reports);
        assert_eq!(out.reports[0].tool, "labels");
        assert_eq!(out.strict.len(), 6);
        let reason = &out.reports[0].reason;
        match provider {
            // Gemini's OpenAPI form has no maps: the whole JSON Schema goes instead.
            Provider::Gemini => assert!(reason.contains("names no properties"), "{reason}"),
            _ => assert!(reason.contains("map"), "{reason}"),
        }
        let search = entries
            .iter()
            .find(|e| e.to_string().contains("\"search\""))
            .unwrap();
        let labels = entries
            .iter()
            .find(|e| e.to_string().contains("\"labels\""))
            .unwrap();
        match provider {
            Provider::OpenAiChat => {
                assert_eq!(at(search, "/function/strict"), true);
                assert_eq!(
                    at(search, "/function/parameters/required"),
                    &json!(["query", "limit"])
                );
                assert_eq!(at(labels, "/function/strict"), false);
            }
            Provider::OpenAiResponses => {
                assert_eq!(at(search, "/strict"), true);
                assert_eq!(at(search, "/type"), "function");
                assert_eq!(at(labels, "/strict"), false);
            }
            Provider::Anthropic => {
                assert_eq!(at(search, "/strict"), true);
                // Anthropic's strict grammar has no numeric bounds: the bound is told in words.
                let limit = at(search, "/input_schema/properties/limit");
                assert!(
                    limit.get("minimum").is_none() && limit.to_string().contains("minimum: 1"),
                    "{limit}"
                );
                assert!(labels.get("strict").is_none());
            }
            Provider::Gemini => {
                assert_eq!(at(search, "/parameters/properties/limit/type"), "integer");
                assert_eq!(
                    at(
                        labels,
                        "/parametersJsonSchema/properties/labels/additionalProperties/type"
                    ),
                    "string"
                );
                // No arguments: no `parameters` (Gemini rejects an OBJECT without properties).
                let snapshot = entries.iter().find(|e| e["name"] == "snapshot").unwrap();
                assert!(snapshot.get("parameters").is_none(), "{snapshot}");
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn strict_off_sends_every_tool_plain_without_reports() {
    let registry = registry();
    let out = ToolLoop::new(&registry, None, Provider::OpenAiChat)
        .strict(false)
        .tools()
        .unwrap();
    assert!(out.reports.is_empty() && out.strict.is_empty());
    assert!(
        out.tools
            .as_array()
            .unwrap()
            .iter()
            .all(|e| e["function"]["strict"] == false)
    );
}

#[test]
fn anthropic_takes_at_most_twenty_strict_tools() {
    let registry = dsh_tools::Registry::new();
    for index in 0..25 {
        let tool = ToolDefinition::builder(format!("t{index:02}"))
            .parameters(json!({"type": "object", "properties": {"x": {"type": "string"}}}))
            .handler(|_, _| async { Ok(json!(null)) })
            .build()
            .unwrap();
        registry.register(tool).unwrap();
    }
    let out = ToolLoop::new(&registry, None, Provider::Anthropic)
        .tools()
        .unwrap();
    assert_eq!(out.strict.len(), 20);
    assert_eq!(out.reports.len(), 5);
    assert!(out.reports[0].reason.contains("at most 20"));
}

#[test]
fn recursion_goes_to_gemini_as_json_schema_and_is_not_strict_on_anthropic() {
    let registry = dsh_tools::Registry::new();
    let tree = json!({"type": "object", "properties": {"root": {"$ref": "#/$defs/node"}},
        "required": ["root"],
        "$defs": {"node": {"type": "object", "properties": {
            "name": {"type": "string"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
            "required": ["name", "children"], "additionalProperties": false}},
        "additionalProperties": false});
    registry
        .register(
            ToolDefinition::builder("tree")
                .parameters(tree)
                .handler(|_, _| async { Ok(json!(1)) })
                .build()
                .unwrap(),
        )
        .unwrap();
    let gemini = ToolLoop::new(&registry, None, Provider::Gemini)
        .tools()
        .unwrap();
    let declaration = at(&gemini.tools, "/0/functionDeclarations/0");
    assert!(declaration.get("parameters").is_none());
    assert_eq!(
        at(declaration, "/parametersJsonSchema/properties/root/$ref"),
        "#/$defs/node"
    );
    assert!(gemini.reports[0].reason.contains("parametersJsonSchema"));
    let anthropic = ToolLoop::new(&registry, None, Provider::Anthropic)
        .tools()
        .unwrap();
    assert!(
        anthropic.reports[0].reason.contains("recursive"),
        "{:?}",
        anthropic.reports
    );
    let openai = ToolLoop::new(&registry, None, Provider::OpenAiChat)
        .tools()
        .unwrap();
    assert_eq!(
        openai.strict,
        ["tree"],
        "OpenAI's strict mode takes recursion"
    );
}

#[test]
fn code_and_both_modes_send_run_code_and_the_prompt_as_system_text() {
    let registry = registry();
    with_code_runtime(&registry);
    for (mode, count) in [(Mode::Code, 1), (Mode::Both, 8)] {
        registry.set_mode(mode);
        for provider in Provider::ALL {
            let out = ToolLoop::new(&registry, None, provider).tools().unwrap();
            let entries = entries(provider, &out.tools);
            assert_eq!(entries.len(), count, "{provider} {mode}");
            assert!(entries.last().unwrap().to_string().contains("\"run_code\""));
            let system = out.system.expect("code mode's prompt sections");
            assert!(system.contains("declare"), "{system}");
            assert_eq!(
                system.contains("The only tool you can call directly is `run_code`"),
                mode == Mode::Code
            );
        }
    }
}

#[test]
fn code_mode_without_a_runtime_is_a_typed_error() {
    let registry = registry();
    registry.set_mode(Mode::Code);
    let error = ToolLoop::new(&registry, None, Provider::Anthropic)
        .tools()
        .unwrap_err();
    assert!(
        error.to_string().contains("requires a code runtime"),
        "{error}"
    );
}

#[test]
fn a_scope_sees_only_its_tools() {
    let registry = registry();
    let scope = registry.agent("reader");
    scope
        .restrict(dsh_tools::registry::Filter::allow(["add", "search"]))
        .unwrap();
    let out = ToolLoop::new(
        &registry,
        Some(scope.id().clone()),
        Provider::OpenAiResponses,
    )
    .tools()
    .unwrap();
    let names: Vec<&str> = out
        .tools
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["add", "search"]);
}
