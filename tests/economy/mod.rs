//! Token accounting for the model-facing economy: a real tokenizer (`o200k_base`, the ranks bundled
//! with `tiktoken-rs`, nothing downloaded) and the native wire forms the SDK is measured against.
//! Shared by `benches/economy.rs` and the tests that pin the goals.
#![allow(dead_code)]

use dsh_tools::dialect::Dialect;
use dsh_tools::prelude::*;
use dsh_tools::sdk::ToolSpec;
use serde_json::{Value, json};

/// Tokens of `text` under `o200k_base` (the GPT-4o / o-series encoding), special tokens read as
/// ordinary text.
pub(crate) fn tokens(text: &str) -> usize {
    tiktoken_rs::o200k_base_singleton()
        .encode_ordinary(text)
        .len()
}

/// A parameters schema in `dialect`, or the original when the dialect refuses it (the tool would
/// then be sent as written).
fn wire_schema(dialect: Dialect, schema: &Value) -> Value {
    dialect.transform(schema).unwrap_or_else(|_| schema.clone())
}

/// The native tool list as Anthropic's Messages API takes it: compact JSON
/// `[{"name", "description", "input_schema"}]`, schemas in the Anthropic dialect (refs inlined
/// unless recursive, `$schema` dropped).
pub(crate) fn native_anthropic(tools: &[ToolSpec]) -> String {
    let list: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "name": tool.name,
                "description": tool.description,
                "input_schema": wire_schema(Dialect::Anthropic, &tool.parameters),
            })
        })
        .collect();
    serde_json::to_string(&list).expect("JSON")
}

/// The native tool list as OpenAI's Chat Completions API takes it (non-strict): compact JSON
/// `[{"type": "function", "function": {"name", "description", "parameters"}}]`, schemas in the
/// Portable dialect.
pub(crate) fn native_openai(tools: &[ToolSpec]) -> String {
    let list: Vec<Value> = tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": wire_schema(Dialect::Portable, &tool.parameters),
                }
            })
        })
        .collect();
    serde_json::to_string(&list).expect("JSON")
}

/// Token counts of one tool set: native wire forms and the code-mode prompt sections.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Figures {
    /// Tools in the set.
    pub tools: usize,
    /// Native tool list, Anthropic wire form.
    pub native_anthropic: usize,
    /// Native tool list, OpenAI wire form.
    pub native_openai: usize,
    /// Full SDK prompt section, TypeScript.
    pub sdk_typescript: usize,
    /// Full SDK prompt section, Python.
    pub sdk_python: usize,
    /// Progressive-disclosure (index) section, TypeScript.
    pub index_typescript: usize,
    /// Progressive-disclosure (index) section, Python.
    pub index_python: usize,
}

impl Figures {
    /// Measures `tools`.
    pub(crate) fn of(tools: &[ToolSpec]) -> Figures {
        use dsh_tools::sdk::{self, Language};
        Figures {
            tools: tools.len(),
            native_anthropic: tokens(&native_anthropic(tools)),
            native_openai: tokens(&native_openai(tools)),
            sdk_typescript: tokens(&sdk::prompt_section(Language::TypeScript, tools)),
            sdk_python: tokens(&sdk::prompt_section(Language::Python, tools)),
            index_typescript: tokens(&sdk::index_section(Language::TypeScript, tools)),
            index_python: tokens(&sdk::index_section(Language::Python, tools)),
        }
    }

    /// Field-wise sum.
    pub(crate) fn add(self, other: Figures) -> Figures {
        Figures {
            tools: self.tools + other.tools,
            native_anthropic: self.native_anthropic + other.native_anthropic,
            native_openai: self.native_openai + other.native_openai,
            sdk_typescript: self.sdk_typescript + other.sdk_typescript,
            sdk_python: self.sdk_python + other.sdk_python,
            index_typescript: self.index_typescript + other.index_typescript,
            index_python: self.index_python + other.index_python,
        }
    }

    /// The smaller native wire form: the baseline every ratio is stated against.
    pub(crate) fn native(&self) -> usize {
        self.native_anthropic.min(self.native_openai)
    }

    /// `part / native`.
    pub(crate) fn ratio(&self, part: usize) -> f64 {
        part as f64 / self.native() as f64
    }

    /// One Markdown table row named `name`.
    pub(crate) fn row(&self, name: &str) -> String {
        let cell = |n: usize| format!("{n} ({:.3}×)", self.ratio(n));
        format!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            self.tools,
            self.native_anthropic,
            self.native_openai,
            cell(self.sdk_typescript),
            cell(self.sdk_python),
            cell(self.index_typescript),
            cell(self.index_python),
        )
    }
}

/// The header of the table [`Figures::row`] writes.
pub(crate) const TABLE_HEADER: &str = "| tool set | tools | native Anthropic | native OpenAI | SDK TypeScript | SDK Python | index TypeScript | index Python |\n|---|---|---|---|---|---|---|---|";

