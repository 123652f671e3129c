//! The parsed model of a tool fn, with every default resolved (name, description, generated
//! identifiers, runtime path). Nodes borrow the syn tree they came from, for spans.

use proc_macro2::{Span, TokenStream};
use quote::{ToTokens, format_ident, quote};
use syn::ext::IdentExt;
use syn::{
    Attribute, Expr, ExprLit, FnArg, GenericArgument, Ident, ImplItem, ItemImpl, Lit, Pat, PatType,
    Path, PathArguments, ReturnType, Signature, Type, Visibility,
};

use crate::attr;
use crate::ctxt::Ctxt;
use crate::symbol::{DOC, OPTION, RESULT, Symbol, TOOL, TOOL_EXEC};

/// Where the fn lives.
pub(crate) enum Context<'a> {
    /// A free `async fn`.
    Free,
    /// A method of a `#[toolbox] impl` block.
    Method(&'a ItemImpl),
}

/// A tool fn: a free fn under `#[tool]`, or a `#[tool]` method of a `#[toolbox]` impl.
pub(crate) struct ToolFn<'a> {
    pub context: Context<'a>,
    pub attrs: attr::Tool,
    pub vis: &'a Visibility,
    pub sig: &'a Signature,
    /// The `self` receiver, if any.
    pub receiver: Option<&'a syn::Receiver>,
    pub params: Vec<Param<'a>>,
    pub output: Output<'a>,
    /// The wire name and the tokens it came from (the `name` literal or the fn ident).
    pub name: String,
    pub name_span: TokenStream,
    pub description: Description<'a>,
    /// The runtime crate path, `::dsh_tools` unless `crate = …`.
    pub krate: Path,
    /// `<CamelName>Args`, or `args = Ident`.
    pub args_ident: Ident,
    /// `<CamelName>Tool`.
    pub tool_ident: Ident,
}

/// Where the tool description comes from.
pub(crate) enum Description<'a> {
    /// `#[tool(description = "…")]`.
    Explicit(syn::LitStr),
    /// The fn's doc comments: text lines, or expressions such as `include_str!(…)`.
    Docs(Vec<DocPart<'a>>),
}

pub(crate) enum DocPart<'a> {
    Text(String),
    Expr(&'a Expr),
}

/// One fn parameter other than the receiver.
pub(crate) struct Param<'a> {
    pub original: &'a PatType,
    /// The binding, when the pattern is a plain identifier.
    pub ident: Option<&'a Ident>,
    pub ty: &'a Type,
    pub kind: ParamKind<'a>,
    pub attrs: attr::Param,
    /// The property name on the wire (`rename` or the identifier without `r#`).
    pub wire_name: String,
    /// Declared as `Option<…>` (syntactically).
    pub is_option: bool,
}

pub(crate) enum ParamKind<'a> {
    /// An inline argument: a field of the generated arguments struct.
    Arg,
    /// The execution context, by value or by reference; `ty` is the referent.
    Exec { by_ref: bool, ty: &'a Type },
    /// `#[args] a: MyArgs`: the whole arguments struct.
    ArgsStruct,
}

