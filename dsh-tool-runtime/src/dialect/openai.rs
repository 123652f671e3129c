//! [`Dialect::OpenAiStrict`](super::Dialect::OpenAiStrict): OpenAI Structured Outputs /
//! function calling with `strict: true`.
//!
//! Rules from OpenAI's "Supported schemas" guide and what the official Agents SDK
//! (`strict_schema.py`) does: every object closed and fully `required`, optional properties as
//! nullable unions, `oneOf` → `anyOf`, a single `allOf` unwrapped, a `$ref` with siblings
//! wrapped; keywords outside the supported list go into `description` as text.

use serde_json::{Map, Value};

use super::Dialect;
use super::error::{DialectError, DialectErrorKind, Path};
use super::json_schema::{admits_null, openapi_nullable, required_names};
use super::keywords::{
    append_notes, combinators, insert_first, is_annotation, json_type, type_of_values, types_of,
};

/// Keywords strict mode accepts on a node.
const SUPPORTED: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "title",
    "description",
    "pattern",
    "format",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "minItems",
    "maxItems",
];

/// String `format`s strict mode accepts; others (`uri`, …) are a 400 error.
const FORMATS: &[&str] = &[
    "date-time",
    "time",
    "date",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
];

/// Documented limits of a strict schema.
const MAX_PROPERTIES: usize = 5_000;
const MAX_OBJECT_DEPTH: usize = 10;
const MAX_CHARS: usize = 120_000;
const MAX_ENUM_VALUES: usize = 1_000;
const LARGE_ENUM: usize = 250;
const MAX_LARGE_ENUM_CHARS: usize = 15_000;

struct Strict {
    path: Path,
    properties: usize,
    enum_values: usize,
    chars: usize,
}

/// Makes the expanded schema strict, or names the first node that cannot be.
pub(super) fn strict(root: &mut Value) -> Result<(), DialectError> {
    let mut strict = Strict {
        path: Path::default(),
        properties: 0,
        enum_values: 0,
        chars: 0,
    };
    if let Some(Value::Array(_)) = root.get("anyOf").or_else(|| root.get("oneOf")) {
        return Err(strict.fail(DialectErrorKind::RootUnion));
    }
    strict.node(root, 0)?;
    if let Some(Value::Object(defs)) = root.get_mut("$defs") {
        strict.path.push("$defs");
        for (name, def) in defs.iter_mut() {
            strict.add_chars(name.chars().count())?;
            strict.path.push(name);
            strict.node(def, 0)?;
            strict.path.pop();
        }
        strict.path.pop();
    }
    Ok(())
}

impl Strict {
    fn fail(&self, kind: DialectErrorKind) -> DialectError {
        self.path.error(Dialect::OpenAiStrict, kind)
    }

    fn limit(&self, what: &'static str, limit: usize, found: usize) -> Result<(), DialectError> {
        if found > limit {
            return Err(self.fail(DialectErrorKind::LimitExceeded { what, limit, found }));
        }
        Ok(())
    }

    fn add_chars(&mut self, count: usize) -> Result<(), DialectError> {
        self.chars += count;
        self.limit(
            "characters of property names, definition names and enum values",
            MAX_CHARS,
            self.chars,
        )
    }

    /// One schema node; `objects` counts the objects enclosing it.
    fn node(&mut self, node: &mut Value, objects: usize) -> Result<(), DialectError> {
        let map = match node {
            Value::Object(map) => map,
            Value::Bool(true) => return Err(self.fail(DialectErrorKind::UntypedValue)),
            Value::Bool(false) => return Err(self.fail(DialectErrorKind::Unsatisfiable)),
            other => {
                return Err(self.fail(DialectErrorKind::NotASchema {
                    found: json_type(other),
                }));
            }
        };
        openapi_nullable(map);
        let mut notes = Map::new();
        combinators(map, &mut notes);
        if map.contains_key("$ref") && map.len() > 1 {
            wrap_ref(map).map_err(|kind| self.fail(kind))?;
        }
        if map.contains_key("patternProperties") {
            return Err(self.fail(DialectErrorKind::FreeFormObject));
        }
        if map.contains_key("prefixItems") {
            return Err(self.fail(DialectErrorKind::TupleArray));
        }
        let keys: Vec<String> = map.keys().cloned().collect();
        for key in keys {
            let unsupported_format = key == "format"
                && !map
                    .get("format")
                    .and_then(Value::as_str)
                    .is_some_and(|format| FORMATS.contains(&format));
            // `default: null` is what a nullable field means anyway (the SDK drops it too).
            let null_default = key == "default" && map.get("default") == Some(&Value::Null);
            if key == "$comment" || null_default {
                map.shift_remove(&key);
            } else if (!SUPPORTED.contains(&key.as_str()) || unsupported_format)
                && let Some(value) = map.shift_remove(&key)
            {
                notes.insert(key, value);
            }
        }
        append_notes(map, notes);
        self.infer_type(map)?;
        let types = types_of(map)
            .map_err(|kind| self.fail(kind))?
            .unwrap_or_default();
        self.values(map)?;
        if types.iter().any(|ty| ty == "object") {
            self.object(map, objects)?;
        }
        if types.iter().any(|ty| ty == "array") {
            match map.get_mut("items") {
                Some(items) => {
                    self.path.push("items");
                    self.node(items, objects)?;
                    self.path.pop();
                }
                None => return Err(self.fail(DialectErrorKind::UntypedArray)),
            }
        }
        if let Some(Value::Array(branches)) = map.get_mut("anyOf") {
            self.path.push("anyOf");
            for (index, branch) in branches.iter_mut().enumerate() {
                self.path.push(&index.to_string());
                self.node(branch, objects)?;
                self.path.pop();
            }
            self.path.pop();
        }
        Ok(())
    }

