//! Cross-cutting rules on a built [`ToolFn`], one fn per rule. Every rule runs even after an
//! earlier one failed, so all mistakes are reported at once.

use proc_macro2::{TokenStream, TokenTree};
use quote::ToTokens;
use syn::{GenericArgument, GenericParam, PathArguments, Type};

use crate::ast::{Context, Output, ParamKind, ToolFn, Toolbox, result_type_arg};
use crate::ctxt::Ctxt;

/// Runs every rule on one tool fn.
pub(crate) fn check(cx: &Ctxt, tool: &ToolFn) {
    check_async(cx, tool);
    check_unsafe(cx, tool);
    check_receiver(cx, tool);
    check_generics(cx, tool);
    check_name(cx, tool);
    check_description(cx, tool);
    check_timeout(cx, tool);
    check_param_patterns(cx, tool);
    check_exec_params(cx, tool);
    check_args_struct(cx, tool);
    check_option_default(cx, tool);
    check_param_types(cx, tool);
    check_output_type(cx, tool);
    check_impl_scope(cx, tool);
    check_wire_names(cx, tool);
    check_bounds_order(cx, tool);
    check_hints(cx, tool);
    check_deny_unknown(cx, tool);
}

// Unknown properties are refused by default: `deny_unknown` says so explicitly and is accepted,
// except where it cannot hold. An `#[args]` struct decides for itself either way.
//
//     #[tool(deny_unknown, allow_unknown)]
fn check_deny_unknown(cx: &Ctxt, tool: &ToolFn) {
    let Some(deny) = &tool.attrs.deny_unknown else {
        return;
    };
    let message = if tool.args_struct_param().is_some() {
        "`deny_unknown` cannot change an `#[args]` struct; remove it: a `#[tool_type]` struct refuses unknown properties by default, a struct deriving serde itself with `#[serde(deny_unknown_fields)]`"
    } else if tool.attrs.allow_unknown.is_some() {
        "`deny_unknown` and `allow_unknown` contradict each other; keep one (unknown properties are refused by default)"
    } else {
        return;
    };
    cx.error_spanned_by(deny, message);
}

// MCP's hints: a read-only tool modifies nothing, so it cannot also be destructive.
//
//     #[tool(read_only, destructive)]
fn check_hints(cx: &Ctxt, tool: &ToolFn) {
    let attrs = &tool.attrs;
    if let (Some(read_only), Some(destructive)) = (&attrs.read_only, &attrs.destructive)
        && read_only.value
        && destructive.value
    {
        cx.error_spanned_by(
            &destructive.key,
            "a `read_only` tool modifies nothing, so it cannot be `destructive`; remove one of the two",
        );
    }
    if let Some(title) = &attrs.title
        && title.value().trim().is_empty()
    {
        cx.error_spanned_by(
            title,
            "`title` is shown to people; write a non-empty title such as `title = \"Read File\"`, or leave it out",
        );
    }
}

/// Runs the rules of a `#[toolbox]` block, then every rule on each of its tools.
pub(crate) fn check_toolbox(cx: &Ctxt, toolbox: &Toolbox) {
    check_inherent_impl(cx, toolbox);
    check_has_tools(cx, toolbox);
    for tool in &toolbox.tools {
        check(cx, tool);
    }
    check_unique_names(cx, toolbox);
}

// Two tools of one toolbox cannot share a wire name: registering them would fail at run time.
//
//     #[tool] async fn read(&self) { … }
//     #[tool(name = "read")] async fn read_again(&self) { … }
fn check_unique_names(cx: &Ctxt, toolbox: &Toolbox) {
    for (index, tool) in toolbox.tools.iter().enumerate() {
        if let Some(first) = toolbox.tools[..index]
            .iter()
            .find(|earlier| earlier.name == tool.name)
        {
            cx.error_spanned_by(
                &tool.name_span,
                format!(
                    "duplicate tool name \"{}\" in this toolbox (also used by `{}`); give this tool another `name = \"…\"`",
                    tool.name, first.sig.ident
                ),
            );
        }
    }
}

