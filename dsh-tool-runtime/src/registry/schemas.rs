//! What the model reads of the registry: each visible tool's schema, per dialect.

use serde::Serialize;
use serde_json::Value;

use super::Registry;
use crate::agent_id::AgentId;
use crate::dialect::{Dialect, DialectError};

/// What `schemas()` returns for one tool: only name, description and parameters ever reach the
/// model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolSchema {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Parameters schema.
    pub parameters: Value,
}

/// One tool's schema in a [`Dialect`], from [`Registry::schemas_for`].
///
/// Serializes as `{name, description, parameters, original}` when the dialect can express the
/// schema, and as `{name, description, error: {message, path}, original}` (`path` a JSON
/// Pointer) when it cannot.
#[derive(Debug, Clone, PartialEq)]
pub struct DialectSchema {
    /// Tool name.
    pub name: String,
    /// Description.
    pub description: String,
    /// The parameters in the dialect's form, or why they cannot be expressed in it.
    pub parameters: Result<Value, DialectError>,
    /// The parameters as derived or given, for a fallback.
    pub original: Value,
}

impl Serialize for DialectSchema {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut out = serializer.serialize_struct("DialectSchema", 4)?;
        out.serialize_field("name", &self.name)?;
        out.serialize_field("description", &self.description)?;
        match &self.parameters {
            Ok(parameters) => out.serialize_field("parameters", parameters)?,
            Err(error) => out.serialize_field(
                "error",
                &serde_json::json!({"message": error.to_string(), "path": error.path}),
            )?,
        }
        out.serialize_field("original", &self.original)?;
        out.end()
    }
}

impl Registry {
    /// `{name, description, parameters}` of every tool visible to `scope`, sorted by name (Rust
    /// `str` order), parameters in [`Dialect::Portable`] form (a schema Portable cannot handle is
    /// passed through as given rather than dropping the tool).
    pub fn schemas(&self, scope: Option<&AgentId>) -> Vec<ToolSchema> {
        self.schemas_for(scope, Dialect::Portable)
            .into_iter()
            .map(|schema| ToolSchema {
                name: schema.name,
                description: schema.description,
                parameters: schema.parameters.unwrap_or(schema.original),
            })
            .collect()
    }

    /// Every visible tool's parameters in `dialect`'s wire form, sorted by name. Errors are per
    /// tool: a tool whose schema cannot be expressed (e.g. a free-form map under
    /// [`Dialect::OpenAiStrict`]) carries its [`DialectError`] and its original schema, so the
    /// caller can send that one tool in another dialect (non-strict) without failing the others.
    pub fn schemas_for(&self, scope: Option<&AgentId>, dialect: Dialect) -> Vec<DialectSchema> {
        self.tools(scope)
            .into_iter()
            .map(|def| DialectSchema {
                name: def.name().to_owned(),
                description: def.description().to_owned(),
                parameters: dialect.transform(def.parameters()),
                original: def.parameters().clone(),
            })
            .collect()
    }
}
