//! `#[tool_type]`: the serde and schemars derives a parameter or output type needs, with the
//! crate paths that make them work through the `dsh-tools` facade, in one line. Its objects are
//! closed (serde's `deny_unknown_fields`) unless `allow_unknown` opens them.

use proc_macro2::TokenStream;
use quote::{ToTokens, quote};
use syn::parse::Parser;
use syn::punctuated::Punctuated;
use syn::{Attribute, Field, Fields, Item, LitStr, Meta, Path, Token};

use crate::check::find_duration;

/// The `#[tool_type(...)]` arguments.
struct Options {
    krate: Path,
    /// The `allow_unknown` key, for spans.
    allow_unknown: Option<Path>,
}

/// Expands `#[tool_type]` / `#[tool_type(crate = path, allow_unknown)]` on a struct or enum.
pub(crate) fn expand(args: TokenStream, item: TokenStream) -> TokenStream {
    let options = match options(args) {
        Ok(options) => options,
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
    // The type is still derived (open if closing failed), so its uses report nothing more.
    let (deny, mut errors) = match closing(&item, options.allow_unknown.as_ref()) {
        Ok(deny) => (deny, None),
        Err(error) => (None, Some(error)),
    };
    for error in duration_fields(&item) {
        match &mut errors {
            Some(errors) => errors.combine(error),
            None => errors = Some(error),
        }
    }
    let error = errors.map(|errors| errors.to_compile_error());
    let krate = &options.krate;
    let text = krate.to_token_stream().to_string().replace(' ', "");
    let serde = LitStr::new(&format!("{text}::serde"), proc_macro2::Span::call_site());
    let schemars = LitStr::new(&format!("{text}::schemars"), proc_macro2::Span::call_site());
    if error.is_none()
        && let Some(plain) = crate::plain_type::plain(&item)
    {
        return crate::plain_type::expand(krate, &serde, deny.is_some(), plain);
    }
    quote! {
        #[derive(#krate::serde::Deserialize, #krate::serde::Serialize, #krate::schemars::JsonSchema)]
        #[serde(crate = #serde)]
        #[schemars(crate = #schemars)]
        #deny
        #item
        #error
    }
}

/// The `#[serde(deny_unknown_fields)]` to add, if any. Structs with named fields and enums (whose
/// struct variants it closes) are closed unless `allow_unknown`, or already closed by the
/// author's own attribute; tuple and unit structs have no keys to refuse.
///
/// # Errors
/// `allow_unknown` next to the author's `deny_unknown_fields`, or a `#[serde(flatten)]` field in
/// a type to close: serde does not support `deny_unknown_fields` with `flatten` (a flattened map
/// or internally tagged enum would have its keys refused), so such a type opens explicitly.
fn closing(item: &Item, allow_unknown: Option<&Path>) -> syn::Result<Option<TokenStream>> {
    let (attrs, fields): (&[Attribute], Vec<&Fields>) = match item {
        Item::Struct(item) if matches!(item.fields, Fields::Named(_)) => {
            (&item.attrs, vec![&item.fields])
        }
        Item::Enum(item) => (
            &item.attrs,
            item.variants
                .iter()
                .map(|variant| &variant.fields)
                .collect(),
        ),
        _ => return Ok(None),
    };
    let denied = serde_word(attrs, "deny_unknown_fields");
    match (allow_unknown, denied) {
        (Some(_), Some(deny)) => Err(syn::Error::new_spanned(
            deny,
            "`#[tool_type(allow_unknown)]` accepts unknown properties, but `deny_unknown_fields` refuses them; remove one of the two",
        )),
        (Some(_), None) | (None, Some(_)) => Ok(None),
        (None, None) => {
            let flattened = fields
                .into_iter()
                .flatten()
                .find_map(|field| serde_word(&field.attrs, "flatten"));
            match flattened {
                Some(flatten) => Err(syn::Error::new_spanned(
                    flatten,
                    "a `#[serde(flatten)]` field cannot refuse unknown properties (serde does not support `deny_unknown_fields` with `flatten`); write `#[tool_type(allow_unknown)]` to accept them",
                )),
                None => Ok(Some(quote!(#[serde(deny_unknown_fields)]))),
            }
        }
    }
}

/// An error for each field whose type holds a `Duration` (see `check::find_duration`), unless the
/// field chooses its own representation (`with`, `serialize_with`, `deserialize_with`) or is
/// skipped.
fn duration_fields(item: &Item) -> Vec<syn::Error> {
    let fields: Vec<&Field> = match item {
        Item::Struct(item) => item.fields.iter().collect(),
        Item::Enum(item) => item
            .variants
            .iter()
            .flat_map(|variant| &variant.fields)
            .collect(),
        _ => Vec::new(),
    };
    fields
        .into_iter()
        .filter(|field| {
            !serde_metas(&field.attrs).any(|meta| {
                ["with", "serialize_with", "deserialize_with", "skip"]
                    .into_iter()
                    .any(|key| meta.path().is_ident(key))
            })
        })
        .filter_map(|field| find_duration(&field.ty))
        .map(|duration| {
            syn::Error::new_spanned(
                duration,
                "a `Duration` field reaches the model as `{secs, nanos}`; use a number with its unit in the name, e.g. `timeout_ms: u64`, and convert with `Duration::from_millis` and `as_millis`",
            )
        })
        .collect()
}

/// The first `word` inside a `#[serde(...)]` of `attrs`, as written (for spans).
fn serde_word(attrs: &[Attribute], word: &str) -> Option<Path> {
    serde_metas(attrs).find_map(|meta| match meta {
        Meta::Path(path) if path.is_ident(word) => Some(path),
        _ => None,
    })
}

/// The items of every `#[serde(...)]` of `attrs`. An attribute that does not parse is skipped:
/// serde reports it.
fn serde_metas(attrs: &[Attribute]) -> impl Iterator<Item = Meta> + '_ {
    attrs
        .iter()
        .filter(|attr| attr.path().is_ident("serde"))
        .filter_map(|attr| {
            attr.parse_args_with(Punctuated::<Meta, Token![,]>::parse_terminated)
                .ok()
        })
        .flatten()
}

/// The arguments: the facade's path (`::dsh_tools` unless `crate = path` names a renamed
/// dependency) and `allow_unknown`.
fn options(args: TokenStream) -> syn::Result<Options> {
    let items = Punctuated::<Meta, Token![,]>::parse_terminated.parse2(args)?;
    let mut krate: Option<Path> = None;
    let mut allow_unknown: Option<Path> = None;
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
            Meta::Path(path) if path.is_ident("allow_unknown") && allow_unknown.is_none() => {
                allow_unknown = Some(path.clone());
            }
            _ if item.path().is_ident("deny_unknown") => {
                return Err(syn::Error::new_spanned(
                    item.path(),
                    "unknown properties are refused by default; remove `deny_unknown` (`allow_unknown` accepts them)",
                ));
            }
            _ => {
                return Err(syn::Error::new_spanned(
                    item,
                    "`#[tool_type]` takes only `crate = path` (the path of a renamed `dsh-tools` dependency) and `allow_unknown` (accept unknown properties)",
                ));
            }
        }
    }
    Ok(Options {
        krate: krate.unwrap_or_else(|| syn::parse_quote!(::dsh_tools)),
        allow_unknown,
    })
}
