//! Output when the checks failed: the user's item (so direct calls keep compiling), every error,
//! and stub items under the generated names, so call sites report nothing beyond the real
//! mistakes.

use proc_macro2::{Span, TokenStream};
use quote::quote;

use crate::ast::{ToolFn, Toolbox};

/// The item did not parse as what the attribute expects: return it unchanged, plus the error.
pub(crate) fn unparsed(item: TokenStream, message: &str) -> TokenStream {
    let error = syn::Error::new(Span::call_site(), message).to_compile_error();
    quote!(#item #error)
}

/// A free `#[tool]` fn with errors.
pub(crate) fn tool(tool: &ToolFn, emitted: TokenStream, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    // A method under `#[tool]` without `#[toolbox]` sits inside an `impl`, where items cannot go.
    let stubs = tool.receiver.is_none().then(|| stubs(tool));
    quote!(#emitted #errors #stubs)
}

/// A `#[toolbox]` block with errors.
pub(crate) fn toolbox(toolbox: &Toolbox, emitted: TokenStream, errors: syn::Error) -> TokenStream {
    let errors = errors.to_compile_error();
    let stubs = toolbox.tools.iter().map(stubs);
    let item_impl = toolbox.original;
    // A trait impl may be for a foreign type, where an inherent `tools()` would be a new error.
    let tools_fn = match (&item_impl.trait_, toolbox.tools.first()) {
        (None, Some(first)) => {
            let krate = &first.krate;
            let self_ty = &item_impl.self_ty;
            let (impl_generics, _, where_clause) = item_impl.generics.split_for_impl();
            quote! {
                impl #impl_generics #self_ty #where_clause {
                    #[allow(missing_docs, dead_code)]
                    pub fn tools(
                        self: ::std::sync::Arc<Self>,
                    ) -> ::std::vec::Vec<#krate::__private::ToolDefinition> {
                        ::core::unreachable!()
                    }
                }
            }
        }
        _ => TokenStream::new(),
    };
    quote!(#emitted #errors #(#stubs)* #tools_fn)
}

/// `<CamelName>Args` and `<CamelName>Tool` with a `Tool` impl that is never run.
fn stubs(tool: &ToolFn) -> TokenStream {
    let krate = &tool.krate;
    let private = quote!(#krate::__private);
    let vis = tool.vis;
    let args_ident = &tool.args_ident;
    let tool_ident = &tool.tool_ident;
    let name = &tool.name;
    let args_struct = tool
        .args_struct_param()
        .is_none()
        .then(|| quote!(#[allow(missing_docs, dead_code)] #vis struct #args_ident {}));
    quote! {
        #args_struct
        #[allow(missing_docs, dead_code)]
        #vis struct #tool_ident;
        const _: () = {
            impl #private::Tool for #tool_ident {
                type Args = ();
                type Output = ();
                const NAME: &'static str = #name;
                const DESCRIPTION: &'static str = "";
                fn call(
                    &self,
                    _: (),
                    _: #private::ToolExec,
                ) -> impl ::core::future::Future<
                    Output = ::core::result::Result<(), #private::ToolError>,
                > + ::core::marker::Send {
                    async { ::core::unreachable!() }
                }
            }
        };
    }
}
