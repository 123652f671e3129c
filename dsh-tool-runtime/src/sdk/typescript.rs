//! TypeScript rendering of the model: keys, keywords, literals and type expressions.

use std::collections::BTreeSet;

use serde::Serialize;
use serde_json::Value;

use super::model::{Extra, Kind, Model, NodeId};
use super::text::{NameAllocator, is_ascii_identifier, quoted};

/// Names a generated type may not take in the file's global scope. Sources: the names this SDK
/// declares itself; TypeScript's reserved and contextual type keywords (TypeScript spec §2.2.1,
/// `src/compiler/scanner.ts` `textToKeywordObj`) that start with a capital letter or are types;
/// the global names of `lib.es2023.d.ts` and `lib.dom.d.ts` a schema name plausibly collides with
/// (`Node`, `Event`, `Record`…): a script-scope `type` with one of them is a duplicate identifier.
pub(crate) const RESERVED: &[&str] = &[
    // Declared by the SDK.
    "JsonValue",
    "JsonObject",
    "ToolArgsMap",
    "ToolOutputMap",
    "ToolCallError",
    // ECMAScript globals (lib.es5 … lib.es2023).
    "AggregateError",
    "Array",
    "ArrayBuffer",
    "ArrayBufferLike",
    "ArrayBufferView",
    "ArrayLike",
    "AsyncGenerator",
    "AsyncIterable",
    "AsyncIterableIterator",
    "AsyncIterator",
    "Atomics",
    "Awaited",
    "BigInt",
    "BigInt64Array",
    "BigUint64Array",
    "Boolean",
    "Capitalize",
    "ConcatArray",
    "ConstructorParameters",
    "DataView",
    "Date",
    "Error",
    "EvalError",
    "Exclude",
    "Extract",
    "FinalizationRegistry",
    "Float32Array",
    "Float64Array",
    "Function",
    "Generator",
    "Infinity",
    "InstanceType",
    "Int16Array",
    "Int32Array",
    "Int8Array",
    "Intl",
    "Iterable",
    "IterableIterator",
    "Iterator",
    "JSON",
    "Lowercase",
    "Map",
    "Math",
    "NaN",
    "NoInfer",
    "NonNullable",
    "Number",
    "Object",
    "Omit",
    "OmitThisParameter",
    "Parameters",
    "Partial",
    "Pick",
    "Promise",
    "PromiseLike",
    "PropertyDescriptor",
    "PropertyKey",
    "Proxy",
    "RangeError",
    "Readonly",
    "ReadonlyArray",
    "ReadonlyMap",
    "ReadonlySet",
    "Record",
    "ReferenceError",
    "Reflect",
    "RegExp",
    "Required",
    "ReturnType",
    "Set",
    "SharedArrayBuffer",
    "String",
    "Symbol",
    "SyntaxError",
    "TemplateStringsArray",
    "ThisParameterType",
    "ThisType",
    "TypeError",
    "URIError",
    "Uint16Array",
    "Uint32Array",
    "Uint8Array",
    "Uint8ClampedArray",
    "Uncapitalize",
    "Uppercase",
    "WeakKey",
    "WeakMap",
    "WeakRef",
    "WeakSet",
    // Common DOM and Web API globals (lib.dom.d.ts), present when a checker loads the DOM lib.
    "AbortController",
    "AbortSignal",
    "Attr",
    "Blob",
    "Body",
    "Cache",
    "Comment",
    "Credential",
    "Document",
    "Element",
    "Event",
    "EventTarget",
    "File",
    "FileList",
    "FormData",
    "Headers",
    "History",
    "Image",
    "Location",
    "Navigator",
    "Node",
    "NodeList",
    "Notification",
    "Option",
    "Performance",
    "Permissions",
    "Range",
    "Request",
    "Response",
    "Screen",
    "Selection",
    "Storage",
    "Text",
    "TextDecoder",
    "TextEncoder",
    "URL",
    "URLSearchParams",
    "WebSocket",
    "Window",
    "Worker",
];

/// One tool's lines in `ToolArgsMap` / `ToolOutputMap`.
#[derive(Debug, Serialize)]
pub(crate) struct ToolEntry {
    #[serde(skip)]
    name: String,
    /// Property key: a bare identifier or a quoted string.
    key: String,
    doc: Option<String>,
    args: String,
    /// The output type; `None` for any JSON value, which `tools` declares without an entry.
    output: Option<String>,
}

/// One named type (`type Name = …`).
#[derive(Debug, Serialize)]
pub(crate) struct DefEntry {
    name: String,
    doc: Option<String>,
    body: String,
}

/// The template context of the TypeScript file: sorted sequences only.
#[derive(Debug, Serialize)]
pub(crate) struct Context {
    tools: Vec<ToolEntry>,
    defs: Vec<DefEntry>,
    /// True when some tool has a typed output (an entry in `ToolOutputMap`).
    any_output: bool,
    /// Outputs shared by several tools, declared once each as a `Record` over their keys that
    /// `ToolOutputMap` extends; those tools have no entry of their own.
    shared_outputs: Vec<SharedOutput>,
}

