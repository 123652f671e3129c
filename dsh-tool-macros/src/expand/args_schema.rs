//! The `JsonSchema` impl of a tool's arguments struct: one property per field, with its doc
//! comment, its `#[arg]` constraints and its default, as schemars' derive would write it.

use proc_macro2::TokenStream;
use quote::{ToTokens, format_ident, quote};
use syn::Ident;
use syn::ext::IdentExt;

use crate::ast::ToolFn;
use crate::attr;

/// `JsonSchema` for the arguments struct, through the runtime's `__private::args_schema`: one
/// `ArgProperty` per field, the schema schemars' derive would write for the struct (closed
/// unless `allow_unknown`, doc comments as title and description, `required` for the fields
/// without a default, the `#[arg]` constraints and defaults), without a derive per tool.
pub(super) fn expand_args_schema(tool: &ToolFn, doc: &str) -> TokenStream {
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
