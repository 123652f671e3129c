//! Pins each dialect's output for schemas derived with schemars from representative argument
//! structs (the schema `#[tool]` derives). Review changes with `cargo insta review`.

use std::collections::HashMap;

use dsh_tools::__private::parameters_schema;
use dsh_tools::dialect::Dialect;
use schemars::JsonSchema;
use serde_json::{Map, Value};

/// Every dialect's output (or error text) for one parameters schema, keyed by dialect name.
fn all_dialects(schema: &Value) -> Value {
    let mut out = Map::new();
    out.insert("input".to_owned(), schema.clone());
    for dialect in Dialect::ALL {
        let result = match dialect.transform(schema) {
            Ok(value) => value,
            Err(error) => Value::String(format!("error: {error}")),
        };
        out.insert(dialect.to_string(), result);
    }
    Value::Object(out)
}

/// A postal address.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Address {
    /// Street and number.
    street: String,
    /// City name.
    city: String,
}

/// Arguments with a nested struct.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct CreateContact {
    /// Full name.
    name: String,
    /// Where the contact lives.
    address: Address,
}

/// Arguments with optional fields.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Search {
    /// Text to look for.
    query: String,
    /// Most results to return.
    limit: Option<u32>,
    /// Only results with these tags.
    tags: Option<Vec<String>>,
    /// Where to start.
    after: Option<Address>,
}

/// How thorough a scan is.
#[derive(JsonSchema)]
#[allow(dead_code)]
enum Depth {
    /// Top level only.
    Shallow,
    /// Everything.
    Full,
}

/// A shape to draw.
#[derive(JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[allow(dead_code)]
enum Shape {
    /// A circle.
    Circle {
        /// Radius in pixels.
        radius: f64,
    },
    /// A rectangle.
    Rect {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
    },
}

/// Arguments with enums.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Scan {
    /// How deep to scan.
    depth: Depth,
    /// What to draw.
    shape: Shape,
}

/// Arguments with a list of structs.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Batch {
    /// Addresses to check.
    items: Vec<Address>,
}

/// Arguments with a map.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Label {
    /// Label values by key.
    labels: HashMap<String, u32>,
}

/// A tree node.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Tree {
    /// Node value.
    value: i64,
    /// Child nodes.
    children: Vec<Tree>,
}

/// Arguments with a recursive type.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct Walk {
    /// The tree to walk.
    root: Tree,
}

/// Arguments of a tool without parameters.
#[derive(JsonSchema)]
struct NoParams {}

#[test]
fn nested_struct() {
    insta::assert_json_snapshot!(all_dialects(&parameters_schema::<CreateContact>(false)));
}

#[test]
fn option_fields() {
    insta::assert_json_snapshot!(all_dialects(&parameters_schema::<Search>(false)));
}

#[test]
fn enums() {
    insta::assert_json_snapshot!(all_dialects(&parameters_schema::<Scan>(false)));
}

#[test]
fn vec_of_structs() {
    insta::assert_json_snapshot!(all_dialects(&parameters_schema::<Batch>(true)));
}

#[test]
fn hash_map() {
    insta::assert_json_snapshot!(all_dialects(&parameters_schema::<Label>(false)));
}

#[test]
fn recursive_tree() {
    insta::assert_json_snapshot!(all_dialects(&parameters_schema::<Walk>(false)));
}

#[test]
fn no_params() {
    insta::assert_json_snapshot!(all_dialects(&parameters_schema::<NoParams>(false)));
}