/// One output type answered by several tools: `Record<keys, output>`.
#[derive(Debug, Serialize)]
pub(crate) struct SharedOutput {
    /// The tools' names as string literal types joined with ` | `.
    keys: String,
    output: String,
}

/// A fresh allocator for TypeScript type names.
pub(crate) fn names() -> NameAllocator {
    NameAllocator::new(RESERVED)
}

/// Builds the template context from the model.
pub(crate) fn context(model: &Model) -> Context {
    let render = Renderer { model };
    let mut tools: Vec<ToolEntry> = model
        .tools
        .iter()
        .map(|tool| ToolEntry {
            name: tool.name.clone(),
            key: key(&tool.name),
            doc: tool.doc.clone(),
            args: render.ty(tool.args, 0).text,
            output: Some(render.ty(tool.output, 0).text).filter(|ty| ty != "JsonValue"),
        })
        .collect();
    let defs = model
        .defs
        .iter()
        .map(|def| DefEntry {
            name: def.name.clone(),
            doc: model.node(def.node).doc.clone(),
            body: if def.degenerate {
                "unknown".to_owned()
            } else {
                render.ty(def.node, 0).text
            },
        })
        .collect();
    let any_output = tools.iter().any(|tool| tool.output.is_some());
    let shared_outputs = share_outputs(&mut tools);
    Context {
        tools,
        defs,
        any_output,
        shared_outputs,
    }
}

/// Takes the outputs that several tools share out of their entries, in the order of their first
/// tool: a model reads one shape once, and each tool name once more instead of the shape again.
fn share_outputs(tools: &mut [ToolEntry]) -> Vec<SharedOutput> {
    let mut users: Vec<(String, Vec<usize>)> = Vec::new();
    for (index, tool) in tools.iter().enumerate() {
        if let Some(output) = &tool.output {
            match users.iter_mut().find(|(shared, _)| shared == output) {
                Some((_, indices)) => indices.push(index),
                None => users.push((output.clone(), vec![index])),
            }
        }
    }
    users
        .into_iter()
        .filter(|(_, indices)| indices.len() > 1)
        .map(|(output, indices)| {
            let keys: Vec<String> = indices
                .iter()
                .map(|&index| {
                    tools[index].output = None;
                    quoted(&tools[index].name)
                })
                .collect();
            SharedOutput {
                keys: keys.join(" | "),
                output,
            }
        })
        .collect()
}

/// A property key: bare when it is a plain identifier, JSON-style quoted otherwise. `__proto__`
/// is always quoted: as a bare key in an object literal it sets the prototype instead.
pub(crate) fn key(name: &str) -> String {
    if is_ascii_identifier(name) && name != "__proto__" {
        name.to_owned()
    } else {
        quoted(name)
    }
}

/// Binding strength of a rendered type, for parenthesising.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Prec {
    Union,
    Intersection,
    Atom,
}

struct Rendered {
    text: String,
    prec: Prec,
}

impl Rendered {
    fn atom(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            prec: Prec::Atom,
        }
    }

    /// The text, parenthesised when it binds looser than `context`.
    fn at(self, context: Prec) -> String {
        if (self.prec as u8) < (context as u8) {
            format!("({})", self.text)
        } else {
            self.text
        }
    }
}

struct Renderer<'m> {
    model: &'m Model,
}