// The body runs on the async runtime.
//
//     #[tool]
//     fn read(path: String) -> String { … }
fn check_async(cx: &Ctxt, tool: &ToolFn) {
    if tool.sig.asyncness.is_none() {
        cx.error_spanned_by(
            tool.sig.fn_token,
            format!(
                "a `#[tool]` fn must be `async`; write `async fn {}`",
                tool.sig.ident
            ),
        );
    }
}

// The generated code calls the fn with no `unsafe` block around it.
//
//     #[tool]
//     async unsafe fn read() { … }
fn check_unsafe(cx: &Ctxt, tool: &ToolFn) {
    if let Some(unsafety) = tool.sig.unsafety {
        cx.error_spanned_by(
            unsafety,
            "a `#[tool]` fn cannot be `unsafe`; the model calls it with arbitrary arguments, so wrap the unsafe code in a safe fn",
        );
    }
}

// Free fns take no receiver; toolbox methods take exactly `&self`.
//
//     #[toolbox]
//     impl Files { #[tool] async fn read(&mut self) { … } }
fn check_receiver(cx: &Ctxt, tool: &ToolFn) {
    match (&tool.context, tool.receiver) {
        (Context::Free, Some(receiver)) => cx.error_spanned_by(
            receiver,
            "`#[tool]` on a method needs `#[toolbox]` on its `impl` block; put `#[toolbox]` on the `impl` and keep `#[tool]` on the method",
        ),
        (Context::Method(_), None) => cx.error_spanned_by(
            &tool.sig.ident,
            "a `#[tool]` method inside `#[toolbox]` must take `&self`; write a free `#[tool]` fn for a tool without state",
        ),
        (Context::Method(_), Some(receiver))
            if receiver.reference.is_none()
                || receiver.mutability.is_some()
                || receiver.colon_token.is_some() =>
        {
            cx.error_spanned_by(
                receiver,
                "a `#[tool]` method must take `&self`: the toolbox is shared between concurrent calls behind an `Arc`",
            );
        }
        _ => {}
    }
}

// The arguments struct and the tool type need concrete types.
//
//     #[tool]
//     async fn read<T: Source>(source: T) { … }
fn check_generics(cx: &Ctxt, tool: &ToolFn) {
    if !tool.sig.generics.params.is_empty() {
        // A generic `#[toolbox] impl<T>` does not help when `T` is a parameter type either
        // (toolbox-impl-generics-in-params), so the hint names the fix that always compiles.
        let hint = "write the parameter with a concrete type (`dsh_tools::serde_json::Value` accepts any JSON) and call a generic helper from the body";
        cx.error_spanned_by(
            &tool.sig.generics,
            format!(
                "a `#[tool]` fn cannot have generic parameters: its arguments struct needs concrete types; {hint}"
            ),
        );
    }
}

// Provider-safe names, `^[A-Za-z0-9_-]{1,64}$`; `run_code` belongs to code mode and `mcp__` to
// MCP tools.
//
//     #[tool(name = "read file")]
fn check_name(cx: &Ctxt, tool: &ToolFn) {
    let name = &tool.name;
    let valid_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if name.is_empty() || name.len() > 64 || !valid_chars {
        cx.error_spanned_by(
            &tool.name_span,
            format!(
                "tool name \"{name}\" is not valid: it must match ^[A-Za-z0-9_-]{{1,64}}$ (ASCII letters, digits, `_` or `-`, at most 64); set another with `#[tool(name = \"…\")]`"
            ),
        );
    } else if name == "run_code" {
        cx.error_spanned_by(
            &tool.name_span,
            "tool name \"run_code\" is reserved for the code-mode transport; choose another with `#[tool(name = \"…\")]`",
        );
    } else if name.starts_with("mcp__") {
        cx.error_spanned_by(
            &tool.name_span,
            format!(
                "tool name \"{name}\" uses the prefix `mcp__`, reserved for tools of MCP servers; choose another with `#[tool(name = \"…\")]`"
            ),
        );
    }
}

// The model reads the description to decide when to call the tool.
//
//     #[tool]
//     async fn read(path: String) { … }   // no `///` comment
fn check_description(cx: &Ctxt, tool: &ToolFn) {
    if tool.description_missing() && !tool.attrs.description_misspelt {
        cx.error_spanned_by(
            &tool.sig.ident,
            format!(
                "tool `{}` has no description; add a `///` doc comment to the fn, or `#[tool(description = \"…\")]`",
                tool.name
            ),
        );
    }
}

