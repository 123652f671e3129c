//! Tools out: a scope's tools as a provider's tool entries, strict per tool where admitted.

use serde::Serialize;
use serde_json::{Map, Value, json};

use super::names::wire_names;
use super::{Provider, ProviderError, ToolLoop};
use crate::dialect::{Dialect, anthropic_strict};
use crate::registry::{ModelViews, ToolSchema};

/// Anthropic's limit on strict tools in one request (strict tool use, "limitations").
pub(crate) const ANTHROPIC_MAX_STRICT: usize = 20;

/// What [`ToolLoop::tools`] returns: the request's `tools` field and what goes with it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProviderTools {
    /// The value of the request's `tools` field: an array of the provider's tool entries (for
    /// Gemini one `Tool` holding every `functionDeclarations` entry; an empty array when the
    /// scope sees no tool).
    pub tools: Value,
    /// The system text code mode adds (the prompt sections joined by blank lines): a system
    /// message, `instructions`, `system` or `systemInstruction` as the provider names it.
    /// `None` in native mode.
    pub system: Option<String>,
    /// Tools sent in the provider's strict form (Gemini: as an OpenAPI `parameters` schema), by
    /// name in request order.
    pub strict: Vec<String>,
    /// Every tool sent without the strict form, with why.
    pub reports: Vec<StrictReport>,
    /// Tools sent under another name because the provider refuses theirs, as `(registry name,
    /// name sent)` in request order. OpenAI and Anthropic take `^[a-zA-Z0-9_-]{1,64}$`; Gemini
    /// a letter or `_` first, then letters, digits, `_`, `.` and `-`, at most 63 characters.
    /// A refused name is sent with every other character as `_`; when that is too long or
    /// already a tool's name, it is cut and suffixed with `_` and 8 hex digits of a hash of the
    /// real name. Names the provider accepts are never changed, and the outcome does not depend
    /// on the order tools were registered in. Calls of a name sent are mapped back to its tool.
    pub renamed: Vec<(String, String)>,
}

/// Why one tool was not sent strict: the schema is outside the provider's strict rules, or the
/// provider's limit on strict tools was reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StrictReport {
    /// The tool's name.
    pub tool: String,
    /// Why, in words (e.g. the dialect error naming the JSON Pointer of the offending node).
    pub reason: String,
}

impl ToolLoop {
    /// The provider's tool entries for the scope's tools in its [`Mode`](crate::Mode): native,
    /// every visible tool; code, only `run_code` and the prompt sections as
    /// [`ProviderTools::system`]; both, the two together.
    ///
    /// Per tool, the strict form is used where the provider's rules admit its schema:
    /// - OpenAI (Chat and Responses): `"strict": true` with [`Dialect::OpenAiStrict`]; else
    ///   `"strict": false` with the [`Dialect::Portable`] schema;
    /// - Anthropic: `"strict": true` for at most 20 tools whose schema has Anthropic's strict
    ///   form (closed objects, no recursion, unsupported keywords moved into descriptions); else
    ///   the [`Dialect::Anthropic`] schema without `strict`;
    /// - Gemini: `parameters` in [`Dialect::Gemini`] (OpenAPI 3.0 subset) where it applies, else
    ///   the whole JSON Schema as `parametersJsonSchema`.
    ///
    /// A tool whose name the provider refuses (`server.tool` for OpenAI and Anthropic, a name
    /// over 64 characters) is sent under a name it accepts ([`ProviderTools::renamed`]).
    ///
    /// Remembers which tools went strict, so [`ToolLoop::step`] normalises their arguments, and
    /// which were renamed, so [`ToolLoop::parse`] maps their calls back.
    ///
    /// # Errors
    /// [`ProviderError::ModelView`] when the mode is code or both and no code runtime is mounted.
    pub fn tools(&mut self) -> Result<ProviderTools, ProviderError> {
        let (schemas, system) = self.model_tools()?;
        let mut entries = Vec::with_capacity(schemas.len());
        let mut strict = Vec::new();
        let mut reports = Vec::new();
        self.strict_schemas.clear();
        self.renamed.clear();
        let real: Vec<&str> = schemas.iter().map(|schema| schema.name.as_str()).collect();
        let sent = wire_names(self.provider, &real);
        let mut renamed = Vec::new();
        for (schema, sent) in schemas.iter().zip(&sent) {
            if *sent != schema.name {
                renamed.push((schema.name.clone(), sent.clone()));
                self.renamed.insert(sent.clone(), schema.name.clone());
            }
            // Strict forms come from the schema as declared: the Portable form gives every
            // object node `properties`, which would let a free-form map pass as a closed object.
            let declared = self
                .registry
                .get(&schema.name, self.scope.as_ref())
                .map_or_else(|| schema.parameters.clone(), |d| d.parameters().clone());
            let (entry, outcome) = self.entry(schema, sent, &declared, strict.len());
            entries.push(entry);
            match outcome {
                Ok(()) => {
                    strict.push(schema.name.clone());
                    self.strict_schemas.insert(schema.name.clone(), declared);
                }
                Err(Some(reason)) => reports.push(StrictReport {
                    tool: schema.name.clone(),
                    reason,
                }),
                Err(None) => {}
            }
        }
        let tools = match self.provider {
            Provider::Gemini if entries.is_empty() => json!([]),
            Provider::Gemini => json!([{ "functionDeclarations": entries }]),
            _ => Value::Array(entries),
        };
        if self.provider == Provider::Gemini {
            // Gemini has no strict mode; its OpenAPI `parameters` form is what it checks.
            self.strict_schemas.clear();
        }
        Ok(ProviderTools {
            tools,
            system,
            strict,
            reports,
            renamed,
        })
    }

