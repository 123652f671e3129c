//! Tool names a provider refuses (dots, other characters, too long) are sent renamed, collisions
//! are resolved deterministically, and a call of the name sent runs the real tool.

use std::collections::BTreeMap;

use dsh_tools::provider::{Provider, ToolLoop};
use dsh_tools::{Registry, ToolDefinition};
use serde_json::{Value, json};

use crate::support::at;

fn long_name() -> String {
    format!("server.{}", "very_long_tool_name_".repeat(4))
}

/// Tools that answer with their position in `names`, under names some providers refuse.
fn registry(names: &[String]) -> Registry {
    let registry = Registry::new();
    for (position, name) in names.iter().enumerate() {
        let tool = ToolDefinition::builder(name.clone())
            .description("Answers with its position.")
            .parameters(json!({"type": "object", "properties": {}}))
            .handler(move |_, _| async move { Ok(json!(position)) })
            .build()
            .expect("a valid definition");
        registry.register(tool).expect("registered");
    }
    registry
}

fn names() -> Vec<String> {
    ["server.tool", "server_tool", "server:tool", "plain"]
        .iter()
        .map(|name| (*name).to_owned())
        .chain([long_name()])
        .collect()
}

/// The names a request carries, in order.
fn sent(provider: Provider, tools: &Value) -> Vec<String> {
    let entries = match provider {
        Provider::Gemini => at(tools, "/0/functionDeclarations"),
        _ => tools,
    };
    entries
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| {
            let name = match provider {
                Provider::OpenAiChat => at(entry, "/function/name"),
                _ => at(entry, "/name"),
            };
            name.as_str().unwrap().to_owned()
        })
        .collect()
}

/// The documented name rule of each provider.
fn admitted(provider: Provider, name: &str) -> bool {
    let alphabet = |c: char| {
        c.is_ascii_alphanumeric()
            || c == '_'
            || c == '-'
            || (provider == Provider::Gemini && c == '.')
    };
    match provider {
        Provider::Gemini => {
            name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
                && name.len() <= 63
                && name.chars().all(alphabet)
        }
        _ => (1..=64).contains(&name.len()) && name.chars().all(alphabet),
    }
}

/// A response calling `name` (id `c1`) in the provider's shape.
fn calling(provider: Provider, name: &str) -> Value {
    match provider {
        Provider::OpenAiChat => json!({"choices": [{"index": 0, "message": {"role": "assistant",
            "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": name, "arguments": "{}"}}]}}]}),
        Provider::OpenAiResponses => json!({"output": [{"type": "function_call", "call_id": "c1",
            "name": name, "arguments": "{}"}]}),
        Provider::Anthropic => json!({"content": [{"type": "tool_use", "id": "c1", "name": name,
            "input": {}}]}),
        _ => json!({"candidates": [{"content": {"role": "model", "parts": [
            {"functionCall": {"id": "c1", "name": name, "args": {}}}]}}]}),
    }
}

#[test]
fn every_name_sent_follows_the_providers_rule_and_names_one_tool() {
    let names = names();
    let registry = registry(&names);
    for provider in Provider::ALL {
        let tools = ToolLoop::new(&registry, None, provider).tools().unwrap();
        let sent = sent(provider, &tools.tools);
        assert_eq!(sent.len(), names.len(), "{provider}");
        for name in &sent {
            assert!(admitted(provider, name), "{provider}: {name:?} is refused");
        }
        let mut distinct = sent.clone();
        distinct.sort();
        distinct.dedup();
        assert_eq!(distinct.len(), sent.len(), "{provider}: {sent:?}");
        // Names the provider accepts are sent unchanged.
        for name in ["server_tool", "plain"] {
            assert!(sent.iter().any(|sent| sent == name), "{provider}: {sent:?}");
        }
        for (real, renamed) in &tools.renamed {
            assert!(
                !admitted(provider, real),
                "{provider}: {real} renamed needlessly"
            );
            assert!(sent.contains(renamed));
        }
    }
}

#[test]
fn openai_and_anthropic_rename_dots_colons_and_long_names_gemini_only_the_long_one() {
    let names = names();
    let registry = registry(&names);
    let long = long_name();
    for provider in [
        Provider::OpenAiChat,
        Provider::OpenAiResponses,
        Provider::Anthropic,
    ] {
        let tools = ToolLoop::new(&registry, None, provider).tools().unwrap();
        let renamed: BTreeMap<&str, &str> = tools
            .renamed
            .iter()
            .map(|(real, sent)| (real.as_str(), sent.as_str()))
            .collect();
        let real: Vec<&str> = renamed.keys().copied().collect();
        assert_eq!(real, ["server.tool", long.as_str(), "server:tool"]);
        // `server_tool` is a tool of its own: the dotted and the colon names each get a hash
        // suffix of their own.
        for name in ["server.tool", "server:tool"] {
            let sent = renamed[name];
            assert!(
                sent.starts_with("server_tool_") && sent.len() == 20,
                "{sent}"
            );
        }
        assert_ne!(renamed["server.tool"], renamed["server:tool"]);
        assert_eq!(renamed[long.as_str()].len(), 64);
    }
    let tools = ToolLoop::new(&registry, None, Provider::Gemini)
        .tools()
        .unwrap();
    let renamed: BTreeMap<&str, &str> = tools
        .renamed
        .iter()
        .map(|(real, sent)| (real.as_str(), sent.as_str()))
        .collect();
    let real: Vec<&str> = renamed.keys().copied().collect();
    assert_eq!(real, [long.as_str(), "server:tool"]);
    assert_eq!(renamed[long.as_str()].len(), 63);
}

#[test]
fn the_names_do_not_depend_on_registration_order() {
    let mut reversed = names();
    reversed.reverse();
    for provider in Provider::ALL {
        let one = ToolLoop::new(&registry(&names()), None, provider)
            .tools()
            .unwrap();
        let two = ToolLoop::new(&registry(&reversed), None, provider)
            .tools()
            .unwrap();
        let mut one = one.renamed;
        let mut two = two.renamed;
        one.sort();
        two.sort();
        assert_eq!(one, two, "{provider}");
    }
}

#[tokio::test]
async fn a_call_of_the_name_sent_runs_the_real_tool_and_answers_under_the_name_sent() {
    let names = names();
    let registry = registry(&names);
    for provider in Provider::ALL {
        let mut tool_loop = ToolLoop::new(&registry, None, provider);
        let tools = tool_loop.tools().unwrap();
        let sent = sent(provider, &tools.tools);
        for sent in &sent {
            let real = tools
                .renamed
                .iter()
                .find(|(_, renamed)| renamed == sent)
                .map_or(sent, |(real, _)| real);
            let position = names.iter().position(|name| name == real).unwrap();
            let step = tool_loop.step(calling(provider, sent)).await.unwrap();
            assert_eq!(step.calls()[0].name, *real, "{provider}");
            assert_eq!(step.calls()[0].model_name, *sent, "{provider}");
            assert_eq!(
                step.results[0].value(),
                Some(&json!(position)),
                "{provider}: {sent}"
            );
            let wire = serde_json::to_string(&step.messages).unwrap();
            assert!(wire.contains(&format!("\"{sent}\"")), "{provider}: {wire}");
            if sent != real {
                assert!(!wire.contains(&format!("\"{real}\"")), "{provider}: {wire}");
            }
        }
    }
}