// A timeout is a promise to honour the cancellation signal, so the body must receive it.
//
//     #[tool(timeout_ms = 0)]
//     async fn read(path: String) { … }   // no `exec: ToolExec`
fn check_timeout(cx: &Ctxt, tool: &ToolFn) {
    let Some(timeout) = &tool.attrs.timeout_ms else {
        return;
    };
    if timeout.ms <= 0 {
        cx.error_spanned_by(
            &timeout.value,
            "`timeout_ms` must be greater than 0 (milliseconds); remove it for a tool without a timeout",
        );
    } else if u64::try_from(timeout.ms).is_err() {
        cx.error_spanned_by(
            &timeout.value,
            "`timeout_ms` does not fit in a `u64` of milliseconds",
        );
    }
    if tool.exec_param().is_none() {
        cx.error_spanned_by(
            &timeout.value,
            "a tool with `timeout_ms` must take a `ToolExec` parameter and stop when `exec.signal()` is cancelled; add `exec: ToolExec`",
        );
    }
}

// Each parameter becomes a named property, so its pattern must be a plain identifier.
//
//     async fn read((a, b): (u32, u32)) { … }
fn check_param_patterns(cx: &Ctxt, tool: &ToolFn) {
    for param in &tool.params {
        if param.ident.is_none() {
            cx.error_spanned_by(
                &param.original.pat,
                "a `#[tool]` parameter must be a plain identifier such as `path: String`: its name is the property name",
            );
        }
    }
}

// One context parameter at most, and it is not an argument.
//
//     async fn read(a: ToolExec, b: &ToolExec) { … }
fn check_exec_params(cx: &Ctxt, tool: &ToolFn) {
    let mut seen = false;
    for param in &tool.params {
        if !matches!(param.kind, ParamKind::Exec { .. }) {
            continue;
        }
        if seen {
            cx.error_spanned_by(
                param.ty,
                "a tool takes at most one `ToolExec` parameter; remove this one",
            );
        }
        seen = true;
        if let Some(attr) = &param.attrs.arg_attr {
            cx.error_spanned_by(
                attr,
                "the `ToolExec` parameter is the call context, not an argument; remove `#[arg]`",
            );
        }
    }
}

// `#[args]` supplies the whole arguments struct: no other argument may sit next to it.
//
//     async fn search(#[args] query: Query, limit: u32) { … }
fn check_args_struct(cx: &Ctxt, tool: &ToolFn) {
    let Some(args_param) = tool.args_struct_param() else {
        return;
    };
    for param in &tool.params {
        let Some(attr) = &param.attrs.args_attr else {
            continue;
        };
        if !std::ptr::eq(param, args_param) {
            cx.error_spanned_by(attr, "only one parameter can be `#[args]`");
        }
        if let Some(arg) = &param.attrs.arg_attr {
            cx.error_spanned_by(
                arg,
                "`#[arg]` does not apply to an `#[args]` struct; put `#[schemars(...)]`/`#[serde(...)]` attributes on its fields instead",
            );
        }
    }
    for param in tool.arg_params() {
        cx.error_spanned_by(
            &param.original.pat,
            "an `#[args]` parameter holds every argument, so no other argument parameter is allowed; move this one into the `#[args]` struct",
        );
    }
    if let Some(args) = &tool.attrs.args {
        cx.error_spanned_by(
            args,
            "`args = …` names the generated arguments struct, but an `#[args]` parameter supplies its own; remove `args = …`",
        );
    }
    if let Some(allow) = &tool.attrs.allow_unknown {
        cx.error_spanned_by(
            allow,
            "`allow_unknown` cannot change an `#[args]` struct; remove it and open the struct itself: `#[tool_type(allow_unknown)]`, or no `#[serde(deny_unknown_fields)]` on a struct deriving serde itself",
        );
    }
}

