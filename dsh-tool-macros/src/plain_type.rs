//! `#[tool_type]` on a plain struct: named fields, no generics, no serde or schemars attributes,
//! the common shape of a tool's output. Its `Deserialize` and `JsonSchema` go through the
//! runtime's readers (`__private::deserialize_args`, `__private::type_schema`), so the struct adds
//! a field table and one `match` instead of the derives' key enum, visitors and per-field
//! constants; what it reads, refuses and describes is what the derives make of the same struct.
//! Any other shape keeps the derives.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::ext::IdentExt;
use syn::spanned::Spanned;
use syn::{Attribute, Fields, Item, ItemStruct, LitStr, Path};

use crate::expand::args_schema::doc_string;

/// Container attributes the derives read nothing from (besides the doc comment).
const INERT: &[&str] = &[
    "doc",
    "derive",
    "allow",
    "warn",
    "deny",
    "expect",
    "forbid",
    "must_use",
    "non_exhaustive",
    "repr",
];

/// The struct, when `#[tool_type]` can describe it without the derives.
pub(crate) fn plain(item: &Item) -> Option<&ItemStruct> {
    let Item::Struct(item) = item else {
        return None;
    };
    let Fields::Named(fields) = &item.fields else {
        return None;
    };
    let inert = |attr: &Attribute| INERT.iter().any(|name| attr.path().is_ident(name));
    let plain = item.generics.params.is_empty()
        && item.generics.where_clause.is_none()
        && item.attrs.iter().all(inert)
        && fields
            .named
            .iter()
            .all(|field| field.attrs.iter().all(|attr| attr.path().is_ident("doc")));
    plain.then_some(item)
}

/// The struct with serde's `Serialize` derive, and `Deserialize` and `JsonSchema` written
/// through the runtime; `deny` closes it (`#[serde(deny_unknown_fields)]`, read by the
/// `Serialize` derive as by the others).
pub(crate) fn expand(krate: &Path, serde: &LitStr, deny: bool, item: &ItemStruct) -> TokenStream {
    let private = quote!(#krate::__private);
    let schemars = quote!(#krate::schemars);
    let ident = &item.ident;
    let name = ident.to_string();
    let fields: Vec<_> = item
        .fields
        .iter()
        .filter_map(|f| f.ident.as_ref().map(|i| (f, i)))
        .collect();
    let wires: Vec<String> = fields.iter().map(|(_, i)| i.unraw().to_string()).collect();
    let tys: Vec<&syn::Type> = fields.iter().map(|(field, _)| &field.ty).collect();
    // No fields: an empty body, as `()` alone would be an unneeded unit to clippy.
    let slots = if fields.is_empty() {
        TokenStream::new()
    } else {
        let nones = fields.iter().map(|_| quote!(::core::option::Option::None));
        quote!((#(#nones,)*))
    };
    let reads = tys.iter().zip(&wires).enumerate().map(|(i, (ty, wire))| {
        let slot = syn::Index::from(i);
        // Spanned on the type: a type without `Deserialize` is reported there.
        let read = quote_spanned! {ty.span()=>
            #private::FieldSource::field(__dsh_source, &mut __dsh_slots.#slot, #wire)
        };
        quote!(#i => #read,)
    });
    let values = fields
        .iter()
        .zip(&wires)
        .enumerate()
        .map(|(i, ((field, ident), wire))| {
            let slot = syn::Index::from(i);
            // Spanned on the type, as the read is.
            let value =
                quote_spanned!(field.ty.span()=> #private::present(__dsh_slots.#slot, #wire)?);
            quote!(#ident: #value)
        });
    let properties = fields.iter().zip(&wires).map(|((field, _), wire)| {
        let ty = &field.ty;
        let doc = match doc_string(&field.attrs) {
            Some(doc) => quote!(::core::option::Option::Some(#doc)),
            None => quote!(::core::option::Option::None),
        };
        let (is_option, schema) = (
            quote_spanned!(ty.span()=> <#ty as #schemars::JsonSchema>::_schemars_private_is_option),
            quote_spanned!(ty.span()=> #schemars::SchemaGenerator::subschema_for::<#ty>),
        );
        quote! {
            #private::ArgProperty {
                name: #wire,
                optional: #private::Optional::WhenOptionDeserializing(#is_option),
                doc: #doc,
                description: ::core::option::Option::None,
                schema: #schema,
                mutate: ::core::option::Option::None,
            }
        }
    });
    let docs: Vec<Attribute> = item
        .attrs
        .iter()
        .filter(|attr| attr.path().is_ident("doc"))
        .cloned()
        .collect();
    let doc = doc_string(&docs).unwrap_or_else(|| quote!(""));
    let deny_attr = deny.then(|| quote!(#[serde(deny_unknown_fields)]));
    let impls = crate::expand::args_struct::args_struct_impls(
        crate::expand::args_struct::ArgsFields {
            ident,
            private: private.clone(),
            serde: quote!(#krate::serde),
            name: &name,
            wires: &wires,
            deny,
            tys: &tys,
            slots,
            reads: quote!(#(#reads)*),
            values: quote!(#(#values),*),
        },
        &quote!(#[automatically_derived]),
        &quote!(
            const SEQUENCE: bool = true;
        ),
    );
    quote! {
        #[derive(#krate::serde::Serialize)]
        #[serde(crate = #serde)]
        #deny_attr
        #item
        #[doc(hidden)]
        const _: () = {
            #impls
            #[automatically_derived]
            impl #schemars::JsonSchema for #ident {
                fn schema_name() -> #private::std::borrow::Cow<'static, str> {
                    #private::std::borrow::Cow::Borrowed(#name)
                }
                fn schema_id() -> #private::std::borrow::Cow<'static, str> {
                    #private::std::borrow::Cow::Borrowed(
                        ::core::concat!(::core::module_path!(), "::", #name),
                    )
                }
                fn json_schema(
                    __dsh_generator: &mut #schemars::SchemaGenerator,
                ) -> #schemars::Schema {
                    #private::type_schema(__dsh_generator, #doc, #deny, &[#(#properties),*])
                }
            }
        };
    }
}
