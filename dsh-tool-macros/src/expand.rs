//! Code generation from a checked model. Parsing and validation happen before; nothing here
//! reports an error.

use proc_macro2::{Literal, Span, TokenStream};
use quote::{ToTokens, format_ident, quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{FnArg, Ident, ImplItem, ItemFn, ItemImpl, Signature};

use crate::ast::{Context, Output, ParamKind, ToolFn, Toolbox, is_tool_attr, result_type_arg};
use crate::attr;
use crate::check;
use crate::ctxt::Ctxt;
use crate::fallback;
use crate::symbol::{ARG, ARGS, DOC};

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

fn expand_args_struct(tool: &ToolFn) -> TokenStream {
    if tool.args_struct_param().is_some() {
        return TokenStream::new();
    }
    let vis = tool.vis;
    let args_ident = &tool.args_ident;
    let doc = format!(
        " Arguments of the `{}` tool, generated by `#[tool]`.",
        tool.name
    );
    let mut defaults = Vec::new();
    let mut fields = Vec::new();
    for param in tool.arg_params() {
        let Some(ident) = param.ident else { continue };
        let ty = param.ty;
        let docs = &param.attrs.docs;
        if let Some((_, expr)) = &param.attrs.default {
            let default_fn = format_ident!("__dsh_default_{}", ident.unraw());
            defaults.push(quote_spanned! {expr.span()=>
                fn #default_fn() -> #ty {
                    #expr
                }
            });
        }
        // The doc comment documents the field and describes the property; an undocumented
        // parameter stays undocumented rather than tripping `missing_docs` in the user's crate.
        let allow = docs.is_empty().then(|| quote!(#[allow(missing_docs)]));
        let field = quote_spanned!(ty.span()=> pub #ident: #ty,);
        fields.push(quote! {
            #(#docs)*
            #allow
            #field
        });
    }
    let defaults_impl = (!defaults.is_empty()).then(|| {
        quote! {
            impl #args_ident {
                #(#defaults)*
            }
        }
    });
    let reader = expand_args_reader(tool);
    let schema = expand_args_schema(tool, doc.trim_start());

    quote! {
        #[doc = #doc]
        #vis struct #args_ident {
            #(#fields)*
        }
        #[doc(hidden)]
        const _: () = {
            #defaults_impl
            #reader
            #schema
        };
    }
}

/// `JsonSchema` for the arguments struct, through the runtime's `__private::args_schema`: one
/// `ArgProperty` per field, the schema schemars' derive would write for the struct (closed
/// unless `allow_unknown`, doc comments as title and description, `required` for the fields
/// without a default, the `#[arg]` constraints and defaults), without a derive per tool.
fn expand_args_schema(tool: &ToolFn, doc: &str) -> TokenStream {
    let krate = &tool.krate;
    let private = quote!(#krate::__private);
    let schemars = quote!(#private::schemars);
    let args_ident = &tool.args_ident;
    let struct_name = args_ident.to_string();
    let deny = tool.attrs.allow_unknown.is_none();
    let properties = tool.arg_params().filter_map(|param| {
        let ident = param.ident?;
        let (ty, wire) = (param.ty, &param.wire_name);
        let optional = if param.attrs.default.is_some() {
            quote!(WhenDeserializing)
        } else if param.is_option {
            quote!(Always)
        } else {
            quote!(Never)
        };
        let some_or_none = |value: Option<TokenStream>| match value {
            Some(value) => quote!(::core::option::Option::Some(#value)),
            None => quote!(::core::option::Option::None),
        };
        let doc = some_or_none(doc_string(&param.attrs.docs));
        let description = some_or_none(
            param
                .attrs
                .description
                .as_ref()
                .map(ToTokens::to_token_stream),
        );
        let mutate = some_or_none(expand_schema_mutators(tool, param, ident));
        Some(quote! {
            #private::ArgProperty {
                name: #wire,
                optional: #private::Optional::#optional,
                doc: #doc,
                description: #description,
                schema: <#ty as #private::ToolArg>::arg_schema,
                mutate: #mutate,
            }
        })
    });
    quote! {
        impl #schemars::JsonSchema for #args_ident {
            fn schema_name() -> #private::std::borrow::Cow<'static, str> {
                #private::std::borrow::Cow::Borrowed(#struct_name)
            }
            fn schema_id() -> #private::std::borrow::Cow<'static, str> {
                #private::std::borrow::Cow::Borrowed(
                    ::core::concat!(::core::module_path!(), "::", #struct_name),
                )
            }
            fn json_schema(
                __dsh_generator: &mut #schemars::SchemaGenerator,
            ) -> #schemars::Schema {
                #private::args_schema(__dsh_generator, #doc, #deny, &[#(#properties),*])
            }
        }
    }
}

