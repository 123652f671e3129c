//! The facade root's `Deserialize`, `Serialize` and `JsonSchema` derives: each is one error that
//! sends the user to `#[tool_type]`. serde's and schemars' own derives, written by hand without
//! their `crate = …` attributes, fail with a dozen errors about crates the user never added
//! (serde's output names `extern crate serde`, schemars' `schemars::…`) and none about the fix;
//! a derive cannot hand the type on to them, so these stop there instead.

use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{DeriveInput, GenericParam, Lifetime, LifetimeParam};

/// Which root derive was invoked.
#[derive(Clone, Copy)]
pub(crate) enum Derive {
    Deserialize,
    Serialize,
    JsonSchema,
}

/// The error, and a stand-in impl of the derived trait so the type's uses report nothing more.
pub(crate) fn expand(input: TokenStream, derive: Derive) -> TokenStream {
    let input: DeriveInput = match syn::parse2(input) {
        Ok(input) => input,
        Err(error) => return error.to_compile_error(),
    };
    let ident = &input.ident;
    // The same message on the same token from each of the derives: rustc reports it once.
    let message = format!(
        "`dsh_tools::Deserialize`, `Serialize` and `JsonSchema` derive nothing: put \
         `#[dsh_tools::tool_type]` on `{ident}` instead of deriving them (to derive by hand, use \
         `dsh_tools::serde::{{Deserialize, Serialize}}` with \
         `#[serde(crate = \"dsh_tools::serde\")]` and `dsh_tools::schemars::JsonSchema` with \
         `#[schemars(crate = \"dsh_tools::schemars\")]`)"
    );
    let error = quote_spanned!(ident.span()=> ::core::compile_error!(#message););
    let stand_in = stand_in(&input, derive);
    quote! {
        #error
        // Never runs: the error above stops the build.
        const _: () = {
            #stand_in
        };
    }
}

/// `impl Trait for Type` with bodies that are never reached.
fn stand_in(input: &DeriveInput, derive: Derive) -> TokenStream {
    let ident = &input.ident;
    // A derive does not see the path it was invoked by; under a renamed facade this path fails
    // too, one more error next to the one that names the fix.
    let krate = quote!(::dsh_tools);
    let (impl_generics, ty_generics, where_clause) = input.generics.split_for_impl();
    match derive {
        Derive::Deserialize => {
            let mut generics = input.generics.clone();
            let de = Lifetime::new("'__dsh_de", proc_macro2::Span::call_site());
            generics
                .params
                .insert(0, GenericParam::Lifetime(LifetimeParam::new(de.clone())));
            let (impl_generics, _, _) = generics.split_for_impl();
            quote! {
                impl #impl_generics #krate::serde::Deserialize<#de> for #ident #ty_generics
                #where_clause
                {
                    fn deserialize<__D: #krate::serde::Deserializer<#de>>(
                        _: __D,
                    ) -> ::core::result::Result<Self, __D::Error> {
                        ::core::unreachable!()
                    }
                }
            }
        }
        Derive::Serialize => quote! {
            impl #impl_generics #krate::serde::Serialize for #ident #ty_generics #where_clause {
                fn serialize<__S: #krate::serde::Serializer>(
                    &self,
                    _: __S,
                ) -> ::core::result::Result<__S::Ok, __S::Error> {
                    ::core::unreachable!()
                }
            }
        },
        Derive::JsonSchema => quote! {
            impl #impl_generics #krate::schemars::JsonSchema for #ident #ty_generics #where_clause {
                fn schema_name() -> #krate::__private::std::borrow::Cow<'static, str> {
                    ::core::unreachable!()
                }
                fn json_schema(
                    _: &mut #krate::schemars::SchemaGenerator,
                ) -> #krate::schemars::Schema {
                    ::core::unreachable!()
                }
            }
        },
    }
}
