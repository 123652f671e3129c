//! How a violation reads: its path, the expected type with its article, and for a tagged union
//! the branch the value's tag picks.

use std::fmt::Write as _;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::paths::LocationSegment;
use serde_json::Value;

use super::{const_branches, locate, nearest};

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
pub(super) struct Render<'a> {
    pub(super) schema: &'a Value,
    pub(super) value: &'a Value,
    pub(super) root: &'a str,
}

impl Render<'_> {
    pub(super) fn error(
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
