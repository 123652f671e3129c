//! Progressive disclosure in code mode: which SDK presentation a scope gets, and the host side of
//! the `sdk` binding namespace (`sdk.describe`, `sdk.search`) that programs use to read
//! declarations the prompt section left out.
//!
//! The namespace rides on the ordinary binding protocol: the worker bootstraps treat `sdk` like
//! any other global, and its calls are answered here, without a tool call or an event.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::code_runtime::{BindingCall, BindingDispatch, BindingError, BindingNamespace};
use crate::registry::{Registry, read, write};
use crate::scope::AgentId;
use crate::scope::AgentScope;
use crate::sdk::{self, Disclosure, Language, ToolSpec};

/// The global programs reach the catalog through.
pub const SDK_GLOBAL: &str = "sdk";

/// Registry-wide and per-scope [`Disclosure`] settings.
#[derive(Debug, Default, Clone)]
struct Settings {
    default: Disclosure,
    scopes: HashMap<AgentId, Disclosure>,
}

/// How much of the SDK the model sees up front (SPEC §9), per registry. Implemented for
/// [`Registry`] only; `dsh_tools::prelude` brings it into scope.
pub trait DisclosureExt: crate::sealed::Sealed {
    /// Sets how the SDK section presents tools to scopes that declare nothing themselves.
    /// Default: [`Disclosure::default`] (an index above 30 tools or 24,000 bytes).
    fn set_disclosure(&self, disclosure: Disclosure);

    /// The [`Disclosure`] setting in force for `scope` (nearest declaration on its chain, else
    /// the registry's), before `Auto` is resolved against a tool set.
    fn disclosure(&self, scope: Option<&AgentId>) -> Disclosure;

    /// The disclosure `scope` gets for its visible tools in `language`: `Full` or `Index`.
    #[doc(hidden)]
    fn resolved_disclosure(
        &self,
        scope: Option<&AgentId>,
        language: Language,
        specs: &[ToolSpec],
    ) -> Disclosure;
}

impl DisclosureExt for Registry {
    fn set_disclosure(&self, disclosure: Disclosure) {
        write(&self.inner.state)
            .extensions
            .get_or_default::<Settings>()
            .default = disclosure;
    }

    fn disclosure(&self, scope: Option<&AgentId>) -> Disclosure {
        let state = read(&self.inner.state);
        let Some(settings) = state.extensions.get::<Settings>() else {
            return Disclosure::default();
        };
        scope
            .and_then(|agent| {
                state
                    .chain(agent)
                    .iter()
                    .rev()
                    .find_map(|id| settings.scopes.get(id).copied())
            })
            .unwrap_or(settings.default)
    }

    fn resolved_disclosure(
        &self,
        scope: Option<&AgentId>,
        language: Language,
        specs: &[ToolSpec],
    ) -> Disclosure {
        self.disclosure(scope).resolve(language, specs)
    }
}

/// How much of the SDK the model sees up front (SPEC §9), per scope. Implemented for
/// [`AgentScope`] only; `dsh_tools::prelude` brings it into scope.
pub trait ScopeDisclosureExt: crate::sealed::Sealed {
    /// Declares how the SDK section presents tools to this scope and descendants that declare
    /// nothing, replacing an earlier declaration of this scope.
    fn disclose(&self, disclosure: Disclosure);
}

impl ScopeDisclosureExt for AgentScope {
    fn disclose(&self, disclosure: Disclosure) {
        write(&self.registry().inner.state)
            .extensions
            .get_or_default::<Settings>()
            .scopes
            .insert(self.id().clone(), disclosure);
    }
}

/// The `sdk` namespace of one run: the tools the program may call, in the run's language.
#[derive(Debug)]
pub struct Catalog {
    language: Language,
    specs: Vec<ToolSpec>,
}

impl Catalog {
    pub fn new(language: Language, specs: Vec<ToolSpec>) -> Arc<Self> {
        Arc::new(Catalog { language, specs })
    }

    /// The binding namespace programs see: `sdk.describe`, `sdk.search`; failures raise a plain
    /// `Error` / `Exception`.
    pub fn namespace() -> BindingNamespace {
        BindingNamespace {
            global: SDK_GLOBAL.to_owned(),
            names: vec!["describe".to_owned(), "search".to_owned()],
            error_class: None,
        }
    }

    /// Serves `sdk` calls here and hands every other call to `tools`.
    pub fn dispatch(self: Arc<Self>, tools: BindingDispatch) -> BindingDispatch {
        Arc::new(move |call: BindingCall| {
            if call.namespace == SDK_GLOBAL {
                let answer = self.answer(&call);
                Box::pin(async move { answer })
            } else {
                tools(call)
            }
        })
    }

    /// `describe(name | [names])` → the declarations as text; `search(query)` →
    /// `[{name, description}]`, best first.
    fn answer(&self, call: &BindingCall) -> Result<Value, BindingError> {
        match call.name.as_str() {
            "describe" => {
                let names: Option<Vec<String>> = match &call.args {
                    Value::String(name) => Some(vec![name.clone()]),
                    Value::Array(items) => items
                        .iter()
                        .map(|item| item.as_str().map(str::to_owned))
                        .collect(),
                    _ => None,
                };
                let names = names.ok_or_else(|| {
                    BindingError::new("sdk.describe takes a tool name or a list of tool names")
                })?;
                sdk::describe(self.language, &self.specs, &names)
                    .map(Value::String)
                    .map_err(|err| BindingError::new(err.to_string()))
            }
            "search" => {
                let Value::String(query) = &call.args else {
                    return Err(BindingError::new("sdk.search takes a string of words"));
                };
                Ok(Value::Array(
                    sdk::search(&self.specs, query)
                        .into_iter()
                        .map(|tool| json!({"name": tool.name, "description": tool.description}))
                        .collect(),
                ))
            }
            other => Err(BindingError::new(format!("sdk has no binding {other:?}"))),
        }
    }
}
