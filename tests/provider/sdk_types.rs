//! Everything the layer emits, validated against the providers' own published types: the
//! official Python SDKs' request and response models (`openai`, `anthropic`, `google-genai`,
//! pinned in `.ci/tools/requirements.txt`) through pydantic, for every tool of the corpus in
//! every mode, and for the next requests of the scripted exchanges.

use std::io::Write;
use std::process::{Command, Stdio};

use dsh_tools::provider::{
    AnthropicStream, Message, OpenAiChatStream, Provider, ProviderTools, ToolLoop,
};
use dsh_tools::{Mode, Registry, ToolDefinition};
use serde_json::{Value, json};

use crate::corpus;
use crate::responses::{fixture, hostile, step};
use crate::streams::{anthropic_events, openai_chunks};
use crate::support::{registry, with_code_runtime};

/// A request body of `provider` with `tools`, code mode's system text and `messages`.
fn request(provider: Provider, out: &ProviderTools, messages: Vec<Message>) -> Value {
    let user = |text: &str| {
        Message::from(match provider {
            Provider::Gemini => json!({"role": "user", "parts": [{"text": text}]}),
            _ => json!({"role": "user", "content": text}),
        })
    };
    // The conversation as a loop keeps it: the step's messages as they serialize.
    let mut all = vec![user("What is 1 + 2?")];
    all.extend(messages);
    let mut body = match provider {
        Provider::OpenAiChat => json!({"model": "gpt-4.1", "messages": all}),
        Provider::OpenAiResponses => json!({"model": "gpt-4.1", "input": all}),
        Provider::Anthropic => {
            json!({"model": "claude-sonnet-4-5", "max_tokens": 1024, "messages": all})
        }
        Provider::Gemini => json!({"contents": all}),
        _ => unreachable!("every provider is listed"),
    };
    if out.tools.as_array().is_some_and(|tools| !tools.is_empty()) {
        body["tools"] = out.tools.clone();
    }
    if let Some(system) = &out.system {
        match provider {
            Provider::OpenAiChat => {
                body["messages"]
                    .as_array_mut()
                    .unwrap()
                    .insert(0, json!({"role": "system", "content": system}));
            }
            Provider::OpenAiResponses => body["instructions"] = json!(system),
            Provider::Anthropic => body["system"] = json!(system),
            Provider::Gemini => body["systemInstruction"] = json!({"parts": [{"text": system}]}),
            _ => unreachable!("every provider is listed"),
        }
    }
    body
}

fn record(provider: Provider, kind: &str, label: &str, body: Value) -> String {
    json!({"provider": provider.as_str(), "kind": kind, "label": label, "body": body}).to_string()
}

/// The corpus as registries, with its tool count and the tools the registry refused.
struct Corpus {
    registries: Vec<(String, Registry)>,
    total: usize,
    refused: Vec<String>,
}

/// The corpus's tools as registries: one per MCP server and per BFCL name clash (a name is
/// unique within each); a tool whose schema the registry refuses is listed.
fn corpus_registries() -> Option<Corpus> {
    let tools = corpus::tools()?;
    let mut registries: Vec<(String, Registry)> = Vec::new();
    let mut seen = std::collections::HashMap::new();
    let (mut total, mut refused) = (0, Vec::new());
    for tool in tools {
        total += 1;
        let clash = seen
            .entry((tool.source.clone(), tool.name.clone()))
            .or_insert(0);
        let key = format!("{}#{clash}", tool.source);
        *clash += 1;
        let registry = match registries.iter().find(|(name, _)| *name == key) {
            Some((_, registry)) => registry.clone(),
            None => {
                let registry = Registry::new();
                with_code_runtime(&registry);
                registries.push((key, registry.clone()));
                registry
            }
        };
        let definition = ToolDefinition::builder(tool.name.clone())
            .description(tool.description.clone())
            .parameters(tool.parameters.clone())
            .handler(|_, _| async { Ok(json!(null)) })
            .build();
        match definition.map(|d| registry.register(d)) {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => refused.push(format!("{}: {error}", tool.name)),
            Err(error) => refused.push(format!("{}: {error}", tool.name)),
        }
    }
    Some(Corpus {
        registries,
        total,
        refused,
    })
}