    /// The scope's tools in its mode (Portable schemas) and code mode's system text.
    pub(super) fn model_tools(&self) -> Result<(Vec<ToolSchema>, Option<String>), ProviderError> {
        let mode = self.registry.mode(self.scope.as_ref());
        if mode == crate::Mode::Native {
            return Ok((self.registry.schemas(self.scope.as_ref()), None));
        }
        let Some(view) = self.registry.slot::<ModelViews>().get() else {
            return Err(ProviderError::ModelView(format!(
                "mode \"{mode}\" requires a code runtime: mount one with `set_code_runtime` \
                 (feature `code-mode`) or set the mode to native"
            )));
        };
        let (tools, sections) =
            view(&self.registry, self.scope.as_ref()).map_err(ProviderError::ModelView)?;
        let system = (!sections.is_empty()).then(|| sections.join("\n\n"));
        Ok((tools, system))
    }

    /// One tool's entry, and whether it is strict (`Err(Some(why))` when strict was wanted but
    /// not possible, `Err(None)` when not wanted).
    fn entry(
        &self,
        tool: &ToolSchema,
        name: &str,
        declared: &Value,
        strict_so_far: usize,
    ) -> (Value, Result<(), Option<String>>) {
        let (description, portable) = (&tool.description, &tool.parameters);
        let want = |outcome: Result<Value, String>| match outcome {
            Ok(schema) if self.strict => Ok(schema),
            Ok(_) => Err(None),
            Err(reason) => Err(self.strict.then_some(reason)),
        };
        match self.provider {
            Provider::OpenAiChat | Provider::OpenAiResponses => {
                let chosen = want(
                    Dialect::OpenAiStrict
                        .transform(declared)
                        .map_err(|error| error.to_string()),
                );
                let (parameters, is_strict) = match &chosen {
                    Ok(schema) => (schema.clone(), true),
                    Err(_) => (portable.clone(), false),
                };
                let entry = if self.provider == Provider::OpenAiChat {
                    json!({"type": "function", "function": {
                        "name": name, "description": description,
                        "parameters": parameters, "strict": is_strict,
                    }})
                } else {
                    json!({"type": "function", "name": name, "description": description,
                        "parameters": parameters, "strict": is_strict})
                };
                (entry, chosen.map(drop))
            }
            Provider::Anthropic => {
                let chosen = match want(anthropic_strict(declared)) {
                    Ok(_) if strict_so_far >= ANTHROPIC_MAX_STRICT => Err(Some(format!(
                        "Anthropic admits at most {ANTHROPIC_MAX_STRICT} strict tools in a request"
                    ))),
                    other => other,
                };
                let mut entry = Map::new();
                entry.insert("name".into(), json!(name));
                entry.insert("description".into(), json!(description));
                match &chosen {
                    Ok(schema) => {
                        entry.insert("input_schema".into(), schema.clone());
                        entry.insert("strict".into(), Value::Bool(true));
                    }
                    Err(_) => {
                        let schema = Dialect::Anthropic
                            .transform(declared)
                            .unwrap_or_else(|_| portable.clone());
                        entry.insert("input_schema".into(), schema);
                    }
                }
                (Value::Object(entry), chosen.map(drop))
            }
            Provider::Gemini => {
                let mut entry = Map::new();
                entry.insert("name".into(), json!(name));
                entry.insert("description".into(), json!(description));
                let gemini = Dialect::Gemini
                    .transform(declared)
                    .map_err(|e| e.to_string());
                let gemini = gemini.and_then(|schema| match unnamed_object(&schema) {
                    Some(path) => Err(format!(
                        "the object at `{path}` names no properties, which Gemini's OpenAPI `parameters` refuse"
                    )),
                    None => Ok(schema),
                });
                let outcome = match gemini {
                    Ok(schema) => {
                        if !no_parameters(&schema) {
                            entry.insert("parameters".into(), schema);
                        }
                        Ok(())
                    }
                    Err(reason) => {
                        entry.insert("parametersJsonSchema".into(), portable.clone());
                        Err(Some(format!(
                            "{reason}; sent whole as `parametersJsonSchema`"
                        )))
                    }
                };
                (Value::Object(entry), outcome)
            }
        }
    }
}

/// `{type: object, properties: {}}` and nothing else: Gemini rejects an `OBJECT` without
/// properties, and a declaration without `parameters` means "no arguments".
fn no_parameters(schema: &Value) -> bool {
    schema.as_object().is_some_and(|map| {
        map.iter().all(|(key, value)| match key.as_str() {
            "type" => value == "object",
            "properties" => value.as_object().is_some_and(Map::is_empty),
            "required" => value.as_array().is_some_and(Vec::is_empty),
            _ => false,
        })
    })
}

/// The JSON Pointer of the first object node below the root that names no properties (Gemini
/// answers 400 "properties: should be non-empty for OBJECT type"), if any.
fn unnamed_object(schema: &Value) -> Option<String> {
    let mut stack: Vec<(String, &Value)> = vec![(String::new(), schema)];
    while let Some((path, node)) = stack.pop() {
        let Value::Object(map) = node else { continue };
        let properties = map.get("properties").and_then(Value::as_object);
        if !path.is_empty()
            && map.get("type").and_then(Value::as_str) == Some("object")
            && properties.is_none_or(Map::is_empty)
        {
            return Some(path);
        }
        for (name, child) in properties.into_iter().flatten() {
            stack.push((format!("{path}/properties/{}", pointer_escape(name)), child));
        }
        if let Some(items) = map.get("items") {
            stack.push((format!("{path}/items"), items));
        }
        for (index, branch) in map
            .get("anyOf")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            stack.push((format!("{path}/anyOf/{index}"), branch));
        }
    }
    None
}

/// A JSON Pointer reference token (RFC 6901: `~` as `~0`, `/` as `~1`).
fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}