/// A doc comment's lines as schemars joins them (`\n` between lines, one leading space off
/// each): one literal when every line is one, else a `concat!`.
pub(crate) fn doc_string(docs: &[syn::Attribute]) -> Option<TokenStream> {
    let lines: Vec<&syn::Expr> = docs
        .iter()
        .filter_map(|attr| attr.meta.require_name_value().ok())
        .map(|line| &line.value)
        .collect();
    if lines.is_empty() {
        return None;
    }
    let text = |line: &syn::Expr| match line {
        syn::Expr::Lit(syn::ExprLit {
            lit: syn::Lit::Str(text),
            ..
        }) => {
            let text = text.value();
            Some(text.strip_prefix(' ').unwrap_or(&text).to_owned())
        }
        _ => None,
    };
    if let Some(texts) = lines
        .iter()
        .map(|line| text(line))
        .collect::<Option<Vec<_>>>()
    {
        let joined = texts.join("\n");
        return Some(quote!(#joined));
    }
    let mut tokens = TokenStream::new();
    for (i, line) in lines.iter().enumerate() {
        if i > 0 {
            tokens.extend(quote!("\n",));
        }
        match text(line) {
            Some(text) => tokens.extend(quote!(#text,)),
            None => tokens.extend(quote!(#line,)),
        }
    }
    Some(quote!(::core::concat!(#tokens)))
}

/// The `#[arg]` constraints (as schemars' `length`, `range` and `regex` write them) and the
/// default value, applied to one property's schema.
fn expand_schema_mutators(
    tool: &ToolFn,
    param: &crate::ast::Param<'_>,
    ident: &Ident,
) -> Option<TokenStream> {
    let krate = &tool.krate;
    let schemars = quote!(#krate::__private::schemars);
    let insert = quote!(#schemars::_private::insert_validation_property);
    let mut steps = Vec::new();
    let mut bounds = |bounds: &attr::Bounds, kind: &str, min: &str, max: &str| {
        if let Some((expr, _)) = &bounds.min {
            steps.push(quote!(#insert(__dsh_schema, #kind, #min, #expr);));
        }
        if let Some((expr, _)) = &bounds.max {
            steps.push(quote!(#insert(__dsh_schema, #kind, #max, #expr);));
        }
    };
    if let Some(length) = &param.attrs.length {
        bounds(length, "string", "minLength", "maxLength");
        bounds(length, "array", "minItems", "maxItems");
    }
    if let Some(range) = &param.attrs.range {
        bounds(range, "number", "minimum", "maximum");
    }
    if let Some(pattern) = &param.attrs.pattern {
        steps.push(quote!(#insert(__dsh_schema, "string", "pattern", (#pattern).to_string());));
    }
    if param.attrs.default.is_some() {
        let args_ident = &tool.args_ident;
        let default_fn = format_ident!("__dsh_default_{}", ident.unraw());
        // schemars writes the default when the type can be serialized (autoref probe).
        steps.push(quote! {
            #[allow(unused_imports)]
            use #schemars::_private::{MaybeSerializeWrapper, NoSerialize as _};
            if let ::core::option::Option::Some(__dsh_default) =
                MaybeSerializeWrapper(#args_ident::#default_fn()).maybe_to_value()
            {
                __dsh_schema.insert("default".into(), __dsh_default);
            }
        });
    }
    (!steps.is_empty()).then(|| {
        quote! {
            |__dsh_schema: &mut #schemars::Schema| {
                #(#steps)*
            }
        }
    })
}

/// `Deserialize` for the arguments struct, through the runtime's one map reader
/// (`__private::deserialize_args`): the tool adds only its field table and a `match` over its
/// fields, where serde's derive would add a key enum, two visitors and a wrapper per field.
fn expand_args_reader(tool: &ToolFn) -> TokenStream {
    let krate = &tool.krate;
    let private = quote!(#krate::__private);
    let args_ident = &tool.args_ident;
    let struct_name = args_ident.to_string();
    let deny = tool.attrs.allow_unknown.is_none();
    let params: Vec<_> = tool
        .arg_params()
        .filter_map(|param| param.ident.map(|ident| (param, ident)))
        .collect();
    let wires: Vec<&str> = params
        .iter()
        .map(|(param, _)| param.wire_name.as_str())
        .collect();
    let tys: Vec<&syn::Type> = params.iter().map(|(param, _)| param.ty).collect();
    // No parameters: an empty body, as `()` alone would be an unneeded unit to clippy.
    let slots = if params.is_empty() {
        TokenStream::new()
    } else {
        let nones = params.iter().map(|_| quote!(::core::option::Option::None));
        quote!((#(#nones,)*))
    };
    let reads = params.iter().enumerate().map(|(i, (param, _))| {
        let slot = syn::Index::from(i);
        let (ty, wire) = (param.ty, &param.wire_name);
        quote! {
            #i => <#ty as #private::ToolArg>::read_arg(__dsh_source, &mut __dsh_slots.#slot, #wire),
        }
    });
    let values = params.iter().enumerate().map(|(i, (param, ident))| {
        let slot = syn::Index::from(i);
        let wire = &param.wire_name;
        let value = match &param.attrs.default {
            Some(_) => {
                let default_fn = format_ident!("__dsh_default_{}", ident.unraw());
                quote!(__dsh_slots.#slot.unwrap_or_else(Self::#default_fn))
            }
            None if param.is_option => quote!(__dsh_slots.#slot.unwrap_or_default()),
            None => quote!(#private::required(__dsh_slots.#slot, #wire)?),
        };
        quote!(#ident: #value)
    });
    let fields = ArgsFields {
        ident: args_ident,
        serde: quote!(#private::serde),
        private: private.clone(),
        name: &struct_name,
        wires: &wires,
        deny,
        tys: &tys,
        slots,
        reads: quote!(#(#reads)*),
        values: quote!(#(#values),*),
    };
    args_struct_impls(fields, &quote!(), &quote!())
}

/// What a struct read through `ArgsStruct` names: the struct, the paths of the runtime's
/// `__private` and of serde, its name, its fields' wire names and types, whether it refuses
/// unknown keys, and the generated slots, per-field reads and finished field values.
pub(crate) struct ArgsFields<'a, W: quote::ToTokens> {
    pub(crate) ident: &'a syn::Ident,
    pub(crate) private: TokenStream,
    pub(crate) serde: TokenStream,
    pub(crate) name: &'a str,
    pub(crate) wires: &'a [W],
    pub(crate) deny: bool,
    pub(crate) tys: &'a [&'a syn::Type],
    pub(crate) slots: TokenStream,
    pub(crate) reads: TokenStream,
    pub(crate) values: TokenStream,
}

/// The `Deserialize` and `ArgsStruct` impls that read `ident` through the runtime's
/// `deserialize_args`: one shape for a tool's arguments struct and a plain `#[tool_type]`
/// struct. `attr` goes before each impl and `extra` into the `ArgsStruct` impl.
pub(crate) fn args_struct_impls<W: quote::ToTokens>(
    fields: ArgsFields<'_, W>,
    attr: &TokenStream,
    extra: &TokenStream,
) -> TokenStream {
    let ArgsFields {
        ident,
        private,
        serde,
        name,
        wires,
        deny,
        tys,
        slots,
        reads,
        values,
    } = fields;
    quote! {
        #attr
        impl<'de> #serde::Deserialize<'de> for #ident {
            fn deserialize<__D: #serde::Deserializer<'de>>(
                __dsh_deserializer: __D,
            ) -> ::core::result::Result<Self, __D::Error> {
                #private::deserialize_args(__dsh_deserializer)
            }
        }
        #attr
        impl #private::ArgsStruct for #ident {
            const STRUCT: &'static str = #name;
            const FIELDS: &'static [&'static str] = &[#(#wires),*];
            const DENY_UNKNOWN: bool = #deny;
            #extra
            type Slots = (#(::core::option::Option<#tys>,)*);

            fn slots() -> Self::Slots {
                #slots
            }

            fn read<'de, __S: #private::FieldSource<'de>>(
                __dsh_slots: &mut Self::Slots,
                __dsh_index: usize,
                __dsh_source: &mut __S,
            ) -> ::core::result::Result<(), __S::Error> {
                match __dsh_index {
                    #reads
                    _ => ::core::result::Result::Ok(()),
                }
            }

            fn finish<__E: #serde::de::Error>(
                __dsh_slots: Self::Slots,
            ) -> ::core::result::Result<Self, __E> {
                ::core::result::Result::Ok(Self { #values })
            }
        }
    }
}

fn expand_tool_struct(tool: &ToolFn) -> TokenStream {
    let vis = tool.vis;
    let tool_ident = &tool.tool_ident;
    match tool.context {
        Context::Free => {
            let doc = format!(
                " The `{}` tool, generated by `#[tool]`: register it with `ToolDefinition::from_tool({tool_ident})`.",
                tool.name
            );
            quote! {
                #[doc = #doc]
                #[derive(::core::clone::Clone, ::core::marker::Copy, ::core::fmt::Debug, ::core::default::Default)]
                #vis struct #tool_ident;
            }
        }
        Context::Method(item_impl) => {
            let doc = format!(
                " The `{}` tool of a toolbox, generated by `#[tool]`; `tools()` builds it.",
                tool.name
            );
            let self_ty = &item_impl.self_ty;
            let (impl_generics, _, where_clause) = item_impl.generics.split_for_impl();
            quote! {
                #[doc = #doc]
                #vis struct #tool_ident #impl_generics (pub ::std::sync::Arc<#self_ty>) #where_clause;
            }
        }
    }
}

fn expand_tool_impl(tool: &ToolFn) -> TokenStream {
    let krate = &tool.krate;
    let private = quote!(#krate::__private);
    let tool_ident = &tool.tool_ident;
    let name = &tool.name;
    let description = tool.description_tokens();

    let (impl_generics, ty_generics, where_clause) = match tool.context {
        Context::Free => (quote!(), quote!(), quote!()),
        Context::Method(item_impl) => {
            let self_ty = &item_impl.self_ty;
            let (impl_generics, ty_generics, _) = item_impl.generics.split_for_impl();
            let mut where_clause = item_impl
                .generics
                .where_clause
                .clone()
                .unwrap_or_else(|| syn::parse_quote!(where));
            where_clause.predicates.push(syn::parse_quote!(
                #self_ty: ::core::marker::Send + ::core::marker::Sync + 'static
            ));
            (
                impl_generics.to_token_stream(),
                ty_generics.to_token_stream(),
                where_clause.to_token_stream(),
            )
        }
    };

    let args_ty = match tool.args_struct_param() {
        Some(param) => param.ty.to_token_stream(),
        None => tool.args_ident.to_token_stream(),
    };
    let output_ty = match tool.output {
        Output::Unit => quote!(()),
        Output::Plain(ty) => ty.to_token_stream(),
        // Spanned on `T` of `Result<T, E>`, where the output assertion points.
        Output::Result(ty) => {
            let span = result_type_arg(ty, 0).map_or_else(|| ty.span(), Spanned::span);
            quote_spanned!(span=> <#ty as #private::IntoToolResult>::Ok)
        }
    };

    // Type checks happen where the types are used (the arguments struct's `ToolArg` calls and
    // the `Tool` impl's `ToolArgs`/`ToolOutput` bounds), spanned on the user's types.
    let mut exec_conversions = Vec::new();
    for param in &tool.params {
        // Converting through the trait (rather than passing the runtime's `ToolExec`) makes a
        // look-alike type fail once, with the trait's note, instead of also as a mismatch.
        if let ParamKind::Exec { ty, .. } = param.kind {
            exec_conversions.push(quote_spanned! {ty.span()=>
                let __dsh_exec = <#ty as #private::IsToolExec>::from_exec(__dsh_exec);
            });
        }
    }
    // `T` of `Result<T, E>` carries the caret, not `Result`; a `Result` without type arguments is
    // reported by `IntoToolResult` alone.
    if let Output::Result(ty) = tool.output
        && result_type_arg(ty, 0).is_none()
    {
        // Stops the body of `call` from reporting the same type again.
        exec_conversions.push(quote_spanned! {ty.span()=>
            let _: ::core::marker::PhantomData<<#ty as #private::IntoToolResult>::Ok> =
                ::core::marker::PhantomData;
        });
    }
    // Bind each argument field to a `__dsh_` local so user names cannot clash with ours.
    let mut destructure = Vec::new();
    let mut call_args = Vec::new();
    for (i, param) in tool.params.iter().enumerate() {
        match param.kind {
            ParamKind::Arg => {
                let local = format_ident!("__dsh_a{}", i);
                if let Some(ident) = param.ident {
                    destructure.push(quote!(#ident: #local));
                }
                call_args.push(local.into_token_stream());
            }
            ParamKind::ArgsStruct => call_args.push(quote!(__dsh_args)),
            ParamKind::Exec { by_ref: true, .. } => call_args.push(quote!(&__dsh_exec)),
            ParamKind::Exec { by_ref: false, .. } => call_args.push(quote!(__dsh_exec)),
        }
    }
    let unpack = tool
        .args_struct_param()
        .is_none()
        .then(|| quote!(let #args_ty { #(#destructure),* } = __dsh_args;));
    let fn_ident = &tool.sig.ident;
    let call = match tool.context {
        Context::Free => quote!(#fn_ident(#(#call_args),*).await),
        Context::Method(_) => quote!(self.0.#fn_ident(#(#call_args),*).await),
    };
    let body = match tool.output {
        Output::Unit => quote! {
            #call;
            ::core::result::Result::Ok(())
        },
        Output::Plain(_) => quote!(::core::result::Result::Ok(#call)),
        // Spanned like `type Output`, so a non-`Result` type is reported once, on the type; the
        // conversion is spanned on `E`, where an error type that cannot convert is reported.
        Output::Result(ty) => {
            let span = result_type_arg(ty, 1).map_or_else(|| ty.span(), Spanned::span);
            let convert = quote_spanned! {span=>
                (&&#private::ErrorProbe::<<#ty as #private::IntoToolResult>::Err>::new())
                    .tool_error(__dsh_err)
            };
            quote_spanned! {ty.span()=>
                match <#ty as #private::IntoToolResult>::into_result(#call) {
                    ::core::result::Result::Ok(__dsh_ok) => ::core::result::Result::Ok(__dsh_ok),
                    ::core::result::Result::Err(__dsh_err) => {
                        // `Into<ToolError>` (code and name kept) if `E` has it, else `Display`.
                        #[allow(unused_imports)]
                        use #private::{ErrorViaDisplay as _, ErrorViaInto as _};
                        ::core::result::Result::Err(#convert)
                    }
                }
            }
        }
    };

    let timeout = tool.attrs.timeout_ms.as_ref().map(|timeout| {
        let ms = Literal::u64_unsuffixed(u64::try_from(timeout.ms).unwrap_or_default());
        quote!(const TIMEOUT_MS: ::core::option::Option<u64> = ::core::option::Option::Some(#ms);)
    });

    let attrs = &tool.attrs;
    let annotations = (attrs.title.is_some()
        || attrs.read_only.is_some()
        || attrs.destructive.is_some()
        || attrs.idempotent.is_some()
        || attrs.open_world.is_some())
    .then(|| {
        let title = match &attrs.title {
            Some(title) => quote!(::core::option::Option::Some(#title)),
            None => quote!(::core::option::Option::None),
        };
        let hint = |hint: &Option<attr::Hint>| match hint {
            Some(hint) => {
                let value = hint.value;
                quote!(::core::option::Option::Some(#value))
            }
            None => quote!(::core::option::Option::None),
        };
        let (read_only, destructive, idempotent, open_world) = (
            hint(&attrs.read_only),
            hint(&attrs.destructive),
            hint(&attrs.idempotent),
            hint(&attrs.open_world),
        );
        quote! {
            const ANNOTATIONS: ::core::option::Option<#private::DeclaredAnnotations> =
                ::core::option::Option::Some(#private::DeclaredAnnotations {
                    title: #title,
                    read_only_hint: #read_only,
                    destructive_hint: #destructive,
                    idempotent_hint: #idempotent,
                    open_world_hint: #open_world,
                });
        }
    });

    let task = attrs.task.as_ref().map(|task| {
        let value = task.value;
        quote!(const TASK: bool = #value;)
    });

    let classifier = tool.attrs.concurrency_safe.as_ref().map(|safe| {
        let verdict = match safe {
            attr::ConcurrencySafe::Always => quote!(true),
            attr::ConcurrencySafe::Classifier(path) => {
                quote_spanned!(path.span()=> #path(__dsh_args))
            }
        };
        quote! {
            fn is_concurrency_safe(__dsh_args: &Self::Args) -> bool {
                #verdict
            }
        }
    });
    let constraints = expand_constraints(tool);
    let hooks = expand_hooks(tool);

    quote! {
        #[automatically_derived]
        impl #impl_generics #private::Tool for #tool_ident #ty_generics #where_clause {
            type Args = #args_ty;
            type Output = #output_ty;
            const NAME: &'static str = #name;
            const DESCRIPTION: &'static str = #description;
            #timeout
            #annotations
            #task

            fn call(
                &self,
                __dsh_args: Self::Args,
                __dsh_exec: #private::ToolExec,
            ) -> impl ::core::future::Future<
                Output = ::core::result::Result<Self::Output, #private::ToolError>,
            > + ::core::marker::Send {
                #(#exec_conversions)*
                #unpack
                async move { #body }
            }

            #classifier
            #constraints
            #hooks
        }
    }
}

/// `check_constraints`: one runtime check per `range` / `length` / `pattern`, spanned on the
/// key so a constraint that does not fit the type is reported there.
fn expand_constraints(tool: &ToolFn) -> TokenStream {
    let private = {
        let krate = &tool.krate;
        quote!(#krate::__private)
    };
    let mut checks = Vec::new();
    for param in tool.arg_params() {
        let Some(ident) = param.ident else { continue };
        let wire = &param.wire_name;
        let bound = |value: &Option<(syn::Expr, f64)>, float: bool| match value {
            Some((_, value)) if float => {
                let lit = Literal::f64_suffixed(*value);
                quote!(::core::option::Option::Some(#lit))
            }
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            // Lengths were parsed as non-negative integer literals.
            Some((_, value)) => {
                let lit = Literal::u64_suffixed(*value as u64);
                quote!(::core::option::Option::Some(#lit))
            }
            None => quote!(::core::option::Option::None),
        };
        if let Some(range) = &param.attrs.range {
            let (min, max) = (bound(&range.min, true), bound(&range.max, true));
            checks.push(quote_spanned! {range.key.span()=>
                #private::arg_range(#wire, &__dsh_args.#ident, #min, #max, &mut __dsh_out);
            });
        }
        if let Some(length) = &param.attrs.length {
            let (min, max) = (bound(&length.min, false), bound(&length.max, false));
            checks.push(quote_spanned! {length.key.span()=>
                #private::arg_length(#wire, &__dsh_args.#ident, #min, #max, &mut __dsh_out);
            });
        }
        if let Some(pattern) = &param.attrs.pattern {
            checks.push(quote_spanned! {pattern.span()=>
                #private::arg_pattern(#wire, &__dsh_args.#ident, #pattern, &mut __dsh_out);
            });
        }
    }
    if checks.is_empty() {
        return TokenStream::new();
    }
    quote! {
        fn check_constraints(__dsh_args: &Self::Args) -> ::std::vec::Vec<::std::string::String> {
            let mut __dsh_out = ::std::vec::Vec::new();
            #(#checks)*
            __dsh_out
        }
    }
}

/// `render` and `finalize_content` (each user fn may return the value or an `Option` of it), then
/// the presenters.
fn expand_hooks(tool: &ToolFn) -> TokenStream {
    let krate = &tool.krate;
    let private = quote!(#krate::__private);
    let blocks = quote!(::std::vec::Vec<#private::ContentBlock>);
    let mut hooks = Vec::new();
    if let Some(path) = &tool.attrs.render {
        hooks.push(quote_spanned! {path.span()=>
            const RENDER: ::core::option::Option<#private::RenderHook<Self>> =
                ::core::option::Option::Some(|__dsh_args, __dsh_output| {
                    let __dsh_blocks: ::core::option::Option<#blocks> =
                        ::core::convert::Into::into(#path(__dsh_args, __dsh_output));
                    __dsh_blocks
                });
        });
    }
    if let Some(path) = &tool.attrs.finalize_content {
        hooks.push(quote_spanned! {path.span()=>
            const FINALIZE_CONTENT: ::core::option::Option<#private::FinalizeContentHook> =
                ::core::option::Option::Some(|__dsh_exec, __dsh_result| {
                    let __dsh_blocks: ::core::option::Option<#blocks> =
                        ::core::convert::Into::into(#path(__dsh_exec, __dsh_result));
                    __dsh_blocks
                });
        });
    }
    hooks.push(expand_presenters(tool));
    let attrs = &tool.attrs;
    if attrs.render.is_some() || attrs.present_result.is_some() || attrs.presentation_meta.is_some()
    {
        // Lets the hooks describe a value a post-execute hook or a wrapper substituted, when the
        // output type can be read back (autoref specialisation: `Deserialize` if it has one).
        hooks.push(quote! {
            fn output_from_value(
                __dsh_value: &#private::serde_json::Value,
            ) -> ::core::option::Option<Self::Output> {
                #[allow(unused_imports)]
                use #private::{OutputViaDeserialize as _, OutputViaNothing as _};
                (&&#private::OutputProbe::<Self::Output>::new()).output_from_value(__dsh_value)
            }
        });
    }
    quote!(#(#hooks)*)
}

/// `present_call`, `present_result` and `presentation_meta`, called through the runtime's
/// presenter traits: spanned on the user's path, a wrong signature is reported there with the
/// signature to write.
fn expand_presenters(tool: &ToolFn) -> TokenStream {
    let krate = &tool.krate;
    let private = quote!(#krate::__private);
    let mut hooks = Vec::new();
    if let Some(path) = &tool.attrs.present_call {
        hooks.push(quote_spanned! {path.span()=>
            fn present_call(__dsh_args: &Self::Args) -> ::core::option::Option<#private::CallView> {
                #private::PresentCallFn::<Self::Args>::present(&#path, Self::NAME, __dsh_args)
            }
        });
    }
    if let Some(path) = &tool.attrs.present_result {
        hooks.push(quote_spanned! {path.span()=>
            const PRESENT_RESULT: ::core::option::Option<#private::PresentResultHook<Self>> =
                ::core::option::Option::Some(|__dsh_args, __dsh_output, __dsh_meta| {
                    #private::PresentResultFn::<Self::Args, Self::Output, _>::present(
                        &#path,
                        Self::NAME,
                        __dsh_args,
                        __dsh_output,
                        __dsh_meta,
                    )
                });
        });
    }
    if let Some(path) = &tool.attrs.presentation_meta {
        hooks.push(quote_spanned! {path.span()=>
            const PRESENTATION_META: ::core::option::Option<#private::PresentationMetaHook<Self>> =
                ::core::option::Option::Some(|__dsh_args, __dsh_output| {
                    #private::PresentationMetaFn::<Self::Args, Self::Output, _>::present(
                        &#path,
                        Self::NAME,
                        __dsh_args,
                        __dsh_output,
                    )
                });
        });
    }
    quote!(#(#hooks)*)
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
