//! `#[tool_type]`: the serde and schemars derives a parameter or output type needs, with the
//! crate paths that make them work through the `dsh-tools` facade, in one line.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Item, LitStr, Meta, Path, Token};

/// Expands `#[tool_type]` / `#[tool_type(crate = path)]` on a struct or enum.
pub fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let krate = match krate(args) {
        Ok(krate) => krate,
        Err(error) => return error.to_compile_error(),
    };
    let item: Item = match syn::parse2(item.clone()) {
        Ok(item @ (Item::Struct(_) | Item::Enum(_))) => item,
        _ => {
            return syn::Error::new_spanned(
                item,
                "`#[tool_type]` goes on a struct or an enum used as a tool's parameter or output",
            )
            .to_compile_error();
        }
    };
    let text = krate.to_token_stream().to_string().replace(' ', "");
    let serde = LitStr::new(&format!("{text}::serde"), proc_macro2::Span::call_site());
    let schemars = LitStr::new(&format!("{text}::schemars"), proc_macro2::Span::call_site());
    quote! {
        #[derive(#krate::Deserialize, #krate::Serialize, #krate::JsonSchema)]
        #[serde(crate = #serde)]
        #[schemars(crate = #schemars)]
        #item
    }
}

/// The facade's path: `::dsh_tools` unless `crate = path` names a renamed dependency.
fn krate(args: TokenStream) -> syn::Result<Path> {
    let items = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args)?;
    let mut krate: Option<Path> = None;
    for item in items {
        match &item {
            Meta::NameValue(nv) if nv.path.is_ident("crate") && krate.is_none() => {
                let path = match &nv.value {
                    syn::Expr::Path(path) if path.qself.is_none() => path.path.clone(),
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(lit),
                        ..
                    }) => lit.parse::<Path>()?,
                    other => {
                        return Err(syn::Error::new_spanned(
                            other,
                            "malformed `#[tool_type]` argument `crate`; write `crate = dsh_tools`",
                        ));
                    }
                };
                krate = Some(path);
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    item,
                    "`#[tool_type]` takes only `crate = path` (the path of a renamed `dsh-tools` dependency)",
                ));
            }
        }
    }
    Ok(krate.unwrap_or_else(|| syn::parse_quote!(::dsh_tools)))
}
