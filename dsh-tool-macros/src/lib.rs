//! The `#[tool]` and `#[toolbox]` attributes of dsh-tools.
use proc_macro::TokenStream;

/// Turns an `async fn` into a tool.
#[proc_macro_attribute]
pub fn tool(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}

/// Turns the `#[tool]` methods of an `impl` block into tools.
#[proc_macro_attribute]
pub fn toolbox(_attr: TokenStream, item: TokenStream) -> TokenStream {
    item
}
