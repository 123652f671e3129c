//! Argument validation.
//!
//! The fast path deserializes arguments straight into the typed `Args`; only when that fails does
//! the slow path here run the full schema with the `jsonschema` crate and collect every
//! violation, each one short message that names its path (`missing required property "<path>"`,
//! `"<path>" must be one of [..]`, …), worded as in DSH.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use regex::Regex;
use serde_json::Value;

use crate::error::ErrorCode;
use crate::json::{MAX_VALUE_DEPTH, deeper_than};
use crate::result::ToolFailure;

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

/// A path segment of an instance location.
enum Segment {
    Key(String),
    Index(usize),
}

/// Renders a path: the root name (empty ⇒ `arguments` when alone), `.key` and `[i]` after it.
fn render_path(root: &str, path: &[Segment]) -> String {
    let mut out = root.to_owned();
    for segment in path {
        match segment {
            Segment::Key(key) if out.is_empty() => out.push_str(key),
            Segment::Key(key) => {
                out.push('.');
                out.push_str(key);
            }
            Segment::Index(index) => {
                let _ = write!(out, "[{index}]");
            }
        }
    }
    if out.is_empty() {
        "arguments".to_owned()
    } else {
        out
    }
}

fn child(root: &str, path: &[Segment], key: &str) -> String {
    if path.is_empty() && root.is_empty() {
        key.to_owned()
    } else {
        format!("{}.{key}", render_path(root, path))
    }
}

fn type_name(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(ty) => ty.to_string(),
        TypeKind::Multiple(types) => {
            let names: Vec<String> = types.iter().map(|ty| ty.to_string()).collect();
            names.join(" or ")
        }
    }
}

fn article(type_name: &str) -> &'static str {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

/// How many tagged `oneOf` branches deep [`Render::tagged_branch`] explains a miss.
const MAX_TAGGED_DEPTH: usize = 16;

/// What rendering one validation error needs beyond the error: the schema (to find the keyword
/// that failed), the value (to read a tag) and the root name.
struct Render<'a> {
    schema: &'a Value,
    value: &'a Value,
    root: &'a str,
}

impl Render<'_> {
    fn error(
        &self,
        error: &jsonschema::ValidationError<'_>,
        holder: Option<&Value>,
        depth: usize,
        out: &mut Vec<String>,
    ) {
        let path: Vec<Segment> = error
            .instance_path()
            .iter()
            .map(|segment| match segment {
                LocationSegment::Property(name) => Segment::Key(name.to_string()),
                LocationSegment::Index(index) => Segment::Index(index),
            })
            .collect();
        render_error(
            error.kind(),
            self.root,
            &path,
            holder,
            &error.to_string(),
            out,
        );
        if let ValidationErrorKind::OneOfNotValid { context } = error.kind()
            && depth < MAX_TAGGED_DEPTH
            && let Some(branches) = holder.and_then(|holder| holder.get("oneOf"))
            && const_branches(branches).is_none()
        {
            let instance = self.value.pointer(error.instance_path().as_str());
            self.tagged_branch(branches, instance, context, &path, depth, out);
        }
    }

    /// Explains a `oneOf` miss whose branches are objects told apart by one `const` property
    /// (serde's tagged enums): a missing or unknown tag names the tags; a known tag reports why
    /// its branch failed. Other unions keep the plain
    /// `must match exactly one oneOf branch (matched N)` text.
    fn tagged_branch(
        &self,
        branches: &Value,
        instance: Option<&Value>,
        context: &[Vec<jsonschema::ValidationError<'static>>],
        path: &[Segment],
        depth: usize,
        out: &mut Vec<String>,
    ) {
        let Some((key, tags)) = discriminator(branches) else {
            return;
        };
        let Some(object) = instance.and_then(Value::as_object) else {
            if instance.is_some() {
                out.push(format!(
                    "\"{}\" must be an object with \"{key}\" one of {}",
                    render_path(self.root, path),
                    Value::Array(tags)
                ));
            }
            return;
        };
        match object.get(key) {
            None => out.push(format!(
                "missing required property \"{}\"",
                child(self.root, path, key)
            )),
            Some(tag) => match tags.iter().position(|known| known == tag) {
                Some(branch) => {
                    for error in context.get(branch).into_iter().flatten() {
                        let (_, holder) = locate(self.schema, error.evaluation_path());
                        self.error(error, holder, depth + 1, out);
                    }
                }
                None => out.push(format!(
                    "\"{}\" must be one of {}",
                    child(self.root, path, key),
                    Value::Array(tags)
                )),
            },
        }
    }
}

