//! Argument validation.
//!
//! The fast path deserializes arguments straight into the typed `Args`; only when that fails does
//! the slow path here run the full schema with the `jsonschema` crate and collect every
//! violation, each one short message that names its path (`missing required property "<path>"`,
//! `"<path>" must be one of [..]`, …), worded as in DSH.

mod constraints;
mod messages;

pub use constraints::{check_length, check_pattern, check_range, has_unenforced_constraints};

use jsonschema::error::ValidationErrorKind;
use jsonschema::paths::LocationSegment;
use serde_json::Value;

use crate::error::ErrorCode;
use crate::json::{MAX_VALUE_DEPTH, deeper_than};
use crate::result::ToolFailure;
use messages::Render;

/// A compiled parameters or output schema.
pub struct SchemaValidator {
    validator: jsonschema::Validator,
    /// The source, read to order violations and to name the values of an enum of consts.
    schema: Value,
}

impl std::fmt::Debug for SchemaValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SchemaValidator")
    }
}

/// One violation before rendering: where it sorts, and the schema object holding its keyword.
struct Found<'s> {
    order: Vec<(u8, usize)>,
    at: String,
    holder: Option<&'s Value>,
    is_enum: bool,
    is_const: bool,
    is_type: bool,
    rendered: Vec<String>,
}

impl SchemaValidator {
    /// Compiles a JSON Schema (2020-12 unless `$schema` says otherwise).
    ///
    /// # Errors
    /// The schema is not a valid JSON Schema; the message comes from `jsonschema`.
    pub fn new(schema: &Value) -> Result<Self, String> {
        jsonschema::options()
            .with_draft(jsonschema::Draft::Draft202012)
            .build(schema)
            .map(|validator| SchemaValidator {
                validator,
                schema: schema.clone(),
            })
            .map_err(|err| err.to_string())
    }

    /// Every violation of `value`, rendered with root name `root` (`""` renders as `arguments`),
    /// in this order, as in DSH: within an object, missing-required first, then the children in the
    /// schema's `properties` order, then undeclared keys; `enum` wins over `const` on the same
    /// schema.
    pub fn violations(&self, value: &Value, root: &str) -> Vec<String> {
        if let Some(violation) = depth_violation(value, root) {
            return vec![violation];
        }
        let mut found: Vec<Found<'_>> = Vec::new();
        let render = Render {
            schema: &self.schema,
            value,
            root,
        };
        for error in self.validator.iter_errors(value) {
            let (mut order, holder) = locate(&self.schema, error.evaluation_path());
            let kind = error.kind();
            order.push(match kind {
                ValidationErrorKind::Required { .. } => (0, 0),
                ValidationErrorKind::AdditionalProperties { .. }
                | ValidationErrorKind::UnevaluatedProperties { .. } => (2, 0),
                _ => (0, 1),
            });
            let mut rendered = Vec::new();
            render.error(&error, holder, 0, &mut rendered);
            found.push(Found {
                order,
                at: error.instance_path().as_str().to_owned(),
                holder,
                is_enum: matches!(kind, ValidationErrorKind::Enum { .. }),
                is_const: matches!(kind, ValidationErrorKind::Constant { .. }),
                is_type: matches!(kind, ValidationErrorKind::Type { .. }),
                rendered,
            });
        }
        // `enum` is checked before `const` and `type`: when they fail on one schema, only `enum`
        // reports (its list of values says what the type would).
        let enum_misses: Vec<(String, *const Value)> = found
            .iter()
            .filter(|item| item.is_enum)
            .filter_map(|item| {
                item.holder
                    .map(|holder| (item.at.clone(), holder as *const Value))
            })
            .collect();
        found.retain(|item| {
            !((item.is_const || item.is_type)
                && item.holder.is_some_and(|holder| {
                    enum_misses.contains(&(item.at.clone(), holder as *const Value))
                }))
        });
        found.sort_by(|a, b| a.order.cmp(&b.order));
        found.into_iter().flat_map(|item| item.rendered).collect()
    }

    /// `true` when `value` satisfies the schema.
    pub fn is_valid(&self, value: &Value) -> bool {
        depth_violation(value, "").is_none() && self.validator.is_valid(value)
    }

    /// [`is_valid`](Self::is_valid) for a value whose depth the caller has already bounded
    /// with [`depth_violation`]: the recursive validator is then safe to run directly.
    pub fn is_valid_within_depth(&self, value: &Value) -> bool {
        self.validator.is_valid(value)
    }
}

/// Follows an evaluation path (which names every `$ref` it went through) from the root schema:
/// returns the sort key of each step into a child instance — `(1, i)` for the `i`-th entry of
/// `properties`, `(2, 0)` for an undeclared key — and the schema object that holds the failing
/// keyword. Stops quietly where the path leaves the document (remote references).
fn locate<'s>(
    root: &'s Value,
    path: &jsonschema::paths::Location,
) -> (Vec<(u8, usize)>, Option<&'s Value>) {
    let segments: Vec<String> = path
        .segments()
        .map(|segment| match segment {
            LocationSegment::Property(name) => name.to_string(),
            LocationSegment::Index(index) => index.to_string(),
        })
        .collect();
    let mut order = Vec::new();
    let mut node = Some(root);
    let mut holder = Some(root);
    let mut index = 0;
    while index < segments.len() {
        let Some(current) = node else { break };
        let segment = segments[index].as_str();
        holder = Some(current);
        if index + 1 == segments.len() {
            break;
        }
        node = match segment {
            "$ref" | "$dynamicRef" => current
                .get(segment)
                .and_then(Value::as_str)
                .and_then(|target| target.strip_prefix('#'))
                .and_then(|pointer| resolve_local(root, pointer)),
            "properties" => {
                index += 1;
                let name = segments[index].as_str();
                let properties = current.get("properties").and_then(Value::as_object);
                if let Some(position) =
                    properties.and_then(|map| map.keys().position(|key| key == name))
                {
                    order.push((1, position));
                }
                properties.and_then(|map| map.get(name))
            }
            "patternProperties" => {
                index += 1;
                order.push((2, 0));
                current
                    .get(segment)
                    .and_then(|map| map.get(segments[index].as_str()))
            }
            "additionalProperties" | "unevaluatedProperties" => {
                order.push((2, 0));
                current.get(segment)
            }
            _ => match current {
                Value::Array(items) => segment.parse::<usize>().ok().and_then(|i| items.get(i)),
                other => other.get(segment),
            },
        };
        index += 1;
    }
    (order, holder)
}

