//! Python rendering of the model: a `Tools` protocol of keyword-only `async def`s, `TypedDict`
//! classes for nested objects and outputs, type aliases, keywords and literals.
//!
//! Target: Python 3.10 and mypy `--strict --python-version 3.10`. A tool whose arguments are an
//! object with plain keys is a method with keyword-only parameters (optional ones default to the
//! schema's default where mypy accepts it, else `...`); the bridge sends keyword arguments as the
//! arguments object. Other argument schemas are one dict parameter. `Required` / `NotRequired`
//! (PEP 655, Python 3.11) come from `typing_extensions` under `TYPE_CHECKING`, so the checker
//! knows them and nothing is imported at run time. The file starts with
//! `from __future__ import annotations` and quotes every type expression Python would evaluate
//! (aliases, functional `TypedDict` values), so it also imports cleanly at run time despite
//! forward and recursive references.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::Value;

use super::model::{DefId, Extra, Kind, Model, NodeId};
use super::text::{NameAllocator, is_ascii_identifier, pascal_case, quoted};

/// Python's hard keywords (Python 3.10 reference §2.3.1, `keyword.kwlist`) and `__debug__`,
/// which cannot be assigned either. Soft keywords (`match`, `case`, `_`, `type`) are ordinary
/// names where we use them.
pub const KEYWORDS: &[&str] = &[
    "False",
    "None",
    "True",
    "and",
    "as",
    "assert",
    "async",
    "await",
    "break",
    "class",
    "continue",
    "def",
    "del",
    "elif",
    "else",
    "except",
    "finally",
    "for",
    "from",
    "global",
    "if",
    "import",
    "in",
    "is",
    "lambda",
    "nonlocal",
    "not",
    "or",
    "pass",
    "raise",
    "return",
    "try",
    "while",
    "with",
    "yield",
    "__debug__",
];

/// Builtins the generated annotations use: a class-body field or a `Tools` method with one of
/// these names would shadow it for the annotations that follow in the same class scope.
const ANNOTATION_BUILTINS: &[&str] = &["bool", "dict", "float", "int", "list", "str"];

/// Names a generated class or alias may not take: the names the file imports or declares, and
/// the builtin it subclasses. Generated names always start with an upper-case letter, so
/// lower-case builtins cannot collide.
pub(crate) const RESERVED: &[&str] = &[
    "Any",
    "Exception",
    "False",
    "Literal",
    "None",
    "NotRequired",
    "Protocol",
    "Required",
    "TYPE_CHECKING",
    "ToolCallError",
    "Tools",
    "True",
    "TypeAlias",
    "TypedDict",
];

/// A fresh allocator for Python type names.
pub(crate) fn names() -> NameAllocator {
    NameAllocator::new(RESERVED)
}

/// True when `name` can be written as a bare name in a class body: an ASCII identifier that is
/// no keyword, does not start with `__` (private-name mangling, Python reference §6.2.1) nor an
/// upper-case letter (generated and `typing` names), and shadows no annotation builtin.
fn is_plain_member(name: &str) -> bool {
    is_ascii_identifier(name)
        && !KEYWORDS.contains(&name)
        && !name.starts_with("__")
        && !name.starts_with(|c: char| c.is_ascii_uppercase())
        && !ANNOTATION_BUILTINS.contains(&name)
}

/// True when a tool can be a bare `async def` of `Tools` and be called as `tools.<name>(...)`:
/// a plain member name that does not start with `_` at all (such attributes are conventionally
/// private, and the runtime object may define its own).
fn is_bare_tool_name(name: &str) -> bool {
    (is_plain_member(name) || is_stable_unicode_identifier(name)) && !name.starts_with('_')
}

