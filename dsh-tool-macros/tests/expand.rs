//! Expansion snapshots: the code `#[tool]` and `#[toolbox]` generate for representative inputs,
//! pretty-printed. A proc-macro crate exports only its macros, so the expansion modules are
//! compiled into this test directly and driven on `proc_macro2` tokens.

#![allow(dead_code)] // Items used by one entry point only.

#[path = "../src/ast.rs"]
mod ast;
#[path = "../src/attr.rs"]
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
                #[tool(render = Store::<String>::render_keys, deny_unknown)]
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
