//! Every supported signature shape of `#[tool]` and `#[toolbox]` (`ui-tests/pass`): each case is
//! a module of this test, compiled with it and its `main` run. They are not trybuild cases: with
//! only `compile_fail` cases trybuild checks the failing cases in one `cargo check`, instead of
//! building and linking a binary per case (the compile-fail cases stay in `tests/ui.rs`).

#[path = "../ui-tests/pass/annotations.rs"]
mod annotations;

#[path = "../ui-tests/pass/args-struct.rs"]
mod args_struct;

#[path = "../ui-tests/pass/display-error.rs"]
mod display_error;

#[path = "../ui-tests/pass/free-fn.rs"]
mod free_fn;

#[path = "../ui-tests/pass/hooks.rs"]
mod hooks;

#[path = "../ui-tests/pass/include-str-doc.rs"]
mod include_str_doc;

#[path = "../ui-tests/pass/no-params.rs"]
mod no_params;

#[path = "../ui-tests/pass/plain-output.rs"]
mod plain_output;

#[path = "../ui-tests/pass/task.rs"]
mod task;

#[path = "../ui-tests/pass/tool-type.rs"]
mod tool_type;

#[path = "../ui-tests/pass/tool-type-plain.rs"]
mod tool_type_plain;

#[path = "../ui-tests/pass/toolbox-generic-where.rs"]
mod toolbox_generic_where;

#[path = "../ui-tests/pass/toolbox-method.rs"]
mod toolbox_method;

#[path = "../ui-tests/pass/unit-output.rs"]
mod unit_output;

#[test]
fn tool_type() {
    tool_type::main();
}

#[test]
fn tool_type_plain() {
    tool_type_plain::main();
}

#[test]
fn task() {
    task::main();
}

#[test]
fn annotations() {
    annotations::main();
}

#[test]
fn args_struct() {
    args_struct::main();
}

#[test]
fn display_error() {
    display_error::main();
}

#[test]
fn free_fn() {
    free_fn::main();
}

#[test]
fn hooks() {
    hooks::main();
}

#[test]
fn include_str_doc() {
    include_str_doc::main();
}

#[test]
fn no_params() {
    no_params::main();
}

#[test]
fn plain_output() {
    plain_output::main();
}

#[test]
fn toolbox_generic_where() {
    toolbox_generic_where::main();
}

#[test]
fn toolbox_method() {
    toolbox_method::main();
}

#[test]
fn unit_output() {
    unit_output::main();
}