/// True for a non-ASCII Python identifier that reads back as itself: Python parses identifiers
/// as XID_Start XID_Continue* and NFKC-normalizes them (`搜索` is a method, as in DSH), so only
/// characters whose NFKC form is themselves may appear. Without normalization tables this admits
/// the scripts where that holds for every letter (CJK ideographs, kana, Hangul syllables, basic
/// Cyrillic and Greek, Latin-1 letters); other names are reached by index.
fn is_stable_unicode_identifier(name: &str) -> bool {
    let stable = |c: char| {
        c.is_ascii_alphanumeric()
            || c == '_'
            || matches!(u32::from(c),
                0x00C0..=0x00D6 | 0x00D8..=0x00F6 | 0x00F8..=0x00FF
                | 0x0391..=0x03A9 | 0x03B1..=0x03C9
                | 0x0410..=0x044F
                | 0x3041..=0x3096 | 0x30A1..=0x30FA
                | 0x3400..=0x4DBF | 0x4E00..=0x9FFF
                | 0xAC00..=0xD7A3)
    };
    let mut chars = name.chars();
    !name.is_ascii()
        && chars
            .next()
            .is_some_and(|c| (c == '_' || unicode_ident::is_xid_start(c)) && stable(c))
        && chars.all(|c| unicode_ident::is_xid_continue(c) && stable(c))
}

/// How a program reaches tool `name` on `tools`: the bare method name, or the quoted name to
/// subscript with.
pub(crate) fn access_key(name: &str) -> String {
    if is_bare_tool_name(name) {
        name.to_owned()
    } else {
        quoted(name)
    }
}

/// One member of the `Tools` protocol.
#[derive(Debug, Serialize)]
pub(crate) struct ToolEntry {
    /// `async def` when true, a `getattr(tools, …)` comment otherwise.
    bare: bool,
    /// The member's lines without the class body's indent: the signature (keyword parameters,
    /// one per line when some have a doc) and the docstring; all comments for a subscript tool.
    lines: Vec<String>,
}

/// The template context of the Python file: sorted sequences only.
#[derive(Debug, Serialize)]
pub(crate) struct Context {
    /// Names imported from `typing`, in a fixed order.
    imports: Vec<&'static str>,
    /// Names imported from `typing_extensions` for the checker only (`Required`, `NotRequired`
    /// of Python 3.11, PEP 655), in a fixed order.
    extensions: Vec<&'static str>,
    /// Generated classes and aliases, in emission order.
    blocks: Vec<String>,
    tools: Vec<ToolEntry>,
    /// True when at least one tool is a bare method (otherwise `Tools` needs `pass`).
    any_bare: bool,
}

/// Builds the template context from the model, allocating class names from `names` (the
/// allocator the model's named types came from). Tools that answer alike share one output class;
/// a class shared so is named after its keys (`ContentOutput`), not after one of the tools, so
/// that no tool's output reads as another's: the first rendering finds the shared classes, a
/// second one names them.
pub(crate) fn context(model: &Model, names: NameAllocator) -> Context {
    let first = Renderer::new(model, names.clone()).tools(&vec![None; model.tools.len()]);
    let mut users: BTreeMap<&str, usize> = BTreeMap::new();
    for class in first.output_classes.iter().flatten() {
        *users.entry(class).or_default() += 1;
    }
    let hints: Vec<Option<String>> = model
        .tools
        .iter()
        .zip(&first.output_classes)
        .map(|(tool, class)| {
            let class = class.as_deref()?;
            (users[class] > 1).then(|| first.render.shared_output_hint(tool.output))
        })
        .collect();
    let Rendered { render, tools, .. } = if hints.iter().all(Option::is_none) {
        first
    } else {
        Renderer::new(model, names).tools(&hints)
    };
    let mut imports = vec!["Protocol"];
    for name in ["Any", "Literal", "TypeAlias", "TypedDict"] {
        if render.uses.contains(name) {
            imports.push(name);
        }
    }
    imports.sort_unstable();
    let extensions: Vec<&'static str> = ["NotRequired", "Required"]
        .into_iter()
        .filter(|name| render.uses.contains(name))
        .collect();
    if !extensions.is_empty() {
        imports.push("TYPE_CHECKING");
        imports.sort_unstable();
    }
    Context {
        imports,
        extensions,
        blocks: render.blocks,
        any_bare: tools.iter().any(|t| t.bare),
        tools,
    }
}

/// How a tool's arguments appear in its signature.
enum Params {
    /// Keyword-only parameters `(self, *, name: T, opt: U = ...)`, each with its doc.
    Keywords(Vec<Param>),
    /// One positional dict `(self, args: T)`: the arguments are no object with plain keys.
    Dict(String),
}

/// One keyword parameter.
struct Param {
    /// `name: T` or `name: T = ...`.
    text: String,
    doc: Option<String>,
}