    /// A node needs `type`, `anyOf` or `$ref`; `enum`/`const` give their values' type,
    /// `properties` means an object and `items` an array.
    fn infer_type(&self, map: &mut Map<String, Value>) -> Result<(), DialectError> {
        if map.contains_key("type") || map.contains_key("anyOf") || map.contains_key("$ref") {
            return Ok(());
        }
        let inferred = match (map.get("const"), map.get("enum")) {
            (Some(value), _) => type_of_values([value]),
            (None, Some(Value::Array(values))) => type_of_values(values),
            _ if map.contains_key("properties") => Some(Value::String("object".to_owned())),
            _ if map.contains_key("items") => Some(Value::String("array".to_owned())),
            _ => None,
        };
        match inferred {
            Some(ty) => {
                insert_first(map, "type", ty);
                Ok(())
            }
            None => Err(self.fail(DialectErrorKind::UntypedValue)),
        }
    }

    /// Counts `enum`/`const` values against the documented limits.
    fn values(&mut self, map: &Map<String, Value>) -> Result<(), DialectError> {
        let text_len = |value: &Value| match value {
            Value::String(text) => text.chars().count(),
            other => other.to_string().chars().count(),
        };
        if let Some(value) = map.get("const") {
            self.add_chars(text_len(value))?;
        }
        let Some(Value::Array(values)) = map.get("enum") else {
            return Ok(());
        };
        self.enum_values += values.len();
        self.limit("enum values", MAX_ENUM_VALUES, self.enum_values)?;
        let chars: usize = values.iter().map(text_len).sum();
        if values.len() > LARGE_ENUM && values.iter().all(Value::is_string) {
            self.limit(
                "characters of one string enum with more than 250 values",
                MAX_LARGE_ENUM_CHARS,
                chars,
            )?;
        }
        self.add_chars(chars)
    }

    /// Closes an object, lists every property in `required`, makes optional ones nullable.
    fn object(&mut self, map: &mut Map<String, Value>, objects: usize) -> Result<(), DialectError> {
        self.limit("object nesting levels", MAX_OBJECT_DEPTH, objects + 1)?;
        let named = map.get("properties").is_some_and(Value::is_object);
        match map.get("additionalProperties") {
            Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) | None if named => {}
            Some(Value::Object(schema)) if schema.is_empty() && named => {}
            _ => return Err(self.fail(DialectErrorKind::FreeFormObject)),
        }
        map.insert("additionalProperties".to_owned(), Value::Bool(false));
        let optional = {
            let required = required_names(map);
            let Some(Value::Object(properties)) = map.get("properties") else {
                return Err(self.fail(DialectErrorKind::FreeFormObject));
            };
            let names: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
            let optional: Vec<String> = properties
                .keys()
                .filter(|name| !required.contains(*name))
                .cloned()
                .collect();
            map.insert("required".to_owned(), Value::Array(names));
            optional
        };
        let Some(Value::Object(properties)) = map.get_mut("properties") else {
            return Err(self.fail(DialectErrorKind::FreeFormObject));
        };
        self.properties += properties.len();
        self.limit("object properties", MAX_PROPERTIES, self.properties)?;
        self.path.push("properties");
        for (name, property) in properties.iter_mut() {
            self.path.push(name);
            self.add_chars(name.chars().count())?;
            self.node(property, objects + 1)?;
            if optional.contains(name) {
                make_nullable(property);
            }
            self.path.pop();
        }
        self.path.pop();
        Ok(())
    }
}

/// `{"$ref": r, …siblings}` → `{"anyOf": [{"$ref": r}], …siblings}`: strict mode does not
/// accept keywords beside `$ref`.
fn wrap_ref(map: &mut Map<String, Value>) -> Result<(), DialectErrorKind> {
    if map.contains_key("anyOf") {
        return Err(DialectErrorKind::RefBesideAnyOf);
    }
    let Some(reference) = map.shift_remove("$ref") else {
        return Ok(());
    };
    let mut branch = Map::new();
    branch.insert("$ref".to_owned(), reference);
    map.insert(
        "anyOf".to_owned(),
        Value::Array(vec![Value::Object(branch)]),
    );
    Ok(())
}

/// An optional property in strict form: `type: [T, "null"]` for a plain typed node, otherwise
/// `anyOf: [schema, {"type": "null"}]` with the annotations kept outside.
fn make_nullable(property: &mut Value) {
    let Value::Object(map) = property else { return };
    if admits_null(map) {
        return;
    }
    let plain = matches!(map.get("type"), Some(Value::String(_)))
        && !["enum", "const", "anyOf", "$ref"]
            .iter()
            .any(|keyword| map.contains_key(*keyword));
    let null = || {
        let mut branch = Map::new();
        branch.insert("type".to_owned(), Value::String("null".to_owned()));
        Value::Object(branch)
    };
    if plain {
        if let Some(ty) = map.shift_remove("type") {
            insert_first(
                map,
                "type",
                Value::Array(vec![ty, Value::String("null".to_owned())]),
            );
        }
        return;
    }
    let union_only = map.keys().all(|key| key == "anyOf" || is_annotation(key));
    if union_only && let Some(Value::Array(branches)) = map.get_mut("anyOf") {
        branches.push(null());
        return;
    }
    let mut inner = Map::new();
    let mut outer = Map::new();
    for (key, value) in std::mem::take(map) {
        if key == "description" || key == "title" {
            outer.insert(key, value);
        } else {
            inner.insert(key, value);
        }
    }
    outer.insert(
        "anyOf".to_owned(),
        Value::Array(vec![Value::Object(inner), null()]),
    );
    *map = outer;
}
