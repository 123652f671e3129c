//! Code mode: the model writes a program instead of single calls.
//!
//! - [`crate::CodeModeExt::set_code_runtime`] mounts a [`CodeRuntime`]; with a non-native [`Mode`] the
//!   registry then serves the reserved `run_code` tool (`run_code.rs`).
//! - [`crate::CodeModeExt::model_view`] is what the model is shown: tool schemas and prompt sections.
//! - Every binding call a program makes is a nested call through the full pipeline, scheduled by
//!   `bridge.rs` on the shared scheduler in submission order.

mod bridge;
#[doc(hidden)]
pub mod disclosure;
#[doc(hidden)]
pub mod render;
mod run_code;

use std::sync::Arc;

use crate::code_runtime::{CodeRuntime, Mounted, mounted};
use crate::registry::{ModelViews, Registry, ToolSchema, read, write};
use crate::scope::AgentId;
use crate::scope::Mode;
use crate::sdk::{self, Language, ToolSpec};
use disclosure::DisclosureExt;
pub use run_code::RunCodeConfig;

/// A prompt section contributed by the registry.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PromptSection {
    /// Stable id: `tools:code-only`, `tools:sdk`, or `tools:runtime` (the code runtime's
    /// [`prompt_note`](crate::code_runtime::CodeRuntime::prompt_note)).
    pub id: &'static str,
    /// Sort key among the prompt's sections (99 for the code-only rule, 150 for the SDK, 151
    /// for the runtime's note).
    pub order: u32,
    /// The section text.
    pub text: String,
}

/// What the model is shown for a scope: deterministic, byte-identical for an unchanged tool set.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ModelView {
    /// The mode in force.
    pub mode: Mode,
    /// Tool schemas: native, all visible tools sorted by name; code, only `run_code`; both, all
    /// visible tools then `run_code` last.
    pub tools: Vec<ToolSchema>,
    /// Prompt sections, by `order`.
    pub sections: Vec<PromptSection>,
}

/// Why a model view cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CodeModeError {
    /// A non-native mode without a mounted runtime.
    #[error(
        "dsh-tools: mode \"{0}\" requires a code runtime — mount one with Registry::set_code_runtime (e.g. SubprocessRuntime::typescript) or set the mode to native"
    )]
    NoRuntime(Mode),
    /// The runtime's language has no SDK renderer.
    #[error(
        "dsh-tools: no SDK renderer registered for runtime language \"{0}\" (known: \"typescript\", \"python\")"
    )]
    UnknownLanguage(String),
}

/// The SDK language for a runtime language id.
pub fn language_of(runtime: &dyn CodeRuntime) -> Result<Language, CodeModeError> {
    match runtime.language() {
        "typescript" => Ok(Language::TypeScript),
        "python" => Ok(Language::Python),
        other => Err(CodeModeError::UnknownLanguage(other.to_owned())),
    }
}

/// The code-only rule, in our words.
const CODE_ONLY_RULE: &str = "Tools are reached through programs in this session. The only tool you can call \
directly is `run_code`; a direct call to any other tool fails. Write a program that calls the tools \
declared in the SDK below and pass it to `run_code`.";

/// Code mode on a registry: its code runtime, the SDK it generates and the model's view of a scope
/// (SPEC §8–§9). Implemented for [`Registry`] only; `dsh_tools::prelude` brings it into scope.
pub trait CodeModeExt: crate::sealed::Sealed {
    /// Mounts the code runtime that `run_code` uses (replacing any earlier one, which is not
    /// disposed), with the default [`RunCodeConfig`]. Scopes in [`Mode::Code`] or [`Mode::Both`]
    /// then see `run_code`.
    ///
    /// `run_code`'s value is `{"logs": [string…], "result"?: …}`. `result` is the program's
    /// completion decoded into a tree while that tree takes at most the completion's compact
    /// JSON length plus 16 MiB of host memory (every completion up to about 100 KB, and any
    /// whose bulk is strings); a denser one (`[1, 1, …]` would take some 100 × its text) is
    /// handed on as `"resultJson": string` instead, its compact JSON text, which is also what the
    /// model reads. So is a completion nested 256 levels or deeper: a tool's value may nest at
    /// most 256 levels and `result` sits one level in, while the runtimes return completions
    /// nested up to 4,096 levels (deeper ones end as `invalid-output`). A completion of
    /// 5,000,000 small numbers (10 MB) or a 20 MB string costs the host about 3 × its bytes
    /// through `run_code`.
    fn set_code_runtime(&self, runtime: Arc<dyn CodeRuntime>);

    /// [`crate::CodeModeExt::set_code_runtime`] with explicit settings.
    fn set_code_runtime_with(&self, runtime: Arc<dyn CodeRuntime>, config: RunCodeConfig);