/// Longest signature written on one line (no parameter has a doc).
const MAX_INLINE_SIGNATURE: usize = 120;

/// The lines of one `Tools` member. A bare tool is an `async def` with its description as the
/// docstring; any other name is the same shape in comments, called as
/// `getattr(tools, "name")(...)` (the form every runtime accepts: embedded Monty has no
/// `__getitem__` on objects, and a `Protocol` is not indexable for mypy), its description after
/// the return type.
fn member_lines(
    name: &str,
    bare: bool,
    params: &Params,
    output: &str,
    doc: Option<&str>,
) -> Vec<String> {
    let (head, first) = if bare {
        (format!("async def {name}("), "self, ")
    } else {
        (format!("# getattr(tools, {})(", quoted(name)), "")
    };
    let tail = if bare {
        format!(") -> {output}:")
    } else {
        format!(") -> {output}")
    };
    // A comment is not type-checked: the keyword-only marker would only cost tokens there.
    let star = if bare { "*, " } else { "" };
    let mut lines = Vec::new();
    match params {
        Params::Dict(ty) => lines.push(format!("{head}{first}args: {ty}{tail}")),
        Params::Keywords(params) if params.is_empty() => {
            lines.push(format!("{head}{}{tail}", first.trim_end_matches(", ")));
        }
        Params::Keywords(params) => {
            let inline = format!(
                "{head}{first}{star}{}{tail}",
                params
                    .iter()
                    .map(|p| p.text.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if params.iter().all(|p| p.doc.is_none()) && inline.len() <= MAX_INLINE_SIGNATURE {
                lines.push(inline);
            } else {
                lines.push(format!("{head}{first}{}", star.trim_end()));
                for param in params {
                    let doc = param
                        .doc
                        .as_ref()
                        .map_or_else(String::new, |doc| format!(" {}", comment(doc)));
                    let text = format!("{},{doc}", param.text);
                    lines.push(if bare { text } else { comment(&text) });
                }
                lines.push(if bare { tail } else { format!("# {tail}") });
            }
        }
    }
    // The description ends the signature's last line (as the docstring of a method): a line
    // break and an indent cheaper than a line of its own.
    if let Some(last) = lines.last_mut() {
        match doc {
            Some(doc) if bare => last.push_str(&format!(" \"\"\"{}\"\"\"", docstring_text(doc))),
            Some(doc) => last.push_str(&format!(": {doc}")),
            None if bare => last.push_str(" ..."),
            None => {}
        }
    }
    lines
}

/// Docstring body text: backslashes doubled and quotes escaped, so neither an escape sequence
/// nor a `"""` inside the description can end or alter the string.
fn docstring_text(line: &str) -> String {
    line.replace('\\', "\\\\").replace('"', "\\\"")
}

/// A declared property before rendering: key, schema node, required.
type Part = (String, NodeId, bool);

/// A class already emitted: its name and its fields' docs.
type SharedClass = (String, Vec<Option<String>>);

/// The stem under which named types (`$defs`) are kept among the emitted shapes; no generated
/// name has it.
const NAMED_TYPE: &str = "#";

/// The stem under which the classes of tool outputs are kept among the emitted shapes: tools
/// that answer alike share one output class, as in the TypeScript SDK.
const OUTPUT_TYPE: &str = "->";

/// How an emitted class may stand for a later shape like it.
#[derive(Clone, Copy, PartialEq)]
enum Sharing {
    /// A named type (`$defs`): any later anonymous shape like it reads its name.
    Named,
    /// An anonymous shape: reused under the same name stem, or for a named type.
    Anonymous,
    /// A tool's output: reused for another tool's output, or for a named type.
    Output,
}

/// Every tool rendered once.
struct Rendered<'m> {
    render: Renderer<'m>,
    /// Each tool's output class, when its output is one.
    output_classes: Vec<Option<String>>,
    tools: Vec<ToolEntry>,
}

/// A field of a `TypedDict` being assembled.
#[derive(Clone)]
struct Field {
    key: String,
    ty: String,
    doc: Option<String>,
    required: bool,
}

/// What an assembled object says about undeclared keys in its closing comment. Declared keys
/// render closed whether or not the schema admits more (extra keys stay accepted when the call
/// is checked); only typed extra keys are worth a line.
enum ExtraNote {
    None,
    Typed(String),
}

struct Renderer<'m> {
    model: &'m Model,
    names: NameAllocator,
    blocks: Vec<String>,
    /// Classes emitted so far, by shape (name stem — [`NAMED_TYPE`] for named types —,
    /// totality, keys, types and extra keys; docs apart), each with its name and field docs: an
    /// object shape met again reuses its class instead of repeating it.
    shapes: std::collections::BTreeMap<String, Vec<SharedClass>>,
    uses: BTreeSet<&'static str>,
    def_emitted: Vec<bool>,
    def_queue: Vec<DefId>,
    /// Set while the next [`Renderer::ty`] renders a tool's output type.
    output_root: bool,
    /// The class a tool's output type rendered as, when it is one.
    output_class: Option<String>,
}