/// The declared return type.
pub(crate) enum Output<'a> {
    /// No return type, or `()`.
    Unit,
    /// A plain `T`.
    Plain(&'a Type),
    /// A type named `Result` (checked to be a `Result<T, E>` by a trait bound).
    Result(&'a Type),
}

impl<'a> ToolFn<'a> {
    /// Builds the model; problems that prevent a field from resolving go to `cx`.
    pub(crate) fn from_syn(
        cx: &Ctxt,
        context: Context<'a>,
        attrs: attr::Tool,
        fn_attrs: &'a [Attribute],
        vis: &'a Visibility,
        sig: &'a Signature,
    ) -> ToolFn<'a> {
        let mut receiver = None;
        let mut params = Vec::new();
        for input in &sig.inputs {
            match input {
                FnArg::Receiver(recv) => receiver = Some(recv),
                FnArg::Typed(pat_type) => params.push(Param::from_syn(cx, pat_type)),
            }
        }

        let fn_name = sig.ident.unraw().to_string();
        let (name, name_span) = match &attrs.name {
            Some(lit) => (lit.value(), lit.to_token_stream()),
            None => (fn_name.clone(), sig.ident.to_token_stream()),
        };
        let description = match &attrs.description {
            Some(lit) => Description::Explicit(lit.clone()),
            None => Description::Docs(doc_parts(fn_attrs)),
        };
        let krate = attrs
            .krate
            .clone()
            .unwrap_or_else(|| syn::parse_quote!(::dsh_tools));
        let camel = camel_case(&fn_name);
        let args_ident = attrs
            .args
            .clone()
            .unwrap_or_else(|| Ident::new(&format!("{camel}Args"), sig.ident.span()));
        let tool_ident = format_ident!("{}Tool", camel, span = sig.ident.span());

        ToolFn {
            context,
            attrs,
            vis,
            sig,
            receiver,
            params,
            output: Output::from_syn(&sig.output),
            name,
            name_span,
            description,
            krate,
            args_ident,
            tool_ident,
        }
    }

    /// The `ToolExec` parameter, if any (the first one; `check.rs` rejects a second).
    pub(crate) fn exec_param(&self) -> Option<&Param<'a>> {
        self.params
            .iter()
            .find(|param| matches!(param.kind, ParamKind::Exec { .. }))
    }

    /// The `#[args]` parameter, if any.
    pub(crate) fn args_struct_param(&self) -> Option<&Param<'a>> {
        self.params
            .iter()
            .find(|param| matches!(param.kind, ParamKind::ArgsStruct))
    }

    /// The inline argument parameters, in declaration order.
    pub(crate) fn arg_params(&self) -> impl Iterator<Item = &Param<'a>> {
        self.params
            .iter()
            .filter(|param| matches!(param.kind, ParamKind::Arg))
    }

    /// The description as a `&'static str` expression (a literal when every part is one).
    pub(crate) fn description_tokens(&self) -> TokenStream {
        match &self.description {
            Description::Explicit(lit) => lit.to_token_stream(),
            Description::Docs(parts) => {
                if parts.iter().all(|part| matches!(part, DocPart::Text(_))) {
                    let text: Vec<&str> = parts
                        .iter()
                        .filter_map(|part| match part {
                            DocPart::Text(text) => Some(text.as_str()),
                            DocPart::Expr(_) => None,
                        })
                        .collect();
                    let joined = text.join("\n");
                    let lit = syn::LitStr::new(joined.trim(), Span::call_site());
                    lit.to_token_stream()
                } else {
                    // `#[doc = include_str!(…)]` is only known after expansion: join at compile
                    // time and trim in const context.
                    let pieces = parts.iter().enumerate().map(|(i, part)| {
                        let sep = if i == 0 { quote!() } else { quote!("\n",) };
                        match part {
                            DocPart::Text(text) => quote!(#sep #text,),
                            DocPart::Expr(expr) => quote!(#sep #expr,),
                        }
                    });
                    quote!(::core::concat!(#(#pieces)*).trim_ascii())
                }
            }
        }
    }

    /// `true` when there is no description at all.
    pub(crate) fn description_missing(&self) -> bool {
        match &self.description {
            Description::Explicit(_) => false,
            Description::Docs(parts) => parts.iter().all(|part| match part {
                DocPart::Text(text) => text.trim().is_empty(),
                DocPart::Expr(_) => false,
            }),
        }
    }
}

impl<'a> Param<'a> {
    fn from_syn(cx: &Ctxt, original: &'a PatType) -> Param<'a> {
        let attrs = attr::Param::from_attrs(cx, &original.attrs);
        let ident = match &*original.pat {
            Pat::Ident(pat) if pat.by_ref.is_none() && pat.subpat.is_none() => Some(&pat.ident),
            _ => None,
        };
        let ty = &*original.ty;
        let kind = if attrs.args_attr.is_some() {
            ParamKind::ArgsStruct
        } else {
            match ty {
                Type::Reference(reference) if last_segment_is(&reference.elem, TOOL_EXEC) => {
                    ParamKind::Exec {
                        by_ref: true,
                        ty: &reference.elem,
                    }
                }
                _ if last_segment_is(ty, TOOL_EXEC) => ParamKind::Exec { by_ref: false, ty },
                _ => ParamKind::Arg,
            }
        };
        let wire_name = match (&attrs.rename, ident) {
            (Some(rename), _) => rename.value(),
            (None, Some(ident)) => ident.unraw().to_string(),
            (None, None) => String::new(),
        };
        Param {
            original,
            ident,
            ty,
            kind,
            wire_name,
            is_option: option_inner(ty).is_some(),
            attrs,
        }
    }
}

impl<'a> Output<'a> {
    fn from_syn(output: &'a ReturnType) -> Output<'a> {
        match output {
            ReturnType::Default => Output::Unit,
            ReturnType::Type(_, ty) => match &**ty {
                Type::Tuple(tuple) if tuple.elems.is_empty() => Output::Unit,
                ty if last_segment_is(ty, RESULT) => Output::Result(ty),
                ty => Output::Plain(ty),
            },
        }
    }
}

/// A `#[toolbox] impl` block and its `#[tool]` methods.
pub(crate) struct Toolbox<'a> {
    pub original: &'a ItemImpl,
    pub tools: Vec<ToolFn<'a>>,
}

impl<'a> Toolbox<'a> {
    pub(crate) fn from_syn(cx: &Ctxt, original: &'a ItemImpl) -> Toolbox<'a> {
        let mut tools = Vec::new();
        for item in &original.items {
            let ImplItem::Fn(method) = item else { continue };
            let mut tool_attrs = method.attrs.iter().filter(|attr| is_tool_attr(attr));
            if let Some(attr) = tool_attrs.next() {
                for duplicate in tool_attrs {
                    cx.error_spanned_by(duplicate, "duplicate `#[tool]` attribute; keep only one");
                }
                let attrs = attr::Tool::from_attribute(cx, attr);
                tools.push(ToolFn::from_syn(
                    cx,
                    Context::Method(original),
                    attrs,
                    &method.attrs,
                    &method.vis,
                    &method.sig,
                ));
            }
        }
        Toolbox { original, tools }
    }
}

/// `#[tool]` or `#[dsh_tools::tool]` (any path ending in `tool`).
pub(crate) fn is_tool_attr(attr: &Attribute) -> bool {
    attr.path()
        .segments
        .last()
        .is_some_and(|segment| segment.ident == TOOL)
}

/// The doc comment lines of an item: one leading space stripped (as `///` adds it), trailing
/// whitespace removed.
fn doc_parts(attrs: &[Attribute]) -> Vec<DocPart<'_>> {
    let mut parts = Vec::new();
    for attr in attrs {
        let syn::Meta::NameValue(nv) = &attr.meta else {
            continue;
        };
        if nv.path != DOC {
            continue;
        }
        match &nv.value {
            Expr::Lit(ExprLit {
                lit: Lit::Str(lit), ..
            }) => {
                let value = lit.value();
                // `split`, not `lines`: an empty `///` line is a paragraph break to keep.
                let lines = value
                    .split('\n')
                    .map(|line| line.strip_prefix(' ').unwrap_or(line).trim_end());
                parts.extend(lines.map(|line| DocPart::Text(line.to_owned())));
            }
            expr => parts.push(DocPart::Expr(expr)),
        }
    }
    parts
}

/// `read_file` → `ReadFile`.
pub(crate) fn camel_case(snake: &str) -> String {
    snake
        .split('_')
        .map(|word| {
            let mut chars = word.chars();
            match chars.next() {
                Some(first) => first.to_uppercase().chain(chars).collect(),
                None => String::new(),
            }
        })
        .collect()
}

fn last_segment_is(ty: &Type, name: Symbol) -> bool {
    match ty {
        Type::Path(path) if path.qself.is_none() => path
            .path
            .segments
            .last()
            .is_some_and(|segment| segment.ident == name),
        Type::Group(group) => last_segment_is(&group.elem, name),
        Type::Paren(paren) => last_segment_is(&paren.elem, name),
        _ => false,
    }
}

/// `T` of a type written `Option<T>`.
pub(crate) fn option_inner(ty: &Type) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let segment = path.path.segments.last()?;
    if segment.ident != OPTION {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &segment.arguments else {
        return None;
    };
    match args.args.first() {
        Some(GenericArgument::Type(inner)) if args.args.len() == 1 => Some(inner),
        _ => None,
    }
}

/// The type argument at `index` of a return type written `Result<T, E>` (`E` is absent from an
/// alias such as `io::Result<T>`).
pub(crate) fn result_type_arg(ty: &Type, index: usize) -> Option<&Type> {
    let Type::Path(path) = ty else { return None };
    let PathArguments::AngleBracketed(args) = &path.path.segments.last()?.arguments else {
        return None;
    };
    args.args
        .iter()
        .filter_map(|arg| match arg {
            GenericArgument::Type(ty) => Some(ty),
            _ => None,
        })
        .nth(index)
}
