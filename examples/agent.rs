//! An agent loop against any OpenAI-compatible Chat Completions endpoint (llama.cpp's
//! `llama-server`, Ollama, vLLM, a hosted API behind a plain-HTTP gateway), in native or code
//! mode, with approvals asked on the terminal.
//!
//! ```text
//! DSH_AGENT_URL=http://127.0.0.1:8080/v1 DSH_AGENT_MODEL=qwen3 \
//!     cargo run --example agent -- [native|code] ["a task"]
//! ```
//!
//! Environment: `DSH_AGENT_URL` (the API base; the loop POSTs to `<base>/chat/completions`),
//! `DSH_AGENT_MODEL`, `DSH_AGENT_KEY` (sent as a bearer token when set). Without
//! `DSH_AGENT_URL` the example plays the exchange recorded in `examples/agent/` instead of
//! calling a model, and says so; the tools, the pipeline and the approvals run for real either
//! way. The HTTP client speaks plain HTTP (no TLS is compiled into the project).
//!
//! `save_note` asks for approval: answer `y` on the terminal to let it run; anything else (or
//! end of input) denies it, and the model reads the denial as the call's error result.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{Context, bail};
use dsh_tools::code::{SubprocessConfig, SubprocessRuntime};
use dsh_tools::hooks::{ApprovalOutcome, ApprovalRequest, PreDecision, PreNext, ToolCallView};
use dsh_tools::prelude::*;
use dsh_tools::provider::{Message, Provider, ToolLoop};
use dsh_tools::{Mode, Registry, ToolDefinition, ToolExec};
use serde_json::{Value, json};

/// Most model turns before the loop gives up.
const MAX_TURNS: usize = 8;

fn tools(registry: &Registry) -> anyhow::Result<()> {
    registry.register(
        ToolDefinition::builder("add")
            .description("Adds two numbers.")
            .parameters(json!({"type": "object", "properties": {
                "a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}))
            .concurrency_safe()
            .handler(|args: Value, _| async move {
                Ok(json!(
                    args["a"].as_f64().unwrap_or(0.0) + args["b"].as_f64().unwrap_or(0.0)
                ))
            })
            .build()?,
    )?;
    registry.register(
        ToolDefinition::builder("word_count")
            .description("Counts the words of a text.")
            .parameters(
                json!({"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]}),
            )
            .concurrency_safe()
            .handler(|args: Value, _| async move {
                Ok(json!(
                    args["text"]
                        .as_str()
                        .unwrap_or_default()
                        .split_whitespace()
                        .count()
                ))
            })
            .build()?,
    )?;
    registry.register(
        ToolDefinition::builder("save_note")
            .description("Saves a note for the user. Needs the user's approval.")
            .parameters(
                json!({"type": "object", "properties": {"text": {"type": "string"}},
                "required": ["text"]}),
            )
            .handler(|args: Value, _exec: ToolExec| async move {
                println!(
                    "  [note saved] {}",
                    args["text"].as_str().unwrap_or_default()
                );
                Ok(json!("saved"))
            })
            .build()?,
    )?;
    registry.on_pre_execute(|view: Arc<ToolCallView>, next: PreNext| async move {
        if view.name == "save_note" {
            PreDecision::Ask {
                reason: Some("save_note writes for the user".to_owned()),
            }
        } else {
            next.run().await
        }
    });
    registry.set_approver(|request: ApprovalRequest| async move {
        print!(
            "approve `{}` ({})? [y/N] ",
            request.tool_name, request.call_id
        );
        let _ = std::io::stdout().flush();
        let answer = tokio::task::spawn_blocking(|| {
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).map(|_| line)
        })
        .await;
        match answer {
            Ok(Ok(line)) if line.trim().eq_ignore_ascii_case("y") => ApprovalOutcome::AllowedOnce,
            Ok(Ok(line)) if line.is_empty() => {
                println!("(no answer: denied)");
                ApprovalOutcome::Rejected
            }
            _ => ApprovalOutcome::Rejected,
        }
    });
    Ok(())
}

/// Where the model's answers come from.
enum Model {
    Live {
        client: reqwest::Client,
        url: String,
        model: String,
        key: Option<String>,
    },
    Recorded(std::vec::IntoIter<Value>),
}

impl Model {
    async fn complete(&mut self, request: Value) -> anyhow::Result<Value> {
        match self {
            Model::Live {
                client,
                url,
                model,
                key,
            } => {
                let mut body = request;
                body["model"] = json!(model);
                let mut post = client.post(format!("{url}/chat/completions")).json(&body);
                if let Some(key) = key {
                    post = post.bearer_auth(key);
                }
                let response = post.send().await.context("the endpoint did not answer")?;
                let status = response.status();
                let answer: Value = response.json().await.context("the answer is not JSON")?;
                if !status.is_success() {
                    bail!("the endpoint answered {status}: {answer}");
                }
                Ok(answer)
            }
            Model::Recorded(answers) => answers
                .next()
                .context("the recorded exchange has no further answer"),
        }
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let mode = match args.next().as_deref() {
        None | Some("native") => Mode::Native,
        Some("code") => Mode::Code,
        Some(other) => bail!("unknown mode {other:?}: native or code"),
    };
    let task = args.next().unwrap_or_else(|| {
        "Add 2.5 and 4, count the words of \"the quick brown fox\", and save a note with both results."
            .to_owned()
    });

    let registry = Registry::new();
    tools(&registry)?;
    if mode == Mode::Code {
        registry.set_code_runtime(Arc::new(
            SubprocessRuntime::typescript(SubprocessConfig::default()).await?,
        ));
    }
    registry.set_mode(mode);
    let scope = registry.agent("assistant");

    let mut model = match std::env::var("DSH_AGENT_URL") {
        Ok(url) => Model::Live {
            client: reqwest::Client::new(),
            url: url.trim_end_matches('/').to_owned(),
            model: std::env::var("DSH_AGENT_MODEL").context("set DSH_AGENT_MODEL")?,
            key: std::env::var("DSH_AGENT_KEY").ok(),
        },
        Err(_) => {
            let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join(format!("examples/agent/recorded-{mode}.json"));
            println!(
                "No DSH_AGENT_URL: playing the exchange recorded in {}.",
                path.display()
            );
            let answers: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(&path)?)?;
            Model::Recorded(answers.into_iter())
        }
    };

    let mut tool_loop = ToolLoop::new(&registry, Some(scope.id().clone()), Provider::OpenAiChat);
    let tools = tool_loop.tools()?;
    for report in &tools.reports {
        println!("(`{}` is sent non-strict: {})", report.tool, report.reason);
    }
    // The conversation: the step's messages serialize into the request as they are.
    let mut messages: Vec<Message> = Vec::new();
    if let Some(system) = &tools.system {
        messages.push(json!({"role": "system", "content": system}).into());
    }
    messages.push(json!({"role": "user", "content": task}).into());
    println!("user: {task}");
    for _ in 0..MAX_TURNS {
        let request = json!({"messages": messages, "tools": tools.tools});
        let response = model.complete(request).await?;
        let step = tool_loop.step(response).await?;
        if !step.text.is_empty() {
            println!("assistant: {}", step.text);
        }
        for (call, result) in step.calls().iter().zip(&step.results) {
            let outcome = if result.is_error() { "failed" } else { "ok" };
            println!(
                "  {} {} -> {outcome}: {}",
                call.name,
                call.arguments(),
                result.text()
            );
        }
        messages.extend(step.messages);
        if step.done {
            println!("done after {} messages", messages.len());
            return Ok(());
        }
    }
    bail!("no final answer after {MAX_TURNS} turns")
}