/// The property every branch of a `oneOf` requires and fixes to a distinct `const` (or
/// one-value `enum`), with the branches' values in branch order.
fn discriminator(branches: &Value) -> Option<(&str, Vec<Value>)> {
    let branches = branches.as_array().filter(|b| b.len() >= 2)?;
    let tag_of = |branch: &Value, key: &str| -> Option<Value> {
        let required = branch.get("required")?.as_array()?;
        if !required.iter().any(|name| name.as_str() == Some(key)) {
            return None;
        }
        let property = branch.get("properties")?.get(key)?;
        match (
            property.get("const"),
            property.get("enum").and_then(Value::as_array),
        ) {
            (Some(value), _) => Some(value.clone()),
            (None, Some(values)) if values.len() == 1 => Some(values[0].clone()),
            _ => None,
        }
    };
    let first = branches[0].get("properties")?.as_object()?;
    first.keys().find_map(|key| {
        let tags: Vec<Value> = branches
            .iter()
            .map(|branch| tag_of(branch, key))
            .collect::<Option<_>>()?;
        let distinct = tags
            .iter()
            .enumerate()
            .all(|(i, tag)| !tags[..i].contains(tag));
        distinct.then_some((key.as_str(), tags))
    })
}

fn render_error(
    kind: &ValidationErrorKind,
    root: &str,
    path: &[Segment],
    holder: Option<&Value>,
    fallback: &str,
    out: &mut Vec<String>,
) {
    let at = render_path(root, path);
    let consts = |keyword: &str| {
        holder
            .and_then(|holder| holder.get(keyword))
            .and_then(const_branches)
    };
    match kind {
        ValidationErrorKind::Required { property } => {
            let key = property
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| property.to_string());
            out.push(format!(
                "missing required property \"{}\"",
                child(root, path, &key)
            ));
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let declared = holder
                .and_then(|holder| holder.get("properties"))
                .and_then(Value::as_object);
            for key in unexpected {
                let mut message = format!("unknown property \"{}\"", child(root, path, key));
                if let Some(near) =
                    declared.and_then(|declared| nearest(key, declared.keys().map(String::as_str)))
                {
                    message.push_str(&format!("; did you mean \"{near}\"?"));
                }
                out.push(message);
            }
        }
        ValidationErrorKind::Type { kind } => {
            let name = type_name(kind);
            if name == "null" {
                out.push(format!("\"{at}\" must be null"));
            } else {
                out.push(format!("\"{at}\" must be {} {name}", article(&name)));
            }
        }
        ValidationErrorKind::Enum { options } => {
            out.push(format!("\"{at}\" must be one of {options}"))
        }
        ValidationErrorKind::Constant { expected_value } => {
            out.push(format!("\"{at}\" must be {expected_value}"))
        }
        ValidationErrorKind::OneOfNotValid { .. } => match consts("oneOf") {
            Some(values) => out.push(format!("\"{at}\" must be one of {}", Value::Array(values))),
            None => out.push(format!(
                "\"{at}\" must match exactly one oneOf branch (matched 0)"
            )),
        },
        ValidationErrorKind::AnyOf { .. } if consts("anyOf").is_some() => {
            let values = consts("anyOf").unwrap_or_default();
            out.push(format!("\"{at}\" must be one of {}", Value::Array(values)));
        }
        ValidationErrorKind::OneOfMultipleValid { context } => {
            let matched = context.iter().filter(|branch| branch.is_empty()).count();
            out.push(format!(
                "\"{at}\" must match exactly one oneOf branch (matched {matched})"
            ));
        }
        ValidationErrorKind::Minimum { limit } => out.push(format!("\"{at}\" must be >= {limit}")),
        ValidationErrorKind::Maximum { limit } => out.push(format!("\"{at}\" must be <= {limit}")),
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            out.push(format!("\"{at}\" must be > {limit}"))
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            out.push(format!("\"{at}\" must be < {limit}"))
        }
        ValidationErrorKind::MinLength { limit } => {
            out.push(format!("\"{at}\" must be at least {limit} characters long"));
        }
        ValidationErrorKind::MaxLength { limit } => {
            out.push(format!("\"{at}\" must be at most {limit} characters long"));
        }
        ValidationErrorKind::Pattern { pattern } => {
            out.push(format!("\"{at}\" must match the pattern \"{pattern}\""))
        }
        ValidationErrorKind::MinItems { limit } => {
            out.push(format!("\"{at}\" must have at least {limit} items"))
        }
        ValidationErrorKind::MaxItems { limit } => {
            out.push(format!("\"{at}\" must have at most {limit} items"))
        }
        _ => out.push(format!("\"{at}\" {fallback}")),
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

/// Keywords a schema may show that deserializing into a Rust type does not enforce.
const UNENFORCED: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "contains",
    "minProperties",
    "maxProperties",
    "propertyNames",
    "patternProperties",
    "dependentRequired",
    "dependentSchemas",
    "not",
    "if",
];