impl<'m> Renderer<'m> {
    fn new(model: &'m Model, names: NameAllocator) -> Self {
        Renderer {
            model,
            names,
            blocks: Vec::new(),
            shapes: Default::default(),
            uses: BTreeSet::new(),
            def_emitted: vec![false; model.defs.len()],
            def_queue: Vec::new(),
            output_root: false,
            output_class: None,
        }
    }

    /// Renders every tool, the output class of tool `i` named from `output_hints[i]` when given
    /// (else `<Tool>Output`).
    fn tools(mut self, output_hints: &[Option<String>]) -> Rendered<'m> {
        let mut classes = Vec::with_capacity(self.model.tools.len());
        let mut tools = Vec::with_capacity(self.model.tools.len());
        for (tool, hint) in self.model.tools.iter().zip(output_hints) {
            let base = pascal_case(&tool.name);
            let params = self.parameters(tool.args, &base);
            self.output_root = true;
            let hint = hint.clone().unwrap_or_else(|| format!("{base}Output"));
            let output = self.ty(tool.output, &hint);
            classes.push(self.output_class.take());
            self.drain_defs();
            let bare = is_bare_tool_name(&tool.name);
            tools.push(ToolEntry {
                bare,
                lines: member_lines(&tool.name, bare, &params, &output, tool.doc.as_deref()),
            });
        }
        Rendered {
            render: self,
            output_classes: classes,
            tools,
        }
    }

    /// The name of an output class several tools share: its keys in Pascal case, then
    /// `Output` (`SharedOutput` past three keys).
    fn shared_output_hint(&self, output: NodeId) -> String {
        let keys = self
            .object_parts(output)
            .map(|(parts, _)| parts)
            .unwrap_or_default();
        let stem: String = if keys.len() <= 3 {
            keys.iter().map(|(key, _, _)| pascal_case(key)).collect()
        } else {
            String::from("Shared")
        };
        format!("{stem}Output")
    }

    fn any(&mut self) -> String {
        self.uses.insert("Any");
        "Any".to_owned()
    }

    /// Emits every named type referenced so far and not yet emitted, and those they reference.
    fn drain_defs(&mut self) {
        while let Some(def) = self.def_queue.pop() {
            let name = self.model.defs[def].name.clone();
            let node = self.model.defs[def].node;
            let doc = self.model.node(node).doc.clone();
            if self.model.defs[def].degenerate {
                let any = self.any();
                self.alias(&name, &any, doc.as_deref());
                continue;
            }
            match self.object_parts(node) {
                Some((parts, extra)) if !parts.is_empty() || matches!(extra, Extra::Closed) => {
                    self.class(&name, parts, &extra, doc.as_deref(), Sharing::Named);
                }
                _ => {
                    let ty = self.ty(node, &name);
                    self.alias(&name, &ty, doc.as_deref());
                }
            }
        }
    }

    fn alias(&mut self, name: &str, ty: &str, doc: Option<&str>) {
        self.uses.insert("TypeAlias");
        let mut block = String::new();
        if let Some(doc) = doc {
            block.push_str(&format!("{}\n", comment(doc)));
        }
        block.push_str(&format!("{name}: TypeAlias = {}", quoted(ty)));
        self.blocks.push(block);
    }

    /// Renders node `id` as a type expression; object nodes become classes named from `hint`.
    /// Recursion follows the model's tree, which lowering bounded in depth.
    fn ty(&mut self, id: NodeId, hint: &str) -> String {
        let output_root = std::mem::take(&mut self.output_root);
        match &self.model.node(id).kind {
            Kind::Unknown | Kind::Any | Kind::Never => self.any(),
            Kind::Null => "None".to_owned(),
            Kind::Boolean => "bool".to_owned(),
            Kind::Integer => "int".to_owned(),
            Kind::Number => "float".to_owned(),
            Kind::String => "str".to_owned(),
            Kind::Literals(values) => self.literals(values),
            Kind::Array(items) => format!("list[{}]", self.ty(*items, hint)),
            Kind::Tuple { items, rest, .. } => {
                // JSON arrays arrive as Python lists whatever their schema, so a tuple schema is a
                // list of the union of its positions.
                let mut members: Vec<NodeId> = items.clone();
                members.extend(*rest);
                let parts: Vec<String> = members.iter().map(|m| self.ty(*m, hint)).collect();
                match union(parts) {
                    Some(items) => format!("list[{items}]"),
                    None => format!("list[{}]", self.any()),
                }
            }
            Kind::Object(_) | Kind::Intersection(_) => match self.object_parts(id) {
                Some((parts, extra)) => {
                    if parts.is_empty() && !matches!(extra, Extra::Closed) {
                        let value = match extra {
                            Extra::Typed(node) => self.ty(node, hint),
                            _ => self.any(),
                        };
                        return format!("dict[str, {value}]");
                    }
                    let name = self.names.allocate(hint);
                    if !output_root {
                        return self.class(&name, parts, &extra, None, Sharing::Anonymous);
                    }
                    let class = self.class(&name, parts, &extra, None, Sharing::Output);
                    self.output_class = Some(class.clone());
                    class
                }
                None => self.intersection_fallback(id, hint),
            },
            Kind::Union(members) => {
                let members = members.clone();
                let parts: Vec<String> = members
                    .iter()
                    .enumerate()
                    .map(|(n, m)| self.ty(*m, &format!("{hint}{}", n + 1)))
                    .collect();
                union(parts).unwrap_or_else(|| self.any())
            }
            Kind::Ref(def) => {
                if !self.def_emitted[*def] {
                    self.def_emitted[*def] = true;
                    self.def_queue.push(*def);
                }
                self.model.defs[*def].name.clone()
            }
        }
    }

    /// The parameters of a tool whose arguments schema is `args`: keyword parameters when it is
    /// an object (or merged intersection) whose keys are all plain names other than `self` and
    /// that admits no typed extra keys; otherwise one dict parameter of the rendered type.
    fn parameters(&mut self, args: NodeId, base: &str) -> Params {
        match self.object_parts(args) {
            Some((parts, Extra::Open | Extra::Closed))
                if parts
                    .iter()
                    .all(|(key, ..)| is_plain_member(key) && key != "self") =>
            {
                let params = parts
                    .into_iter()
                    .map(|(key, node, required)| {
                        let ty = self.ty(node, &pascal_case(&key));
                        let mut doc = self.model.node(node).doc.clone();
                        let default = if required {
                            String::new()
                        } else {
                            match self.default_literal(node, &mut doc) {
                                Some(literal) => format!(" = {literal}"),
                                None => " = ...".to_owned(),
                            }
                        };
                        Param {
                            text: format!("{key}: {ty}{default}"),
                            doc,
                        }
                    })
                    .collect();
                Params::Keywords(params)
            }
            _ => Params::Dict(self.ty(args, &format!("{base}Args"))),
        }
    }

    /// The Python literal of the default of parameter `node` when the type checker accepts it
    /// for the parameter's type (`= 100`, `= "."`, `= None`); the doc's `default` note then goes,
    /// the signature says it. `None` (and the doc untouched) otherwise.
    fn default_literal(&self, node: NodeId, doc: &mut Option<String>) -> Option<String> {
        let value = self.model.node(node).default.as_ref()?;
        if !self.admits(node, value, 0) {
            return None;
        }
        let literal = match value {
            Value::Null => "None".to_owned(),
            Value::Bool(true) => "True".to_owned(),
            Value::Bool(false) => "False".to_owned(),
            Value::Number(n) => n.to_string(),
            Value::String(s) => quoted(s),
            Value::Array(_) | Value::Object(_) => return None,
        };
        // The note as the model wrote it: last among the notes, `default <value>`.
        let note = match value {
            Value::String(s) => format!("default {s}"),
            other => format!("default {other}"),
        };
        let text = doc.as_deref().unwrap_or_default();
        let stripped = if text == format!("({note})") {
            None
        } else if let Some(rest) = text.strip_suffix(&format!(" ({note})")) {
            Some(rest.to_owned())
        } else if let Some(rest) = text.strip_suffix(&format!("; {note})")) {
            Some(format!("{rest})"))
        } else {
            // A note cut or respelled in the doc (long, or with control characters): the
            // literal would say it differently, so the doc keeps it and the default stays `...`.
            return None;
        };
        *doc = stripped;
        Some(literal)
    }

    /// True when `value` is a value of the type rendered for `node`, as mypy sees a literal
    /// default: a string for `str` or a `Literal` listing it, an integer for `int`, any number
    /// for `float`, a boolean for `bool`, `None` for a union with `None`. References are followed
    /// a few levels; anything else is refused.
    fn admits(&self, node: NodeId, value: &Value, depth: usize) -> bool {
        if depth > 8 {
            return false;
        }
        match (&self.model.node(node).kind, value) {
            (Kind::String, Value::String(_))
            | (Kind::Boolean, Value::Bool(_))
            | (Kind::Null, Value::Null)
            | (Kind::Number, Value::Number(_))
            | (Kind::Unknown | Kind::Any, _) => true,
            (Kind::Integer, Value::Number(n)) => n.is_i64() || n.is_u64(),
            (Kind::Literals(values), value) => {
                !matches!(value, Value::Number(n) if !(n.is_i64() || n.is_u64()))
                    && values.contains(value)
            }
            (Kind::Union(members), value) => {
                members.iter().any(|m| self.admits(*m, value, depth + 1))
            }
            (Kind::Ref(def), value) => {
                !self.model.defs[*def].degenerate
                    && self.admits(self.model.defs[*def].node, value, depth + 1)
            }
            _ => false,
        }
    }

    /// An intersection that is not all objects: its one constraining member if there is exactly
    /// one, otherwise `Any` (Python has no intersection type).
    fn intersection_fallback(&mut self, id: NodeId, hint: &str) -> String {
        let Kind::Intersection(members) = &self.model.node(id).kind else {
            return self.any();
        };
        let constraining: Vec<NodeId> = members
            .iter()
            .copied()
            .filter(|m| !matches!(self.model.node(*m).kind, Kind::Any | Kind::Unknown))
            .collect();
        match constraining.as_slice() {
            [only] => self.ty(*only, hint),
            _ => self.any(),
        }
    }

    /// The properties (key, node, required) and extra-key rule of `id` if it is an object, or an
    /// intersection whose members (through references) are all objects, merged: the first
    /// declaration of a key wins, a key required anywhere is required, closed if any member is
    /// closed. Iterative, with a visited set, so reference chains of any length or with cycles
    /// terminate.
    fn object_parts(&self, id: NodeId) -> Option<(Vec<Part>, Extra)> {
        let model = self.model;
        let mut objects = Vec::new();
        let mut stack = vec![id];
        let mut visited_defs = BTreeSet::new();
        while let Some(node) = stack.pop() {
            match &model.node(node).kind {
                Kind::Object(object) => objects.push(object),
                Kind::Intersection(members) => stack.extend(members.iter().rev()),
                // A reference only merges when reached through an intersection.
                Kind::Ref(def) if node != id => {
                    if model.defs[*def].degenerate {
                        return None;
                    }
                    if visited_defs.insert(*def) {
                        stack.push(model.defs[*def].node);
                    }
                }
                Kind::Any | Kind::Unknown if node != id => {}
                _ => return None,
            }
        }
        let mut declared: Vec<Part> = Vec::new();
        let mut extra = Extra::Open;
        for object in objects {
            for property in &object.properties {
                match declared
                    .iter_mut()
                    .find(|(name, ..)| *name == property.name)
                {
                    Some(entry) => entry.2 |= property.required,
                    None => {
                        declared.push((property.name.clone(), property.node, property.required))
                    }
                }
            }
            extra = match (extra, object.extra) {
                (Extra::Closed, _) | (_, Extra::Closed) => Extra::Closed,
                (Extra::Typed(node), _) | (Extra::Open, Extra::Typed(node)) => Extra::Typed(node),
                (Extra::Open, Extra::Open) => Extra::Open,
            };
        }
        Some((declared, extra))
    }

    /// Emits the `TypedDict` (or total base plus `total=False` subclass) for an object named
    /// `name`. Field types are rendered first, so nested classes precede the class using them.
    /// Returns the class name: `name`, or for an anonymous class or an output the earlier class
    /// of the same shape (see [`Sharing`]).
    fn class(
        &mut self,
        name: &str,
        parts: Vec<Part>,
        extra: &Extra,
        doc: Option<&str>,
        sharing: Sharing,
    ) -> String {
        self.uses.insert("TypedDict");
        let mut fields = Vec::with_capacity(parts.len());
        for (key, node, required) in parts {
            let ty = self.ty(node, &pascal_case(&key));
            let doc = self.model.node(node).doc.clone();
            fields.push(Field {
                key,
                ty,
                doc,
                required,
            });
        }
        let note = match extra {
            Extra::Closed | Extra::Open => ExtraNote::None,
            Extra::Typed(node) => ExtraNote::Typed(self.ty(*node, &format!("{name}Value"))),
        };
        // One class: the fewer of the required and the optional keys are marked (`Required` in
        // a `total=False` class, `NotRequired` in a total one).
        let optional = fields.iter().filter(|f| !f.required).count();
        let total = optional * 2 <= fields.len();
        let mark = if total { "NotRequired" } else { "Required" };
        for field in &mut fields {
            if field.required != total {
                self.uses.insert(mark);
                field.ty = format!("{mark}[{}]", field.ty);
            }
        }
        let mut block = String::new();
        if let Some(doc) = doc {
            block.push_str(&format!("{}\n", comment(doc)));
        }
        // Keyed by the name's stem too: a shape met under another key keeps its own name, so no
        // type reads as something it is not. A named type (`$defs`) is a name of its own: any
        // later shape like it reads that name. An undocumented shape (typically an output)
        // reuses a documented one: its docs only add to what the fields say.
        let undocumented: Vec<Field> = fields
            .iter()
            .map(|f| Field {
                doc: None,
                ..f.clone()
            })
            .collect();
        let body = typed_dict("", total, &undocumented, &note);
        let docs: Vec<Option<String>> = fields.iter().map(|f| f.doc.clone()).collect();
        let named = format!("{NAMED_TYPE}\n{body}");
        if sharing != Sharing::Named {
            let fits = |(_, earlier_docs): &&SharedClass| {
                *earlier_docs == docs || docs.iter().all(Option::is_none)
            };
            let key = match sharing {
                Sharing::Output => OUTPUT_TYPE,
                _ => stem(name),
            };
            let own = format!("{key}\n{body}");
            let reused = [&own, &named]
                .into_iter()
                .find_map(|key| self.shapes.get(key)?.iter().find(fits))
                .map(|(earlier, _)| earlier.clone());
            if let Some(earlier) = reused {
                self.names.release(name);
                return earlier;
            }
            self.shapes
                .entry(own)
                .or_default()
                .push((name.to_owned(), docs));
        } else {
            self.shapes
                .entry(named)
                .or_default()
                .push((name.to_owned(), docs));
        }
        block.push_str(&typed_dict(name, total, &fields, &note));
        self.blocks.push(block);
        name.to_owned()
    }

    /// `Literal[...]` for string, integer, boolean and null values; a non-integral number is not
    /// a valid `Literal` parameter (PEP 586), so it widens to `float`.
    fn literals(&mut self, values: &[Value]) -> String {
        let mut literal = Vec::new();
        let mut floats = false;
        for value in values {
            match value {
                Value::String(s) => literal.push(quoted(s)),
                Value::Bool(true) => literal.push("True".to_owned()),
                Value::Bool(false) => literal.push("False".to_owned()),
                Value::Null => literal.push("None".to_owned()),
                Value::Number(n) => match integer_text(n) {
                    Some(text) => literal.push(text),
                    None => floats = true,
                },
                Value::Array(_) | Value::Object(_) => {}
            }
        }
        let mut parts = Vec::new();
        if !literal.is_empty() {
            self.uses.insert("Literal");
            let mut seen = BTreeSet::new();
            literal.retain(|l| seen.insert(l.clone()));
            parts.push(format!("Literal[{}]", literal.join(", ")));
        }
        if floats {
            parts.push("float".to_owned());
        }
        union(parts).unwrap_or_else(|| self.any())
    }
}

