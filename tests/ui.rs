//! Compile-time behaviour of `#[tool]` and `#[toolbox]`: every diagnostic of SPEC §1 "Compile-time
//! checks" (`ui-tests/fail`, with the exact `.stderr` rustc prints on the pinned toolchain) and
//! every supported signature shape (`ui-tests/pass`, compiled and run).
//!
//! Regenerate the `.stderr` files with `TRYBUILD=overwrite cargo test --test ui`, then read the
//! diff.

#[test]
fn ui() {
    let cases = trybuild::TestCases::new();
    cases.pass("ui-tests/pass/*.rs");
    cases.compile_fail("ui-tests/fail/*.rs");
}
