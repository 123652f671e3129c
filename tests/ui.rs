//! Compile-time behaviour of `#[tool]` and `#[toolbox]`: every compile-time diagnostic they emit
//! (`ui-tests/fail`, with the exact `.stderr` rustc prints on the pinned toolchain). The supported
//! signature shapes (`ui-tests/pass`) are modules of `tests/ui_pass.rs`, so trybuild only checks
//! (one `cargo check` for every case) and never links a binary.
//!
//! rustc names a type by its shortest unambiguous path, and which paths are ambiguous depends on
//! the crates linked: with the `rig` and `otel` features, `Value`, `ToolResult` and `ToolOutput`
//! have namesakes in other crates and print with their full paths. The `.stderr` files are those
//! of the README's test command (`--all-features`); under other feature sets the test says it
//! skipped.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --all-features --test ui`,
//! then read the diff.

#[test]
fn ui() {
    if !cfg!(all(feature = "rig", feature = "otel")) {
        eprintln!(
            "SKIPPED: the expected diagnostics are those of `cargo test --all-features` (the \
             crates linked decide how rustc names a type)"
        );
        return;
    }
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui-tests/fail/*.rs");
}
