//! Behaviour hints a tool declares about itself (the MCP `ToolAnnotations` vocabulary).

use serde::{Deserialize, Serialize};

/// Hints about a tool's behaviour, as MCP servers declare them in `tools/list`
/// (`annotations`, MCP specification 2025-06-18). Hints are untrusted: only `read_only_hint`
/// changes anything here (an MCP tool that declares it runs in parallel with other safe calls).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ToolAnnotations {
    /// A human-readable title.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool does not modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool may perform destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// Repeating a call with the same arguments has no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool interacts with an open world of external entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
}

/// The hints `#[tool(title = "…", read_only, destructive, idempotent, open_world)]` declares,
/// in a form the generated `impl Tool` holds as a constant. `None` is a hint left undeclared:
/// MCP hosts then assume the specification's defaults (not read-only, destructive, not
/// idempotent, open world).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeclaredAnnotations {
    /// A human-readable title.
    pub title: Option<&'static str>,
    /// `readOnlyHint`.
    pub read_only_hint: Option<bool>,
    /// `destructiveHint`.
    pub destructive_hint: Option<bool>,
    /// `idempotentHint`.
    pub idempotent_hint: Option<bool>,
    /// `openWorldHint`.
    pub open_world_hint: Option<bool>,
}

impl From<DeclaredAnnotations> for ToolAnnotations {
    fn from(declared: DeclaredAnnotations) -> Self {
        ToolAnnotations {
            title: declared.title.map(str::to_owned),
            read_only_hint: declared.read_only_hint,
            destructive_hint: declared.destructive_hint,
            idempotent_hint: declared.idempotent_hint,
            open_world_hint: declared.open_world_hint,
        }
    }
}
