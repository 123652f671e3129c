//! Constraints: the schema keywords deserializing into a Rust type does not enforce, and the
//! checks the `#[tool]` expansion emits for the ones its attributes declare (range, length,
//! pattern).

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use parking_lot::Mutex;

use regex::Regex;
use serde_json::Value;

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
