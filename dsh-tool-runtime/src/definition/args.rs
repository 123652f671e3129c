//! The arguments a definition's body receives: an object, no deeper than the validator walks,
//! without the `null`s strict-mode clients send for absent optionals, and (for typed tools)
//! deserialized into the tool's argument type.

use std::ops::ControlFlow;
use std::sync::Arc;

use serde_json::Value;

use crate::dialect::normalize_strict_arguments;
use crate::json::dismantle;
use crate::result::ToolFailure;
use crate::tool::{Tool, ToolArgs};
use crate::validate::{SchemaValidator, depth_violation, invalid_args};

/// Removes top-level `null` values of properties that are not `required`: strict-mode clients send
/// `null` for "absent". Copies the arguments only when there is a `null` to drop.
fn drop_null_optionals(parameters: &Value, args: Arc<Value>) -> Arc<Value> {
    let Value::Object(map) = &*args else {
        return args;
    };
    if !map.values().any(Value::is_null) {
        return args;
    }
    let required = parameters
        .as_object()
        .map(crate::schema::required_names)
        .unwrap_or_default();
    let mut map = map.clone();
    map.retain(|key, value| !value.is_null() || required.contains(key));
    Arc::new(Value::Object(map))
}

/// Refuses too-deep arguments, dropping them without recursion when this is the last handle.
fn check_depth(args: Arc<Value>) -> Result<Arc<Value>, ToolFailure> {
    match depth_violation(&args, "") {
        None => Ok(args),
        Some(violation) => {
            if let Ok(value) = Arc::try_unwrap(args) {
                dismantle(value);
            }
            Err(invalid_args(&[violation]))
        }
    }
}

/// `true` when a `null` appears anywhere in `value` (iterative).
pub(super) fn contains_null(value: &Value) -> bool {
    crate::json::walk(value, |node, _| match node {
        Value::Null => ControlFlow::Break(()),
        _ => ControlFlow::Continue(()),
    })
    .is_break()
}

/// Rewrites floats with no fractional part (`1.0`) as integers, which JSON Schema 2020-12 counts as
/// integers and serde's integer types reject. Iterative.
fn integralize(value: &mut Value) {
    let mut stack = vec![value];
    while let Some(node) = stack.pop() {
        match node {
            Value::Number(number) if number.is_f64() => {
                let float = number.as_f64().unwrap_or(f64::NAN);
                if float.fract() == 0.0 && float.abs() < 9_007_199_254_740_992.0 {
                    // Within ±2^53 the conversion is exact.
                    *node = Value::from(float as i64);
                }
            }
            Value::Array(items) => stack.extend(items.iter_mut()),
            Value::Object(map) => stack.extend(map.values_mut()),
            _ => {}
        }
    }
}

/// A serde error the schema did not catch, named by the path where it happened
/// (`"n": invalid value: …`); the path uses serde's `a.b[0]` form, like the schema messages.
fn serde_violation<A: ToolArgs>(args: &Value, fallback: &serde_json::Error) -> String {
    let mut track = serde_path_to_error::Track::new();
    match A::deserialize_args(serde_path_to_error::Deserializer::new(args, &mut track)) {
        Err(err) => match track.path().to_string() {
            path if path != "." => format!("\"{path}\": {err}"),
            _ => fallback.to_string(),
        },
        Ok(_) => fallback.to_string(),
    }
}

/// The arguments as both dispatch paths (typed tools and builder-made ones) first take them: an
/// object (a non-object becomes `{}` when the tool `coerce_non_object`s, else it is refused),
/// no deeper than the validator walks, and without the `null`s strict-mode clients send for
/// absent optional properties. The pipeline has checked the depth before any hook saw the
/// arguments; [`ToolDefinition::dispatch`] is public and may be called outside it, so the check
/// is made again here.
pub(super) fn prepare_args(
    parameters: &Value,
    args: Arc<Value>,
    coerce_non_object: bool,
) -> Result<Arc<Value>, ToolFailure> {
    let args = if args.is_object() {
        args
    } else if coerce_non_object {
        Arc::new(Value::Object(serde_json::Map::new()))
    } else {
        return Err(invalid_args(
            &["\"arguments\" must be an object".to_owned()],
        ));
    };
    let args = check_depth(args)?;
    Ok(drop_null_optionals(parameters, args))
}

/// A typed tool's arguments, prepared ([`prepare_args`]) and read as `T::Args`, with the schema
/// constraints serde cannot see checked (`schema_checks`) and the tool's own constraints.
///
/// # Errors
/// `INVALID_ARGS` naming every violation.
pub(super) fn typed_args<T: Tool>(
    parameters: &Value,
    validator: Option<&SchemaValidator>,
    schema_checks: bool,
    args: Arc<Value>,
) -> Result<(Arc<Value>, T::Args), ToolFailure> {
    let args = prepare_args(parameters, args, false)?;
    let typed = match T::Args::deserialize_args(&*args) {
        Ok(typed) => typed,
        Err(serde_error) => {
            // Slow path: nested `null`s from a strict-mode client, or `1.0` for an integer (JSON
            // Schema counts it as one; serde does not), may be all that is wrong; otherwise
            // report every violation.
            let mut normalized = normalize_strict_arguments(parameters, Value::clone(&args));
            integralize(&mut normalized);
            match T::Args::deserialize_args(&normalized) {
                Ok(typed) => typed,
                Err(_) => {
                    let mut violations = match validator {
                        Some(validator) => validator.violations(&args, ""),
                        None => Vec::new(),
                    };
                    if violations.is_empty() {
                        violations.push(serde_violation::<T::Args>(&normalized, &serde_error));
                    }
                    return Err(invalid_args(&violations));
                }
            }
        }
    };
    if schema_checks
        && let Some(validator) = validator
        && !validator.is_valid(&args)
    {
        // Judged as serde read them: a nested `null` of an optional property is absent,
        // whichever constraint made this check run.
        let mut normalized = normalize_strict_arguments(parameters, Value::clone(&args));
        integralize(&mut normalized);
        let violations = validator.violations(&normalized, "");
        if !violations.is_empty() {
            return Err(invalid_args(&violations));
        }
    }
    let violations = T::check_constraints(&typed);
    if !violations.is_empty() {
        return Err(invalid_args(&violations));
    }
    Ok((args, typed))
}