// An optional argument is absent or given; a default would make `None` unreachable.
//
//     #[arg(default = Some(3))] limit: Option<u32>
fn check_option_default(cx: &Ctxt, tool: &ToolFn) {
    for param in tool.arg_params() {
        if let (true, Some((key, _))) = (param.is_option, &param.attrs.default) {
            cx.error_spanned_by(
                key,
                "an `Option` parameter cannot have a `default`: absent already means `None`; drop the `Option` to keep the default",
            );
        }
    }
}

// Arguments are decoded from JSON into an owned struct: no borrowed or `impl Trait` types.
//
//     async fn read(path: &str) { … }
fn check_param_types(cx: &Ctxt, tool: &ToolFn) {
    for param in tool.arg_params() {
        match param.ty {
            Type::Reference(_) => cx.error_spanned_by(
                param.ty,
                "a `#[tool]` parameter must own its data, since it is decoded from JSON; use an owned type such as `String` or `Vec<T>`",
            ),
            Type::ImplTrait(_) => cx.error_spanned_by(
                param.ty,
                "a `#[tool]` parameter cannot be `impl Trait`; use a concrete type",
            ),
            _ => {
                if let Some(duration) = find_duration(param.ty) {
                    cx.error_spanned_by(
                        duration,
                        "a `Duration` parameter reaches the model as `{secs, nanos}`; take a number with its unit in the name, e.g. `timeout_ms: u64`, and convert with `Duration::from_millis`",
                    );
                }
            }
        }
    }
}

// The model reads the output through its schema, so a `Duration` is `{secs, nanos}` there too.
//
//     async fn time(…) -> Result<Vec<Duration>, ToolError> { … }
fn check_output_type(cx: &Ctxt, tool: &ToolFn) {
    let output = match tool.output {
        Output::Plain(ty) => Some(ty),
        Output::Result(ty) => result_type_arg(ty, 0),
        Output::Unit => None,
    };
    if let Some(duration) = output.and_then(find_duration) {
        cx.error_spanned_by(
            duration,
            "a `Duration` output reaches the model as `{secs, nanos}`; return a number with its unit in the name instead, e.g. a `#[tool_type]` struct with `elapsed_ms: u64` (`Duration::as_millis`)",
        );
    }
}

/// The first type named `Duration` in `ty`, generic arguments included: serde writes
/// `std::time::Duration` as `{secs, nanos}`, which no model writes for "five seconds". The check
/// is by name, so an alias of it goes unseen.
pub(crate) fn find_duration(ty: &Type) -> Option<&Type> {
    match ty {
        Type::Path(path) => {
            if path
                .path
                .segments
                .last()
                .is_some_and(|segment| segment.ident == "Duration")
            {
                return Some(ty);
            }
            let args = path
                .path
                .segments
                .iter()
                .filter_map(|segment| match &segment.arguments {
                    PathArguments::AngleBracketed(args) => Some(&args.args),
                    _ => None,
                })
                .flatten()
                .filter_map(|arg| match arg {
                    GenericArgument::Type(ty) => Some(ty),
                    GenericArgument::AssocType(assoc) => Some(&assoc.ty),
                    _ => None,
                });
            path.qself
                .iter()
                .map(|qself| &*qself.ty)
                .chain(args)
                .find_map(find_duration)
        }
        Type::Array(array) => find_duration(&array.elem),
        Type::Slice(slice) => find_duration(&slice.elem),
        Type::Reference(reference) => find_duration(&reference.elem),
        Type::Ptr(ptr) => find_duration(&ptr.elem),
        Type::Paren(paren) => find_duration(&paren.elem),
        Type::Group(group) => find_duration(&group.elem),
        Type::Tuple(tuple) => tuple.elems.iter().find_map(find_duration),
        _ => None,
    }
}