/// The corpus's MCP servers (BFCL excluded), by server, each server's tools as specs.
pub(crate) fn servers(tools: &[super::corpus::CorpusTool]) -> Vec<(String, Vec<ToolSpec>)> {
    let mut servers: std::collections::BTreeMap<String, Vec<ToolSpec>> = Default::default();
    for tool in tools.iter().filter(|tool| tool.source != "bfcl") {
        servers
            .entry(tool.source.clone())
            .or_default()
            .push(tool.spec());
    }
    servers.into_iter().collect()
}

/// The corpus table: one row per MCP server, their sum, and all servers in one registry.
/// Returns the text and the (sum, all-in-one) figures.
pub(crate) fn corpus_table(tools: &[super::corpus::CorpusTool]) -> (String, Figures, Figures) {
    let servers = servers(tools);
    let mut text = String::from(TABLE_HEADER);
    let mut sum = Figures::default();
    for (server, specs) in &servers {
        let figures = Figures::of(specs);
        text.push('\n');
        text.push_str(&figures.row(server));
        sum = sum.add(figures);
    }
    let all: Vec<ToolSpec> = servers.into_iter().flat_map(|(_, specs)| specs).collect();
    let together = Figures::of(&all);
    text.push('\n');
    text.push_str(&sum.row("sum of servers"));
    text.push('\n');
    text.push_str(&together.row("all servers, one registry"));
    (text, sum, together)
}

/// What the model reads doing the main job (`examples/code_mode.rs`: the per-folder summary of
/// this repository's Rust sources) natively and in code mode, in tokens.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Task {
    /// Native: the tool list (Anthropic wire form).
    pub native_tools: usize,
    /// Native: every call the model writes (name and arguments as JSON) and every call's
    /// rendered result — the file list, then each file read.
    pub native_calls: usize,
    /// Native tool calls made.
    pub calls: usize,
    /// Code mode: the `run_code` schema and the prompt sections (code-only rule, SDK).
    pub code_prompt: usize,
    /// Code mode: the program.
    pub code_program: usize,
    /// Code mode: the rendered `run_code` result.
    pub code_result: usize,
}

impl Task {
    /// Native total.
    pub(crate) fn native(&self) -> usize {
        self.native_tools + self.native_calls
    }

    /// Code-mode total.
    pub(crate) fn code(&self) -> usize {
        self.code_prompt + self.code_program + self.code_result
    }

    /// `code / native`.
    pub(crate) fn ratio(&self) -> f64 {
        self.code() as f64 / self.native() as f64
    }
}

/// Measures the main job over `root` with `runtime` running `program` (the bundled
/// `examples/programs/crate_summary.*`), the native side doing the same calls one by one.
pub(crate) async fn task(
    root: &std::path::Path,
    runtime: std::sync::Arc<dyn dsh_tools::code::CodeRuntime>,
    program: &str,
) -> Task {
    use dsh_tools::{Mode, Registry, ToolCall};
    let registry = Registry::new();
    registry
        .register_all(super::toolset::definitions(root))
        .expect("the toolset registers");
    // Native: list the Rust files, then read each one.
    let native_tools = tokens(&native_anthropic(&registry.tool_specs(None)));
    let mut native_calls = 0;
    let mut calls = 0;
    let mut call = |name: &str, args: Value| {
        calls += 1;
        native_calls += tokens(&json!({"name": name, "input": args}).to_string());
        ToolCall::new(format!("native-{calls}"), name, args)
    };
    let listed = registry
        .execute(call("list_files", json!({"dir": ".", "suffix": ".rs"})))
        .await;
    let mut reads = Vec::new();
    for file in listed
        .value()
        .and_then(Value::as_array)
        .expect("a file list")
    {
        reads.push(call("read_file", json!({"path": file["path"]})));
    }
    let mut rendered = tokens(&listed.text());
    for read in reads {
        rendered += tokens(&registry.execute(read).await.text());
    }
    let native_calls = native_calls + rendered;
    // Code mode: the view, the program, the rendered result.
    registry.set_code_runtime(runtime);
    registry.set_mode(Mode::Code);
    let view = registry.model_view(None).expect("code-mode view");
    let code_prompt = tokens(&serde_json::to_string(&view.tools).expect("JSON"))
        + view
            .sections
            .iter()
            .map(|section| tokens(&section.text))
            .sum::<usize>();
    let result = registry
        .execute(ToolCall::new(
            "code-1",
            "run_code",
            json!({"code": program, "description": "Summarise Rust sources per folder"}),
        ))
        .await;
    assert!(!result.is_error(), "the program failed: {}", result.text());
    Task {
        native_tools,
        native_calls,
        calls,
        code_prompt,
        code_program: tokens(program),
        code_result: tokens(&result.text()),
    }
}
