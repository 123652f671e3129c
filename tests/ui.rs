//! Compile-time behaviour of `#[tool]` and `#[toolbox]`: every compile-time diagnostic they emit
//! (`ui-tests/fail`, with the exact `.stderr` rustc prints on the pinned toolchain). The supported
//! signature shapes (`ui-tests/pass`) are modules of `tests/ui_pass.rs`, so trybuild only checks
//! (one `cargo check` for every case) and never links a binary.
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test ui`, then read the
//! diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("ui-tests/fail/*.rs");
}