/// `true` when `schema` shows a constraint (a bound, length, pattern …) that deserializing into
/// the typed arguments does not check, so the arguments must also be validated against the
/// schema. The bounds schemars writes for an integer's own width (`"format": "uint8"`,
/// `minimum: 0`, `maximum: 255`) are enforced by serde and do not count. Iterative.
pub fn has_unenforced_constraints(schema: &Value) -> bool {
    let mut stack = vec![schema];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                let width = map
                    .get("format")
                    .and_then(Value::as_str)
                    .and_then(integer_width);
                for keyword in UNENFORCED {
                    let Some(bound) = map.get(*keyword) else {
                        continue;
                    };
                    let natural = match (*keyword, width) {
                        ("minimum", Some((min, _))) => bound.as_f64() == Some(min),
                        ("maximum", Some((_, max))) => bound.as_f64() == Some(max),
                        _ => false,
                    };
                    if !natural {
                        return true;
                    }
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    false
}

/// The range of an integer `format` schemars writes, as `(min, max)` in `f64`.
#[allow(clippy::cast_precision_loss)]
fn integer_width(format: &str) -> Option<(f64, f64)> {
    Some(match format {
        "uint8" => (0.0, f64::from(u8::MAX)),
        "uint16" => (0.0, f64::from(u16::MAX)),
        "uint32" => (0.0, f64::from(u32::MAX)),
        "uint64" | "uint" => (0.0, u64::MAX as f64),
        "uint128" => (0.0, u128::MAX as f64),
        "int8" => (f64::from(i8::MIN), f64::from(i8::MAX)),
        "int16" => (f64::from(i16::MIN), f64::from(i16::MAX)),
        "int32" => (f64::from(i32::MIN), f64::from(i32::MAX)),
        "int64" | "int" => (i64::MIN as f64, i64::MAX as f64),
        "int128" => (i128::MIN as f64, i128::MAX as f64),
        _ => return None,
    })
}

/// Checks an `#[arg(range(min, max))]` constraint on a number.
pub fn check_range(
    name: &str,
    value: f64,
    min: Option<f64>,
    max: Option<f64>,
    out: &mut Vec<String>,
) {
    if let Some(min) = min
        && value < min
    {
        out.push(format!("\"{name}\" must be >= {}", bound_text(min)));
    }
    if let Some(max) = max
        && value > max
    {
        out.push(format!("\"{name}\" must be <= {}", bound_text(max)));
    }
}

/// A bound as the schema shows it: integral bounds without a fractional part (`1`, not `1.0`),
/// matching the messages of schema validation.
fn bound_text(bound: f64) -> String {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: larger integers are not exact in f64
    if bound.fract() == 0.0 && bound.abs() < EXACT {
        #[allow(clippy::cast_possible_truncation)]
        let integral = bound as i64;
        integral.to_string()
    } else {
        Value::from(bound).to_string()
    }
}

/// Checks an `#[arg(length(min, max))]` constraint; strings count chars (JSON Schema counts code
/// points), collections count items.
pub fn check_length(
    name: &str,
    len: usize,
    is_string: bool,
    min: Option<u64>,
    max: Option<u64>,
    out: &mut Vec<String>,
) {
    let unit = if is_string {
        "characters long"
    } else {
        "items"
    };
    if let Some(min) = min
        && (len as u64) < min
    {
        if is_string {
            out.push(format!("\"{name}\" must be at least {min} {unit}"));
        } else {
            out.push(format!("\"{name}\" must have at least {min} {unit}"));
        }
    }
    if let Some(max) = max
        && (len as u64) > max
    {
        if is_string {
            out.push(format!("\"{name}\" must be at most {max} {unit}"));
        } else {
            out.push(format!("\"{name}\" must have at most {max} {unit}"));
        }
    }
}

/// Checks an `#[arg(pattern = "…")]` constraint (unanchored search, as JSON Schema's `pattern`).
/// Compiled regexes are cached per pattern.
pub fn check_pattern(name: &str, value: &str, pattern: &'static str, out: &mut Vec<String>) {
    /// Compiled patterns by source; `None` for a pattern that does not compile.
    type Cache = Mutex<HashMap<&'static str, Option<Arc<Regex>>>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let regex = CACHE
        .get_or_init(Default::default)
        .lock()
        .entry(pattern)
        .or_insert_with(|| Regex::new(pattern).ok().map(Arc::new))
        .clone();
    match regex {
        Some(regex) if regex.is_match(value) => {}
        _ => out.push(format!("\"{name}\" must match the pattern \"{pattern}\"")),
    }
}