    /// The mounted code runtime.
    fn code_runtime(&self) -> Option<Arc<dyn CodeRuntime>>;

    /// The SDK text (a whole file, with its `@generated` header) for the tools `scope` sees,
    /// excluding `run_code`.
    fn sdk(&self, scope: Option<&AgentId>, language: Language) -> String;

    /// [`ToolSpec`]s of the tools `scope` sees, sorted by name, excluding `run_code`.
    fn tool_specs(&self, scope: Option<&AgentId>) -> Vec<ToolSpec>;

    /// What the model is shown for `scope`: the tool schemas (Portable dialect) and the prompt
    /// sections.
    ///
    /// # Errors
    /// [`CodeModeError::NoRuntime`] for a non-native mode without a runtime,
    /// [`CodeModeError::UnknownLanguage`] when the runtime's language has no renderer.
    fn model_view(&self, scope: Option<&AgentId>) -> Result<ModelView, CodeModeError>;
}

impl CodeModeExt for Registry {
    fn set_code_runtime(&self, runtime: Arc<dyn CodeRuntime>) {
        self.set_code_runtime_with(runtime, RunCodeConfig::default());
    }

    fn set_code_runtime_with(&self, runtime: Arc<dyn CodeRuntime>, config: RunCodeConfig) {
        let definition = run_code::definition(self, &runtime, config);
        // What the provider layer shows a model of a scope in a non-native mode.
        self.slot::<ModelViews>()
            .set(Arc::new(|registry: &Registry, scope| {
                registry
                    .model_view(scope)
                    .map(|view| {
                        let sections = view.sections.into_iter().map(|section| section.text);
                        (view.tools, sections.collect())
                    })
                    .map_err(|error| error.to_string())
            }));
        let mut state = write(&self.inner.state);
        state.extensions.insert(Mounted(runtime));
        state.transport = Some(definition);
    }

    fn code_runtime(&self) -> Option<Arc<dyn CodeRuntime>> {
        mounted(&read(&self.inner.state))
    }

    fn sdk(&self, scope: Option<&AgentId>, language: Language) -> String {
        sdk::render(language, &self.tool_specs(scope))
    }

    fn tool_specs(&self, scope: Option<&AgentId>) -> Vec<ToolSpec> {
        self.tools(scope)
            .into_iter()
            .map(|def| {
                // The one hint that changes what a model should do: think before calling.
                let destructive = def.annotations().is_some_and(|hints| {
                    hints.destructive_hint == Some(true) && hints.read_only_hint != Some(true)
                });
                let description = if destructive {
                    format!("(destructive) {}", def.description())
                } else {
                    def.description().to_owned()
                };
                ToolSpec::new(
                    def.name(),
                    description,
                    def.parameters().clone(),
                    def.output_schema()
                        .cloned()
                        .unwrap_or(serde_json::Value::Bool(true)),
                )
            })
            .collect()
    }

    fn model_view(&self, scope: Option<&AgentId>) -> Result<ModelView, CodeModeError> {
        let mode = self.mode(scope);
        let native = || self.schemas(scope).into_iter();
        if mode == Mode::Native {
            return Ok(ModelView {
                mode,
                tools: native().collect(),
                sections: Vec::new(),
            });
        }
        let (runtime, run_code) = {
            let state = read(&self.inner.state);
            (mounted(&state), state.transport.clone())
        };
        let (Some(runtime), Some(run_code)) = (runtime, run_code) else {
            return Err(CodeModeError::NoRuntime(mode));
        };
        let language = language_of(runtime.as_ref())?;
        let run_code_schema = ToolSchema {
            name: run_code.name().to_owned(),
            description: run_code.description().to_owned(),
            parameters: run_code.parameters().clone(),
        };
        let sdk_section = PromptSection {
            id: "tools:sdk",
            order: 150,
            text: {
                let specs = self.tool_specs(scope);
                let disclosure = self.resolved_disclosure(scope, language, &specs);
                sdk::section(language, &specs, disclosure)
            },
        };
        let runtime_section = runtime.prompt_note().map(|note| PromptSection {
            id: "tools:runtime",
            order: 151,
            text: note.to_owned(),
        });
        Ok(match mode {
            Mode::Code => ModelView {
                mode,
                tools: vec![run_code_schema],
                sections: [
                    Some(PromptSection {
                        id: "tools:code-only",
                        order: 99,
                        text: CODE_ONLY_RULE.to_owned(),
                    }),
                    Some(sdk_section),
                    runtime_section,
                ]
                .into_iter()
                .flatten()
                .collect(),
            },
            _ => ModelView {
                mode,
                tools: native().chain(std::iter::once(run_code_schema)).collect(),
                sections: std::iter::once(sdk_section)
                    .chain(runtime_section)
                    .collect(),
            },
        })
    }
}