/// `# text`, never a type comment: CPython reads a comment starting `type:` (after blanks) as
/// one when the checker parses with type comments, and a stray one is a syntax error, so such a
/// text gets a blank before its colon.
fn comment(text: &str) -> String {
    let start = text.len() - text.trim_start_matches([' ', '\t']).len();
    if text[start..].starts_with("type:") {
        format!("# {}type :{}", &text[..start], &text[start + 5..])
    } else {
        format!("# {text}")
    }
}

/// `name` without the digits the allocator appended.
fn stem(name: &str) -> &str {
    name.trim_end_matches(|c: char| c.is_ascii_digit())
}

/// Exact decimal digits of an integral JSON number (`1e21` → `1000000000000000000000`), or
/// `None` for a fractional one.
fn integer_text(n: &serde_json::Number) -> Option<String> {
    if n.is_i64() || n.is_u64() {
        return Some(n.to_string());
    }
    let f = n.as_f64()?;
    (f.is_finite() && f.fract() == 0.0).then(|| format!("{f:.0}"))
}

/// Members joined with ` | `, repeats dropped; `None` when there are none.
fn union(parts: Vec<String>) -> Option<String> {
    let mut seen = BTreeSet::new();
    let unique: Vec<String> = parts
        .into_iter()
        .filter(|p| seen.insert(p.clone()))
        .collect();
    (!unique.is_empty()).then(|| unique.join(" | "))
}

