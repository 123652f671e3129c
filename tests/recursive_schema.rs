//! A recursive internally tagged enum (`#[serde(tag = "type")] enum Node { …, Group(Box<Node>) }`)
//! as a `#[tool]` parameter, inside an `#[args]` struct and as an output type never kills the
//! host (issue "what a tool author hits first"): its schema refers to itself with a `$ref`, and
//! validation, every dialect and both SDKs handle that `$ref` on a default 2 MiB thread stack.
//!
//! schemars 1.2 recurses without end on such a variant, which aborts the whole process; the types
//! here derive through `dsh_tools::schemars` (as the guide tells tool authors to), whose derive
//! helper refers to the pending type instead. Each check runs in a child process: an abort there is
//! a failed test, not a dead harness.

use std::process::Command;

use dsh_tools::__private::SchemaValidator;
use dsh_tools::dialect::Dialect;
use dsh_tools::schemars::JsonSchema;
use dsh_tools::sdk::{self, Language, ToolSpec};
use dsh_tools::serde::{Deserialize, Serialize};
use dsh_tools::{ToolDefinition, ToolExec, tool};
use serde_json::{Value, json};

const CHILD: &str = "DSH_RECURSIVE_SCHEMA_CHILD";

/// Runs `body` in a child process (this test binary, filtered to `test_name`) on a thread with
/// the default 2 MiB stack; fails when the child dies or its `body` panics.
fn in_child_process(test_name: &str, body: fn()) {
    if std::env::var_os(CHILD).is_some() {
        std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(body)
            .unwrap()
            .join()
            .expect("the check failed");
        return;
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([test_name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the child process failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    // The filter matched the test itself, so the body really ran.
    assert!(stdout.contains("1 passed"), "{stdout}");
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(crate = "dsh_tools::serde")]
#[schemars(crate = "dsh_tools::schemars")]
struct Leaf {
    name: String,
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(crate = "dsh_tools::serde")]
#[schemars(crate = "dsh_tools::schemars")]
#[serde(tag = "type")]
enum Node {
    Leaf(Leaf),
    Group(Box<Node>),
}

/// Count the leaves.
#[tool]
async fn count(node: Node) -> u32 {
    match node {
        Node::Leaf(_) => 1,
        Node::Group(_) => 0,
    }
}

#[derive(Deserialize, Serialize, JsonSchema)]
#[serde(crate = "dsh_tools::serde")]
#[schemars(crate = "dsh_tools::schemars")]
struct TreeArgs {
    root: Node,
}

/// Walk a tree.
#[tool]
async fn walk(#[args] args: TreeArgs) -> u32 {
    match args.root {
        Node::Leaf(_) => 1,
        Node::Group(_) => 0,
    }
}

/// The `Group` branch of `Node`'s `oneOf` in `$defs`: a `$ref` back to `Node` with the tag.
fn group_branch(schema: &Value) -> &Value {
    let branches = schema["$defs"]["Node"]["oneOf"].as_array().unwrap();
    branches
        .iter()
        .find(|branch| branch["properties"]["type"]["const"] == "Group")
        .unwrap_or_else(|| panic!("no Group branch in {schema}"))
}

fn run<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(future)
}

/// Every dialect transforms the recursive schema or refuses it with a typed error; both SDKs
/// render it, naming `type_name` (the cycle itself, an intersection with itself that neither
/// type checker accepts, is typed `unknown`).
fn dialects_and_sdks_handle(name: &str, parameters: &Value, output: &Value, type_name: &str) {
    for dialect in Dialect::ALL {
        match dialect.transform(parameters) {
            Ok(transformed) => assert!(transformed.is_object(), "{dialect:?}"),
            // Gemini has no `$ref`: recursion is its documented refusal.
            Err(err) => assert_eq!(dialect, Dialect::Gemini, "{err}"),
        }
    }
    let tools = [ToolSpec::new(name, "d", parameters.clone(), output.clone())];
    for language in [Language::TypeScript, Language::Python] {
        let text = sdk::render(language, &tools);
        assert!(text.contains(type_name), "{language:?}:\n{text}");
    }
}

fn parameter_body() {
    let definition = ToolDefinition::from_tool(CountTool);
    let parameters = definition.parameters().clone();
    assert_eq!(
        parameters["properties"]["node"],
        json!({"$ref": "#/$defs/Node"})
    );
    assert_eq!(group_branch(&parameters)["$ref"], "#/$defs/Node");
    let leaf = json!({"node": {"type": "Leaf", "name": "a"}});
    let dispatched = run(definition.dispatch(leaf, ToolExec::detached("count"))).unwrap();
    assert_eq!(dispatched.value, json!(1));
    // serde consumes the tag, so the inner `Node` of a `Group` can never be read: a clear
    // `INVALID_ARGS`, not a hang on the `$ref` cycle.
    let group = json!({"node": {"type": "Group", "name": "a"}});
    let failure = run(definition.dispatch(group, ToolExec::detached("count"))).unwrap_err();
    assert_eq!(failure.info.unwrap().code, "INVALID_ARGS");
    // The full validator meets the `$ref` cycle on the same instance and terminates (the value
    // is refused by serde above); the other branch is still checked.
    let validator = SchemaValidator::new(&parameters).unwrap();
    let _ = validator.violations(&json!({"node": {"type": "Group"}}), "");
    assert!(validator.is_valid(&json!({"node": {"type": "Leaf", "name": "a"}})));
    assert!(!validator.is_valid(&json!({"node": {"type": "Leaf"}})));
    dialects_and_sdks_handle("count", &parameters, &json!({"type": "integer"}), "Node");
}

/// Issue 17 "Recursive internally tagged enums abort the process", as a `#[tool]` parameter.
#[test]
fn recursive_tagged_enum_parameter_is_a_ref_ref_1_10() {
    in_child_process(
        "recursive_tagged_enum_parameter_is_a_ref_ref_1_10",
        parameter_body,
    );
}

fn args_struct_body() {
    let definition = ToolDefinition::from_tool(WalkTool);
    let parameters = definition.parameters().clone();
    assert_eq!(
        parameters["properties"]["root"],
        json!({"$ref": "#/$defs/Node"})
    );
    assert_eq!(group_branch(&parameters)["$ref"], "#/$defs/Node");
    let leaf = json!({"root": {"type": "Leaf", "name": "a"}});
    let dispatched = run(definition.dispatch(leaf, ToolExec::detached("walk"))).unwrap();
    assert_eq!(dispatched.value, json!(1));
    dialects_and_sdks_handle("walk", &parameters, &json!({"type": "integer"}), "Node");
}

/// The same enum inside an `#[args]` struct.
#[test]
fn recursive_tagged_enum_in_args_struct_is_a_ref_ref_1_10() {
    in_child_process(
        "recursive_tagged_enum_in_args_struct_is_a_ref_ref_1_10",
        args_struct_body,
    );
}

fn output_body() {
    // serde's derived `Serialize` for such an enum cannot be written to JSON (rustc reaches its
    // recursion limit, serde-rs/serde#3100), so `-> Node` does not compile; the output schema is
    // checked through the function `#[tool]` calls for an output type.
    let output = dsh_tools::__private::output_schema::<Node>();
    let branches = output["oneOf"].as_array().unwrap();
    let group = branches
        .iter()
        .find(|branch| branch["properties"]["type"]["const"] == "Group")
        .unwrap();
    // The root refers to itself as `#`.
    assert_eq!(group["$ref"], "#");
    let validator = SchemaValidator::new(&output).unwrap();
    let _ = validator.violations(&json!({"type": "Group"}), "");
    assert!(!validator.is_valid(&json!({"type": "Leaf"})));
    dialects_and_sdks_handle(
        "make",
        &json!({"type": "object", "properties": {}}),
        &output,
        "Leaf",
    );
}

/// The same enum as an output type (serialize view).
#[test]
fn recursive_tagged_enum_output_is_a_ref_ref_1_10() {
    in_child_process(
        "recursive_tagged_enum_output_is_a_ref_ref_1_10",
        output_body,
    );
}