impl Renderer<'_> {
    /// Renders node `id`; `indent` is the nesting level of the line the type starts on (one
    /// space each: as readable to a model as two, and a token cheaper per line). Recursion follows the model's tree, which lowering bounded in depth.
    fn ty(&self, id: NodeId, indent: usize) -> Rendered {
        match &self.model.node(id).kind {
            Kind::Unknown => Rendered::atom("unknown"),
            Kind::Any => Rendered::atom("JsonValue"),
            Kind::Never => Rendered::atom("never"),
            Kind::Null => Rendered::atom("null"),
            Kind::Boolean => Rendered::atom("boolean"),
            Kind::Integer | Kind::Number => Rendered::atom("number"),
            Kind::String => Rendered::atom("string"),
            Kind::Literals(values) => join(
                values.iter().map(|v| Rendered::atom(literal(v))).collect(),
                Prec::Union,
            ),
            Kind::Array(items) => array(self.ty(*items, indent)),
            Kind::Tuple { items, min, rest } => {
                let mut parts = Vec::with_capacity(items.len() + 1);
                for (position, item) in items.iter().enumerate() {
                    let item = self.ty(*item, indent);
                    if position < *min {
                        parts.push(item.text);
                    } else {
                        parts.push(format!("{}?", item.at(Prec::Atom)));
                    }
                }
                if let Some(rest) = rest {
                    parts.push(format!("...{}", array(self.ty(*rest, indent)).text));
                }
                Rendered::atom(format!("[{}]", parts.join(", ")))
            }
            Kind::Object(object) => {
                if object.properties.is_empty() {
                    let value = match &object.extra {
                        Extra::Open => return Rendered::atom("JsonObject"),
                        Extra::Closed => "never".to_owned(),
                        Extra::Typed(node) => self.ty(*node, indent).text,
                    };
                    return Rendered::atom(format!("Record<string, {value}>"));
                }
                // Declared keys render closed whether or not the schema admits more: the model
                // writes what is declared, and extra keys stay accepted when the call is checked.
                let extra = match &object.extra {
                    Extra::Open | Extra::Closed => None,
                    Extra::Typed(node) => Some(self.ty(*node, indent).text),
                };
                let members: Vec<(Option<&String>, String)> = object
                    .properties
                    .iter()
                    .map(|property| {
                        let optional = if property.required { "" } else { "?" };
                        let ty = self.ty(property.node, indent + 1).text;
                        (
                            self.model.node(property.node).doc.as_ref(),
                            format!("{}{optional}: {ty}", key(&property.name)),
                        )
                    })
                    .collect();
                let text = object_text(&members, indent);
                match extra {
                    // An intersection, not an index signature: a signature would have to admit
                    // every declared property's type.
                    Some(value) => Rendered {
                        text: format!("{text} & Record<string, {value}>"),
                        prec: Prec::Intersection,
                    },
                    None => Rendered::atom(text),
                }
            }
            Kind::Union(members) => join(
                members.iter().map(|m| self.ty(*m, indent)).collect(),
                Prec::Union,
            ),
            Kind::Intersection(members) => join(
                members.iter().map(|m| self.ty(*m, indent)).collect(),
                Prec::Intersection,
            ),
            Kind::Ref(def) => Rendered::atom(self.model.defs[*def].name.clone()),
        }
    }
}

/// Longest object type written on one line (undocumented members only).
const MAX_INLINE_OBJECT: usize = 72;

/// `{ a: T; b?: U }` when no member has a doc and the line stays short, else one member per line
/// (one space per level) with its doc comment above it.
fn object_text(members: &[(Option<&String>, String)], indent: usize) -> String {
    let inline = format!(
        "{{ {} }}",
        members
            .iter()
            .map(|(_, member)| member.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    );
    if members.iter().all(|(doc, _)| doc.is_none())
        && inline.len() <= MAX_INLINE_OBJECT
        && !inline.contains('\n')
    {
        return inline;
    }
    let pad = " ".repeat(indent + 1);
    let mut text = String::from("{\n");
    for (doc, member) in members {
        // A line comment after a one-line member, above a multi-line one.
        match doc {
            Some(doc) if member.contains('\n') => {
                text.push_str(&format!("{pad}// {doc}\n{pad}{member};\n"));
            }
            // No `;` before the comment: the line break ends the member, a token cheaper.
            Some(doc) => text.push_str(&format!("{pad}{member} // {doc}\n")),
            None => text.push_str(&format!("{pad}{member};\n")),
        }
    }
    text.push_str(&" ".repeat(indent));
    text.push('}');
    text
}

/// `T[]` for a simple element type, `Array<T>` otherwise (`Array<string | null>`, never the
/// misparse `string | null[]`).
fn array(items: Rendered) -> Rendered {
    if items.prec == Prec::Atom && !items.text.contains('\n') {
        Rendered::atom(format!("{}[]", items.text))
    } else {
        Rendered::atom(format!("Array<{}>", items.text))
    }
}

/// Joins members with the operator of `prec` (` | ` or ` & `), parenthesising members that bind
/// looser and dropping repeats; a single remaining member is returned as it is.
fn join(parts: Vec<Rendered>, prec: Prec) -> Rendered {
    let separator = if prec == Prec::Union { " | " } else { " & " };
    let mut seen = BTreeSet::new();
    let mut unique: Vec<Rendered> = Vec::with_capacity(parts.len());
    for part in parts {
        if seen.insert(part.text.clone()) {
            unique.push(part);
        }
    }
    if unique.len() == 1 {
        return unique.swap_remove(0);
    }
    // Same-operator members flatten; an intersection inside a union is parenthesised too:
    // correct without, but easier to read.
    let texts: Vec<String> = unique
        .into_iter()
        .map(|p| {
            if p.prec == prec {
                p.text
            } else {
                p.at(Prec::Atom)
            }
        })
        .collect();
    Rendered {
        text: texts.join(separator),
        prec,
    }
}

/// A literal type for a scalar JSON value (`"a"`, `1.5`, `true`, `null`).
fn literal(value: &Value) -> String {
    match value {
        Value::String(s) => quoted(s),
        other => other.to_string(),
    }
}