// The arguments struct is generated next to the impl block, where `Self` and the impl's type
// parameters do not exist.
//
//     impl<S: Store> Files<S> { #[tool] async fn read(&self, key: S::Key) { … } }
fn check_impl_scope(cx: &Ctxt, tool: &ToolFn) {
    let Context::Method(item_impl) = tool.context else {
        return;
    };
    let generic_names: Vec<String> = item_impl
        .generics
        .params
        .iter()
        .filter_map(|param| match param {
            GenericParam::Type(ty) => Some(ty.ident.to_string()),
            GenericParam::Const(konst) => Some(konst.ident.to_string()),
            GenericParam::Lifetime(_) => None,
        })
        .collect();
    for param in &tool.params {
        if matches!(param.kind, ParamKind::Exec { .. }) {
            continue;
        }
        if let Some(word) = find_ident(param.ty.to_token_stream(), |word| {
            word == "Self" || generic_names.iter().any(|name| name == word)
        }) {
            cx.error_spanned_by(
                param.ty,
                format!(
                    "a `#[tool]` parameter type cannot name `{word}`: the arguments struct is generated outside the `impl` block; write a concrete type"
                ),
            );
        }
    }
    if let Output::Plain(ty) | Output::Result(ty) = tool.output
        && find_ident(ty.to_token_stream(), |word| word == "Self").is_some()
    {
        cx.error_spanned_by(
            ty,
            "a `#[tool]` method's return type cannot name `Self`: the tool type is generated outside the `impl` block; write the type out",
        );
    }
}

// Property names are unique and non-empty.
//
//     async fn f(#[arg(rename = "b")] a: u32, b: u32) { … }
fn check_wire_names(cx: &Ctxt, tool: &ToolFn) {
    let params: Vec<_> = tool.arg_params().collect();
    for (i, param) in params.iter().enumerate() {
        if let Some(rename) = &param.attrs.rename
            && rename.value().is_empty()
        {
            cx.error_spanned_by(rename, "`rename` needs a non-empty property name");
            continue;
        }
        if param.ident.is_some()
            && params[..i]
                .iter()
                .any(|earlier| earlier.ident.is_some() && earlier.wire_name == param.wire_name)
        {
            let at = match &param.attrs.rename {
                Some(rename) => rename.to_token_stream(),
                None => param.original.pat.to_token_stream(),
            };
            cx.error_spanned_by(
                at,
                format!(
                    "two parameters are both named \"{}\" on the wire; give one another name with `#[arg(rename = \"…\")]`",
                    param.wire_name
                ),
            );
        }
    }
}

// `min` cannot exceed `max`: no value would satisfy the constraint.
//
//     #[arg(range(min = 10, max = 1))]
fn check_bounds_order(cx: &Ctxt, tool: &ToolFn) {
    for param in tool.arg_params() {
        for bounds in [&param.attrs.range, &param.attrs.length]
            .into_iter()
            .flatten()
        {
            if let (Some((_, min)), Some((max_expr, max))) = (&bounds.min, &bounds.max)
                && min > max
            {
                cx.error_spanned_by(
                    max_expr,
                    "`max` is smaller than `min`, so no value can satisfy this constraint",
                );
            }
        }
    }
}

// Tools are inherent methods: a trait impl cannot gain the generated `tools()` fn.
//
//     #[toolbox]
//     impl Tools for Files { … }
fn check_inherent_impl(cx: &Ctxt, toolbox: &Toolbox) {
    if let Some((_, path, _)) = &toolbox.original.trait_ {
        cx.error_spanned_by(
            path,
            "`#[toolbox]` goes on an inherent `impl` block (`impl Files { … }`), not on a trait impl",
        );
    }
}

// A toolbox without tools is almost certainly a forgotten `#[tool]`.
//
//     #[toolbox]
//     impl Files { async fn read(&self) { … } }
fn check_has_tools(cx: &Ctxt, toolbox: &Toolbox) {
    if toolbox.tools.is_empty() {
        cx.error_spanned_by(
            &toolbox.original.self_ty,
            "this `#[toolbox]` has no `#[tool]` methods; mark each tool method with `#[tool]`",
        );
    }
}

/// The first identifier in `tokens` that `matches`, walking groups with an explicit stack.
fn find_ident(tokens: TokenStream, matches: impl Fn(&str) -> bool) -> Option<String> {
    let mut stack = vec![tokens.into_iter()];
    while let Some(iter) = stack.last_mut() {
        match iter.next() {
            Some(TokenTree::Ident(ident)) => {
                let word = ident.to_string();
                if matches(&word) {
                    return Some(word);
                }
            }
            Some(TokenTree::Group(group)) => stack.push(group.stream().into_iter()),
            Some(_) => {}
            None => {
                stack.pop();
            }
        }
    }
    None
}