/// Longest name (bytes) [`nearest`] looks for a near match of.
const MAX_SUGGESTED_BYTES: usize = 256;

/// The candidate a misspelt name most likely meant: the closest by edit distance, when that
/// distance is at most a third of the name's length (at least 1), as `asignee` → `assignee`.
/// Names shorter than 3 characters get no guess: any other short name is as near.
pub fn nearest<'a>(name: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    // The distance costs the product of the two lengths: a name no identifier is as long as gets
    // no suggestion, and a candidate whose length alone rules it out is not measured.
    if name.len() > MAX_SUGGESTED_BYTES {
        return None;
    }
    let length = name.chars().count();
    if length < 3 {
        return None;
    }
    let limit = (length / 3).max(1);
    candidates
        .filter(|candidate| candidate.chars().count().abs_diff(length) <= limit)
        .map(|candidate| (strsim::damerau_levenshtein(name, candidate), candidate))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, candidate)| candidate)
}

/// Resolves a local JSON pointer (`/$defs/Node`) or an `$anchor` name against the root.
fn resolve_local<'s>(root: &'s Value, pointer: &str) -> Option<&'s Value> {
    if pointer.is_empty() || pointer.starts_with('/') {
        return root.pointer(pointer);
    }
    let mut stack = vec![root];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if map.get("$anchor").and_then(Value::as_str) == Some(pointer) {
                    return Some(node);
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    None
}

/// The values of a `oneOf`/`anyOf` whose every branch is a `const` (schemars writes documented
/// enum variants so): the enum it stands for.
pub fn const_branches(branches: &Value) -> Option<Vec<Value>> {
    const ANNOTATIONS: &[&str] = &[
        "const",
        "type",
        "description",
        "title",
        "$comment",
        "deprecated",
    ];
    let branches = branches.as_array()?;
    if branches.is_empty() {
        return None;
    }
    branches
        .iter()
        .map(|branch| {
            let map = branch.as_object()?;
            let value = map.get("const")?;
            map.keys()
                .all(|key| ANNOTATIONS.contains(&key.as_str()))
                .then(|| value.clone())
        })
        .collect()
}

/// The `INVALID_ARGS` failure for a list of violations: `invalid arguments: v1; v2`.
pub fn invalid_args(violations: &[String]) -> ToolFailure {
    ToolFailure::coded(
        ErrorCode::InvalidArgs,
        format!("invalid arguments: {}", listed(violations)),
    )
}

/// The `INVALID_TOOL_OUTPUT` failure: `tool "<name>" returned invalid output: <violations>`.
pub fn invalid_output(tool: &str, violations: &[String]) -> ToolFailure {
    ToolFailure::coded(
        ErrorCode::InvalidToolOutput,
        format!(
            "tool \"{tool}\" returned invalid output: {}",
            listed(violations)
        ),
    )
}

/// At most this many violations are listed in one message; the rest are counted. A model that
/// sends a hundred thousand stray keys learns of the first ones, not of a message megabytes long.
const MAX_LISTED: usize = 20;

/// A violation is cut after this many bytes: keys and values in it come from the model.
const MAX_VIOLATION_BYTES: usize = 512;

/// `violations` joined with `; `, bounded by [`MAX_LISTED`] and [`MAX_VIOLATION_BYTES`], control
/// characters written as escapes so that a key holding a newline or a NUL cannot forge lines.
fn listed(violations: &[String]) -> String {
    let mut out = String::new();
    for (index, violation) in violations.iter().take(MAX_LISTED).enumerate() {
        if index > 0 {
            out.push_str("; ");
        }
        push_bounded(&mut out, violation, MAX_VIOLATION_BYTES);
    }
    if violations.len() > MAX_LISTED {
        out.push_str(&format!("; and {} more", violations.len() - MAX_LISTED));
    }
    out
}

/// Appends `text` to `out`, cut with `…` after `max` bytes, control characters escaped.
pub fn push_bounded(out: &mut String, text: &str, max: usize) {
    let mut used = 0;
    for c in text.chars() {
        if used >= max {
            out.push('…');
            return;
        }
        if c.is_control() {
            let escaped = c.escape_default();
            used += escaped.len();
            out.extend(escaped);
        } else {
            used += c.len_utf8();
            out.push(c);
        }
    }
}

/// Refuses values nested deeper than [`MAX_VALUE_DEPTH`], measured without recursion, so that
/// no later recursive walk (validation, deserialization) can overflow the stack.
pub fn depth_violation(value: &Value, root: &str) -> Option<String> {
    deeper_than(value, MAX_VALUE_DEPTH).then(|| {
        let name = if root.is_empty() { "arguments" } else { root };
        format!("\"{name}\" is nested deeper than {MAX_VALUE_DEPTH} levels")
    })
}
