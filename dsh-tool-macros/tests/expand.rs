//! Expansion snapshots: the code `#[tool]` and `#[toolbox]` generate for representative inputs,
//! pretty-printed. A proc-macro crate exports only its macros, so the expansion modules are
//! compiled into this test directly and driven on `proc_macro2` tokens.

#![allow(dead_code)] // Items used by one entry point only.

#[path = "../src/ast.rs"]
mod ast;
#[path = "../src/attr/mod.rs"]
mod attr;
#[path = "../src/check.rs"]
mod check;
#[path = "../src/ctxt.rs"]
mod ctxt;
#[path = "../src/expand.rs"]
mod expand;
#[path = "../src/fallback.rs"]
mod fallback;
#[path = "../src/symbol.rs"]
mod symbol;

use proc_macro2::TokenStream;
use quote::quote;

fn pretty(tokens: TokenStream) -> String {
    match syn::parse2::<syn::File>(tokens.clone()) {
        Ok(file) => prettyplease::unparse(&file),
        Err(err) => panic!("expansion is not a valid file ({err}):\n{tokens}"),
    }
}

#[test]
fn free_fn() {
    let expanded = expand::tool(
        quote!(concurrency_safe, timeout_ms = 5_000),
        quote! {
            /// Read a UTF-8 text file and return a window of its lines.
            pub async fn read_file(
                /// Absolute path of the file.
                #[arg(length(min = 1), pattern = "^/")]
                path: String,
                /// First line to return, 1-based.
                #[arg(default = 1, range(min = 1))]
                offset: u64,
                #[arg(rename = "maxLines")]
                limit: Option<u32>,
                exec: &ToolExec,
            ) -> Result<String, ToolError> {
                Ok(path)
            }
        },
    );
    insta::assert_snapshot!(pretty(expanded));
}

#[test]
fn generic_toolbox() {
    let expanded = expand::toolbox(
        TokenStream::new(),
        quote! {
            impl<K: Clone> Store<K> where K: Display {
                /// List keys.
                #[tool(render = Store::<String>::render_keys, allow_unknown)]
                pub async fn keys(&self, prefix: String) -> Vec<String> {
                    Vec::new()
                }
            }
        },
    );
    insta::assert_snapshot!(pretty(expanded));
}

#[test]
fn errors_keep_the_fn_and_emit_stubs() {
    let expanded = expand::tool(
        quote!(name = "run_code", timeout_ms = 0),
        quote! {
            fn read(#[arg(default = 1)] limit: Option<u32>) -> u32 { 0 }
        },
    );
    insta::assert_snapshot!(pretty(expanded));
}

/// Malformed input of every kind yields tokens carrying `compile_error!`, never a panic.
#[test]
fn hostile_input_gives_errors_not_panics() {
    let items = [
        quote!(),
        quote!(
            struct S;
        ),
        quote!(
            async fn f(#[arg] a: u32) {}
        ),
        quote!(
            async fn f(#[arg(range(min = 1e999999))] a: f64) {}
        ),
        quote!(
            async fn f(#[arg(length(max = 99999999999999999999999999999))] a: String) {}
        ),
        quote!(
            async fn f(#[arg(range(min = -))] a: i32) {}
        ),
        quote!(
            async fn f(self: Box<Self>, ...) {}
        ),
        quote!(
            async fn r#type(r#type: String, r#async: u8) {}
        ),
        quote!(
            async fn __(_a: u8, mut b: u8, ref c: u8, d @ 1..=2: u8) {}
        ),
    ];
    let args = [
        quote!(),
        quote!(timeout_ms = 340282366920938463463374607431768211456),
        quote!(timeout_ms = 18446744073709551616),
        quote!(name = "", description = ""),
        quote!(crate = "not a path"),
        quote!(= = =),
        quote!(name = "é"),
    ];
    for item in &items {
        for arg in &args {
            // None of these items has a description, so each one is an error.
            let out = expand::tool(arg.clone(), item.clone()).to_string();
            assert!(
                out.contains("compile_error"),
                "no error for #[tool({arg})] {item}: {out}"
            );
        }
        let out = expand::toolbox(quote!(), quote!(impl S { #[tool] #item })).to_string();
        assert!(
            out.contains("compile_error"),
            "no error for toolbox {item}: {out}"
        );
    }
}
