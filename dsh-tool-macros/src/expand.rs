//! Code generation from a checked model. Parsing and validation happen before; nothing here
//! reports an error.
//!
//! This module takes a `#[tool]` fn or a `#[toolbox]` block apart and puts the generated items
//! together: the arguments struct ([`args_struct`], its schema in [`args_schema`]), then the
//! tool struct and its `Tool` impl ([`tool_impl`]), and a toolbox's `tools()`.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, quote, quote_spanned};
use syn::{FnArg, Ident, ImplItem, ItemFn, ItemImpl, Signature};

use crate::ast::{Context, ToolFn, Toolbox, is_tool_attr};
use crate::attr;
use crate::check;
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::symbol::{ARG, ARGS, DOC};

// The paths are spelled out because `tests/expand.rs` compiles this file through `#[path]`,
// where children would be looked for beside it rather than in `expand/`.
#[path = "expand/args_schema.rs"]
pub(crate) mod args_schema;
#[path = "expand/args_struct.rs"]
pub(crate) mod args_struct;
#[path = "expand/tool_impl.rs"]
mod tool_impl;

use args_struct::expand_args_struct;
use tool_impl::{expand_tool_impl, expand_tool_struct};

/// What `#[toolbox]` leaves in place of a method's `#[tool(...)]`: the method is already
/// expanded, and keeping the attribute keeps the user's `use dsh_tools::tool` in use.
const TOOLBOX_MARKER: &str = "__dsh_toolbox_method";

/// `#[tool]` on a free fn: the fn itself, `<CamelName>Args` and `<CamelName>Tool`.
pub(crate) fn tool(args: TokenStream, item: TokenStream) -> TokenStream {
    if is_toolbox_marker(&args) {
        return item;
    }
    let item_fn: ItemFn = match syn::parse2(item.clone()) {
        Ok(item_fn) => item_fn,
        Err(_) => {
            return fallback::unparsed(
                item,
                "`#[tool]` goes on an `async fn`; for methods, put `#[toolbox]` on the `impl` block",
            );
        }
    };
    let cx = Ctxt::new();
    let attrs = attr::Tool::from_tokens(&cx, args);
    let model = ToolFn::from_syn(
        &cx,
        Context::Free,
        attrs,
        &item_fn.attrs,
        &item_fn.vis,
        &item_fn.sig,
    );
    check::check(&cx, &model);
    let mut emitted = item_fn.clone();
    strip_param_attrs(&mut emitted.sig);
    match cx.check() {
        Ok(()) => {
            let items = expand_tool(&model);
            quote!(#emitted #items)
        }
        Err(err) => fallback::tool(&model, emitted.into_token_stream(), err),
    }
}

/// `#[toolbox]` on an `impl` block: the block, one args struct and tool struct per `#[tool]`
/// method, and `tools()`.
pub(crate) fn toolbox(args: TokenStream, item: TokenStream) -> TokenStream {
    let item_impl: ItemImpl = match syn::parse2(item.clone()) {
        Ok(item_impl) => item_impl,
        Err(_) => {
            return fallback::unparsed(
                item,
                "`#[toolbox]` goes on an `impl` block whose methods are marked `#[tool]`",
            );
        }
    };
    let cx = Ctxt::new();
    if !args.is_empty() {
        cx.error_spanned_by(
            &args,
            "`#[toolbox]` takes no arguments; put options on each `#[tool]` method",
        );
    }
    let model = Toolbox::from_syn(&cx, &item_impl);
    check::check_toolbox(&cx, &model);
    let emitted = strip_toolbox(&item_impl).into_token_stream();
    match cx.check() {
        Ok(()) => {
            let items = model.tools.iter().map(expand_tool);
            let tools_fn = expand_tools_fn(&model);
            quote!(#emitted #(#items)* #tools_fn)
        }
        Err(err) => fallback::toolbox(&model, emitted, err),
    }
}

/// Removes the attributes only `#[tool]` understands (`#[arg]`, `#[args]`, parameter docs, which
/// rustc would reject) from a signature.
pub(crate) fn strip_param_attrs(sig: &mut Signature) {
    for input in &mut sig.inputs {
        if let FnArg::Typed(pat_type) = input {
            pat_type.attrs.retain(|attr| {
                let path = attr.path();
                !(path == DOC || path == ARG || path == ARGS)
            });
        }
    }
}

fn is_toolbox_marker(args: &TokenStream) -> bool {
    let mut tokens = args.clone().into_iter();
    matches!(
        (tokens.next(), tokens.next()),
        (Some(proc_macro2::TokenTree::Ident(ident)), None) if ident == TOOLBOX_MARKER
    )
}

/// The impl block with each method's `#[tool(...)]` reduced to the marker and parameter
/// attributes removed.
fn strip_toolbox(item_impl: &ItemImpl) -> ItemImpl {
    let mut item_impl = item_impl.clone();
    for item in &mut item_impl.items {
        let ImplItem::Fn(method) = item else { continue };
        // Duplicates were reported by the model; only the first `#[tool]` stays.
        let mut seen = false;
        method.attrs.retain(|attr| {
            let keep = !(seen && is_tool_attr(attr));
            seen |= is_tool_attr(attr);
            keep
        });
        let Some(attr) = method.attrs.iter_mut().find(|attr| is_tool_attr(attr)) else {
            continue;
        };
        let path = attr.path().clone();
        let marker = Ident::new(TOOLBOX_MARKER, Span::call_site());
        attr.meta = syn::parse_quote!(#path(#marker));
        strip_param_attrs(&mut method.sig);
    }
    item_impl
}

/// The arguments struct, the tool struct and its `Tool` impl for one tool fn.
fn expand_tool(tool: &ToolFn) -> TokenStream {
    let args_struct = expand_args_struct(tool);
    let tool_struct = expand_tool_struct(tool);
    let tool_impl = expand_tool_impl(tool);
    quote! {
        #args_struct
        #tool_struct
        #[doc(hidden)]
        const _: () = {
            #tool_impl
        };
    }
}

/// `Foo::tools(self: Arc<Self>) -> Vec<ToolDefinition>`.
fn expand_tools_fn(toolbox: &Toolbox) -> TokenStream {
    let item_impl = toolbox.original;
    let Some(first) = toolbox.tools.first() else {
        return TokenStream::new();
    };
    let krate = &first.krate;
    let self_ty = &item_impl.self_ty;
    let (impl_generics, _, where_clause) = item_impl.generics.split_for_impl();
    let names: Vec<&str> = toolbox
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect();
    let doc = format!(
        " The tools of this toolbox (`{}`), sharing this value; generated by `#[toolbox]`.",
        names.join("`, `")
    );
    let definitions = toolbox.tools.iter().map(|tool| {
        let tool_ident = &tool.tool_ident;
        quote! {
            #krate::__private::ToolDefinition::from_tool(
                #tool_ident(::std::sync::Arc::clone(&self)),
            )
        }
    });
    let span = Span::call_site();
    quote_spanned! {span=>
        impl #impl_generics #self_ty #where_clause {
            #[doc = #doc]
            pub fn tools(
                self: ::std::sync::Arc<Self>,
            ) -> ::std::vec::Vec<#krate::__private::ToolDefinition>
            where
                Self: ::core::marker::Send + ::core::marker::Sync + 'static,
            {
                ::std::vec![#(#definitions),*]
            }
        }
    }
}