#[tokio::test]
async fn everything_emitted_validates_against_the_provider_sdks() {
    let Some(Corpus {
        registries,
        total,
        refused,
    }) = corpus_registries()
    else {
        return;
    };
    assert!(
        refused.is_empty(),
        "every corpus tool registers: {refused:#?}"
    );
    let mut records = Vec::new();
    let mut shares = Vec::new();
    for provider in Provider::ALL {
        let (mut strict, mut tools, mut limited) = (0, 0, 0);
        for mode in [Mode::Native, Mode::Code, Mode::Both] {
            for (source, registry) in &registries {
                registry.set_mode(mode);
                let out = ToolLoop::new(registry, None, provider)
                    .tools()
                    .expect("tools");
                if mode == Mode::Native {
                    strict += out.strict.len();
                    tools += out.strict.len() + out.reports.len();
                    limited += out
                        .reports
                        .iter()
                        .filter(|r| r.reason.contains("at most"))
                        .count();
                }
                records.push(record(
                    provider,
                    "request",
                    &format!("{source} {mode}"),
                    request(provider, &out, Vec::new()),
                ));
            }
        }
        shares.push((provider, strict, tools, limited));
        // The scripted exchanges: documented responses, hostile ones, streams.
        let small = registry();
        let out = ToolLoop::new(&small, None, provider).tools().unwrap();
        let fixture = fixture(provider);
        records.push(record(provider, "response", "fixture", fixture.clone()));
        let mut answers = vec![("fixture", fixture), ("hostile", hostile(provider))];
        match provider {
            Provider::OpenAiChat => {
                let mut stream = OpenAiChatStream::new();
                for (index, chunk) in openai_chunks(false).into_iter().enumerate() {
                    records.push(record(
                        provider,
                        "chunk",
                        &format!("chunk {index}"),
                        chunk.clone(),
                    ));
                    stream.push(&chunk).unwrap();
                }
                answers.push(("stream", stream.finish()));
            }
            Provider::Anthropic => {
                let mut stream = AnthropicStream::new();
                for (index, event) in anthropic_events(false).into_iter().enumerate() {
                    records.push(record(
                        provider,
                        "chunk",
                        &format!("event {index}"),
                        event.clone(),
                    ));
                    stream.push(&event).unwrap();
                }
                records.push(record(
                    provider,
                    "response",
                    "assembled stream",
                    stream.finish(),
                ));
                answers.push(("stream", stream.finish()));
            }
            _ => {}
        }
        for (label, answer) in answers {
            let (step, _) = step(provider, &answer).await;
            records.push(record(
                provider,
                "request",
                &format!("next request after {label}"),
                request(provider, &out, step.messages),
            ));
        }
    }
    let python = format!("{}/.tools/venv/bin/python", env!("CARGO_MANIFEST_DIR"));
    assert!(
        std::path::Path::new(&python).exists(),
        "{python} is missing: run `bash .ci/install-tools.sh` (needs python3 with venv)"
    );
    let script = format!("{}/tests/provider/validate.py", env!("CARGO_MANIFEST_DIR"));
    let mut child = Command::new(python)
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python starts");
    let mut stdin = child.stdin.take().unwrap();
    let input = records.join("\n");
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().expect("python ends");
    writer.join().unwrap().expect("records written");
    let report = String::from_utf8_lossy(&output.stdout);
    eprintln!("{report}{}", String::from_utf8_lossy(&output.stderr));
    eprintln!("corpus: {total} tools");
    for (provider, strict, tools, limited) in &shares {
        eprintln!(
            "strict share {provider}: {strict}/{tools} ({:.1} %); schema admitted: {} ({:.1} %)",
            100.0 * *strict as f64 / *tools as f64,
            strict + limited,
            100.0 * (strict + limited) as f64 / *tools as f64
        );
    }
    assert!(
        output.status.success(),
        "the SDK types refused what the layer emitted:\n{report}"
    );
    assert!(report.contains("failures: 0"));
    assert!(
        report.contains(&format!(
            "checked openai-chat request: {}",
            3 * registries.len() + 3
        )),
        "{report}"
    );
}