/// The closing comment of an object that admits undeclared keys.
fn extra_comment(note: &ExtraNote, indent: &str) -> String {
    match note {
        ExtraNote::None => String::new(),
        ExtraNote::Typed(ty) => {
            format!("{indent}# Keys not listed here hold values of type {ty}.\n")
        }
    }
}

/// A field's doc as a trailing comment (` # …`: one space, as valid as PEP 8's two and a token
/// cheaper), or nothing.
fn trailing(field: &Field) -> String {
    field
        .doc
        .as_ref()
        .map_or_else(String::new, |doc| format!(" {}", comment(doc)))
}

/// One `TypedDict` definition in class syntax, which reads best and carries each field's doc.
/// Keys that cannot be class members (`my-field`, `class`, `Upper`) go into a base of the
/// functional form (PEP 589 "Alternative Syntax", which accepts any string key) named `_<name>`,
/// which the class extends; with no plain key at all, the functional form alone. Bodies are
/// indented by one space: as valid as four, and a token cheaper per line.
fn typed_dict(name: &str, total: bool, fields: &[Field], note: &ExtraNote) -> String {
    let total_arg = if total { "" } else { ", total=False" };
    let (plain, odd): (Vec<&Field>, Vec<&Field>) =
        fields.iter().partition(|f| is_plain_member(&f.key));
    let functional =
        |text: &mut String, name: &str, fields: &[&Field], note: Option<&ExtraNote>| {
            text.push_str(&format!("{name} = TypedDict({}, {{\n", quoted(name)));
            for field in fields {
                text.push_str(&format!(
                    " {}: {},{}\n",
                    quoted(&field.key),
                    quoted(&field.ty),
                    trailing(field)
                ));
            }
            if let Some(note) = note {
                text.push_str(&extra_comment(note, " "));
            }
            text.push_str(&format!("}}{total_arg})\n"));
        };
    let mut text = String::new();
    if plain.is_empty() && !odd.is_empty() {
        functional(&mut text, name, &odd, Some(note));
        return text.trim_end().to_owned();
    }
    let base = if odd.is_empty() {
        "TypedDict".to_owned()
    } else {
        // Names the allocator hands out start with a letter, so `_<name>` is never taken.
        let base = format!("_{name}");
        functional(&mut text, &base, &odd, None);
        base
    };
    text.push_str(&format!("class {name}({base}{total_arg}):\n"));
    for field in &plain {
        text.push_str(&format!(
            " {}: {}{}\n",
            field.key,
            field.ty,
            trailing(field)
        ));
    }
    text.push_str(&extra_comment(note, " "));
    if plain.is_empty() {
        text.push_str(" pass\n");
    }
    text.trim_end().to_owned()
}
