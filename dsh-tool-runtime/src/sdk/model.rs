//! The language-neutral model both renderers read: JSON Schema (2020-12, with the draft-07 and
//! OpenAPI spellings real MCP servers still send) lowered to a small type algebra.
//!
//! Lowering never fails: a piece it cannot express becomes [`Kind::Unknown`] for that node only.
//! Recursion is bounded by [`MAX_SDK_SCHEMA_DEPTH`]; `$ref` targets are lowered from a work list, not by
//! recursion, so neither deep nor self-referencing schemas can exhaust the stack.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::ToolSpec;
use super::text::{NameAllocator, comment_line, pascal_case};
use crate::json::MAX_SDK_SCHEMA_DEPTH;

/// Longest rendered `default` value in a doc note, in bytes.
const MAX_DEFAULT_NOTE: usize = 200;

/// Index of a node in [`Model::nodes`].
pub(crate) type NodeId = usize;
/// Index of a named type in [`Model::defs`].
pub(crate) type DefId = usize;

/// One lowered schema node.
#[derive(Debug)]
pub(crate) struct Node {
    pub(crate) kind: Kind,
    /// Description and constraint notes, one line, already comment-safe except for the
    /// language's own comment terminators.
    pub(crate) doc: Option<String>,
    /// The schema's `default` when it is a scalar (string, number, boolean, null); the doc notes
    /// it too.
    pub(crate) default: Option<Value>,
}

/// What values a node admits.
#[derive(Debug)]
pub(crate) enum Kind {
    /// Could not be expressed (unsupported keyword value, dangling `$ref`, depth bound).
    Unknown,
    /// Any JSON value (`true`, `{}`, no type keyword).
    Any,
    /// No value (`false`).
    Never,
    Null,
    Boolean,
    Integer,
    Number,
    String,
    /// `const` / `enum`: the listed scalar values (arrays and objects were lowered to their type).
    Literals(Vec<Value>),
    Array(NodeId),
    /// `prefixItems` (or draft-07 array `items`): fixed positions, `min` of them required, then
    /// `rest` for the remainder (`None` when closed).
    Tuple {
        items: Vec<NodeId>,
        min: usize,
        rest: Option<NodeId>,
    },
    Object(Object),
    Union(Vec<NodeId>),
    Intersection(Vec<NodeId>),
    Ref(DefId),
}

/// A lowered object schema.
#[derive(Debug)]
pub(crate) struct Object {
    /// Declared properties in declaration order (serde_json keeps key order).
    pub(crate) properties: Vec<Property>,
    pub(crate) extra: Extra,
}

/// What keys beyond the declared properties may hold.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Extra {
    /// `additionalProperties` absent or `true`: any key, any JSON value.
    Open,
    /// `additionalProperties: false` (or `unevaluatedProperties: false`).
    Closed,
    /// `additionalProperties: <schema>`.
    Typed(NodeId),
}

/// A declared property.
#[derive(Debug)]
pub(crate) struct Property {
    pub(crate) name: String,
    pub(crate) node: NodeId,
    pub(crate) required: bool,
}

/// A named type: the target of a `$ref`.
#[derive(Debug)]
pub(crate) struct Def {
    /// Allocated name, unique in the file.
    pub(crate) name: String,
    pub(crate) node: NodeId,
    /// True when the definition reaches itself through unions, intersections and references
    /// only (`A = A | null`): both languages reject such an alias, so it renders as unknown.
    pub(crate) degenerate: bool,
}

/// One tool, lowered.
#[derive(Debug)]
pub(crate) struct ToolModel {
    pub(crate) name: String,
    pub(crate) doc: Option<String>,
    pub(crate) args: NodeId,
    pub(crate) output: NodeId,
}

/// Every tool of a file, sorted by name, with the nodes and named types they share.
#[derive(Debug)]
pub(crate) struct Model {
    pub(crate) tools: Vec<ToolModel>,
    pub(crate) nodes: Vec<Node>,
    pub(crate) defs: Vec<Def>,
}

impl Model {
    /// Lowers `specs` (already sorted and deduplicated by name), taking named-type names from
    /// `names`, which holds the target language's reserved set.
    pub(crate) fn build(specs: &[&ToolSpec], names: &mut NameAllocator) -> Model {
        let mut lowering = Lowering {
            nodes: Vec::new(),
            defs: Vec::new(),
            def_index: BTreeMap::new(),
            def_by_content: BTreeMap::new(),
            definitions: BTreeMap::new(),
            pending: Vec::new(),
            documents: 0,
        };
        let mut tools = Vec::with_capacity(specs.len());
        let mut seen_docs = BTreeSet::new();
        for spec in specs {
            let tool_base = pascal_case(&spec.name);
            let args = lowering.lower_document(&spec.parameters, &tool_base, names);
            let output = lowering.lower_document(&spec.output, &tool_base, names);
            lowering.drop_repeated_docs(args, output, &mut seen_docs);
            tools.push(ToolModel {
                name: spec.name.clone(),
                doc: comment_line(&spec.description),
                args,
                output,
            });
        }
        let mut model = Model {
            tools,
            nodes: lowering.nodes,
            defs: lowering.defs,
        };
        model.mark_degenerate_defs();
        model
    }

    pub(crate) fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id]
    }

    /// Marks every named type that reaches itself through unguarded positions (union and
    /// intersection members, references). Objects, arrays and tuples guard: both TypeScript and
    /// mypy accept recursion through them. Iterative depth-first search from each def.
    fn mark_degenerate_defs(&mut self) {
        for start in 0..self.defs.len() {
            let mut stack = vec![self.defs[start].node];
            let mut seen_defs = vec![false; self.defs.len()];
            let mut cyclic = false;
            while let Some(id) = stack.pop() {
                match &self.nodes[id].kind {
                    Kind::Union(members) | Kind::Intersection(members) => {
                        stack.extend(members.iter().copied());
                    }
                    Kind::Ref(def) => {
                        if *def == start {
                            cyclic = true;
                            break;
                        }
                        if !seen_defs[*def] {
                            seen_defs[*def] = true;
                            stack.push(self.defs[*def].node);
                        }
                    }
                    _ => {}
                }
            }
            self.defs[start].degenerate = cyclic;
        }
    }
}

/// Lowering state for a whole file.
struct Lowering<'a> {
    nodes: Vec<Node>,
    defs: Vec<Def>,
    /// (document index, JSON pointer) → def, so each target is lowered once.
    def_index: BTreeMap<(usize, String), DefId>,
    /// Content key (target text, and its document's definitions when it refers into them) →
    /// def, so equal definitions of different documents merge.
    def_by_content: BTreeMap<String, DefId>,
    /// Definitions text of the documents seen → its id ([`Lowering::definitions_id`]).
    definitions: BTreeMap<String, usize>,
    /// Defs allocated but not yet lowered, with their target schema.
    pending: Vec<(DefId, &'a Value)>,
    /// Documents lowered so far; the next one's index.
    documents: usize,
}

/// Keywords only an object schema has.
const OBJECT_KEYWORDS: &[&str] = &["properties", "required", "additionalProperties"];

/// Keywords that give a node its own shape (as opposed to combinators).
const SHAPE_KEYWORDS: &[&str] = &[
    "type",
    "const",
    "enum",
    "properties",
    "required",
    "additionalProperties",
    "unevaluatedProperties",
    "items",
    "prefixItems",
];

impl<'a> Lowering<'a> {
    fn push(&mut self, kind: Kind, doc: Option<String>) -> NodeId {
        self.nodes.push(Node {
            kind,
            doc,
            default: None,
        });
        self.nodes.len() - 1
    }

    /// Nodes directly below `id` in its own document (references are not followed).
    fn children(&self, id: NodeId) -> Vec<NodeId> {
        match &self.nodes[id].kind {
            Kind::Array(items) => vec![*items],
            Kind::Tuple { items, rest, .. } => items.iter().copied().chain(*rest).collect(),
            Kind::Object(object) => {
                let mut children: Vec<NodeId> = object.properties.iter().map(|p| p.node).collect();
                if let Extra::Typed(node) = object.extra {
                    children.push(node);
                }
                children
            }
            Kind::Union(members) | Kind::Intersection(members) => members.clone(),
            _ => Vec::new(),
        }
    }

    /// Every object property below `root` (named types excluded), iteratively.
    fn properties_below(&self, root: NodeId) -> Vec<(String, NodeId)> {
        let mut found = Vec::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if let Kind::Object(object) = &self.nodes[id].kind {
                found.extend(object.properties.iter().map(|p| (p.name.clone(), p.node)));
            }
            // Reversed, so nodes pop in document order.
            stack.extend(self.children(id).into_iter().rev());
        }
        found
    }

    /// Drops property docs the model has already read: a property of an earlier tool had the
    /// same name and text, or an output property's text is an input's of the same tool. An
    /// output doc that says something else (`offset`: "first line returned" after the input's
    /// "first line to return") stays. The type stays; only the repeated comment goes. `seen` carries the
    /// `(name, text)` pairs rendered so far, in file order.
    fn drop_repeated_docs(
        &mut self,
        args: NodeId,
        output: NodeId,
        seen: &mut BTreeSet<(String, String)>,
    ) {
        let inputs = self.properties_below(args);
        let input_docs: BTreeSet<String> = inputs
            .iter()
            .filter_map(|(_, node)| self.nodes[*node].doc.clone())
            .collect();
        let mut dropped = Vec::new();
        for (name, node) in inputs {
            if let Some(doc) = &self.nodes[node].doc
                && !seen.insert((name, doc.clone()))
            {
                dropped.push(node);
            }
        }
        for (name, node) in self.properties_below(output) {
            let Some(doc) = &self.nodes[node].doc else {
                continue;
            };
            if input_docs.contains(doc) || !seen.insert((name, doc.clone())) {
                dropped.push(node);
            }
        }
        for node in dropped {
            self.nodes[node].doc = None;
        }
    }

    /// Lowers one document (a parameters or output schema) and every `$ref` target reached from it.
    fn lower_document(
        &mut self,
        root: &'a Value,
        tool_base: &str,
        names: &mut NameAllocator,
    ) -> NodeId {
        let document = self.documents;
        self.documents += 1;
        let mut ctx = DocumentCtx {
            document,
            root,
            tool_base,
            names,
            definitions: None,
        };
        let top = self.lower(root, 0, &mut ctx);
        while let Some((def, schema)) = self.pending.pop() {
            let node = self.lower(schema, 0, &mut ctx);
            self.defs[def].node = node;
        }
        top
    }

    fn lower(&mut self, schema: &'a Value, depth: usize, ctx: &mut DocumentCtx<'a, '_>) -> NodeId {
        if depth > MAX_SDK_SCHEMA_DEPTH {
            return self.push(Kind::Unknown, None);
        }
        let map = match schema {
            Value::Bool(true) => return self.push(Kind::Any, None),
            Value::Bool(false) => return self.push(Kind::Never, None),
            Value::Object(map) => map,
            _ => return self.push(Kind::Unknown, None),
        };
        let mut doc = doc_of(map);
        let mut parts = Vec::new();

        if let Some(reference) = map.get("$ref") {
            parts.push(self.lower_ref(reference, ctx));
        }
        let has_shape = SHAPE_KEYWORDS.iter().any(|k| map.contains_key(*k));
        if has_shape {
            parts.push(self.lower_shape(map, depth, ctx));
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(value) = map.get(key) {
                // A union of `const`s (documented enum variants) is the enum it stands for.
                if let Some(values) = crate::validate::const_branches(value) {
                    parts.push(self.lower_literals(&values));
                    continue;
                }
                let members = self.lower_list(value, depth, ctx);
                // A union renders its members' types but not their docs: an undocumented union
                // says what its documented members say (`Provide when type is …`).
                if !map.contains_key("description") {
                    doc = lift_member_docs(doc, &members, &mut self.nodes);
                }
                parts.push(self.push(Kind::Union(members), None));
            }
        }
        if let Some(value) = map.get("allOf") {
            parts.extend(self.lower_list(value, depth, ctx));
        }
        // A bare `{"type": "object"}` next to combinators adds nothing the members do not say.
        if parts.len() > 1 {
            parts.retain(|&id| !self.is_trivial(id));
        }
        let mut kind = match parts.len() {
            0 => Kind::Any,
            1 => {
                let only = parts[0];
                std::mem::replace(&mut self.nodes[only].kind, Kind::Unknown)
            }
            _ => Kind::Intersection(parts),
        };
        // OpenAPI 3.0's `nullable: true`, still sent by some MCP servers.
        if map.get("nullable") == Some(&Value::Bool(true)) {
            let inner = self.push(kind, None);
            let null = self.push(Kind::Null, None);
            kind = Kind::Union(vec![inner, null]);
        }
        let id = self.push(kind, doc);
        self.nodes[id].default = map
            .get("default")
            .filter(|value| !value.is_array() && !value.is_object())
            .cloned();
        id
    }

    fn lower_list(
        &mut self,
        value: &'a Value,
        depth: usize,
        ctx: &mut DocumentCtx<'a, '_>,
    ) -> Vec<NodeId> {
        match value {
            Value::Array(members) if !members.is_empty() => members
                .iter()
                .map(|member| self.lower(member, depth + 1, ctx))
                .collect(),
            _ => vec![self.push(Kind::Unknown, None)],
        }
    }

    /// True for a node that admits anything of its kind: `Any`, or an open object without
    /// declared properties.
    fn is_trivial(&self, id: NodeId) -> bool {
        match &self.nodes[id].kind {
            Kind::Any => true,
            Kind::Object(object) => {
                object.properties.is_empty() && matches!(object.extra, Extra::Open)
            }
            _ => false,
        }
    }

    /// A small id for the document's `$defs` and `definitions` together, equal for documents
    /// whose definitions are equal; computed once per document.
    fn definitions_id(&mut self, ctx: &mut DocumentCtx<'a, '_>) -> usize {
        if let Some(id) = ctx.definitions {
            return id;
        }
        let mut text = String::new();
        for section in ["$defs", "definitions"] {
            if let Some(defs) = ctx.root.get(section) {
                text.push_str(&crate::json::compact(defs, false));
            }
            text.push('\n');
        }
        let next = self.definitions.len();
        let id = *self.definitions.entry(text).or_insert(next);
        ctx.definitions = Some(id);
        id
    }

    /// Lowers a local `$ref` (`#`, `#/$defs/X`, any JSON pointer into the same document) to a named
    /// type; remote and unresolvable references become unknown.
    fn lower_ref(&mut self, reference: &Value, ctx: &mut DocumentCtx<'a, '_>) -> NodeId {
        let Some(pointer) = reference
            .as_str()
            .and_then(|r| r.strip_prefix('#'))
            .map(percent_decode)
        else {
            return self.push(Kind::Unknown, None);
        };
        let key = (ctx.document, pointer);
        if let Some(&def) = self.def_index.get(&key) {
            return self.push(Kind::Ref(def), None);
        }
        let Some(target) = ctx.root.pointer(&key.1) else {
            return self.push(Kind::Unknown, None);
        };
        // The same definition in several documents (every tool of one MCP server carrying the
        // server's `$defs`) is one named type.
        let content = shareable(target).map(|refers| {
            // Serialised without recursion: a hostile definition may nest thousands of levels.
            let text = crate::json::compact(target, false);
            if refers {
                format!("{}\n{text}", self.definitions_id(ctx))
            } else {
                format!("-\n{text}")
            }
        });
        if let Some(&def) = content.as_ref().and_then(|c| self.def_by_content.get(c)) {
            self.def_index.insert(key, def);
            return self.push(Kind::Ref(def), None);
        }
        let last = key.1.rsplit('/').next().unwrap_or_default();
        let last = last.replace("~1", "/").replace("~0", "~");
        // Named after the definition alone: shorter, and right for a shared one.
        let name = if last.is_empty() {
            ctx.names.allocate(&format!("{}Self", ctx.tool_base))
        } else {
            ctx.names.allocate(&pascal_case(&last))
        };
        let def = self.defs.len();
        if let Some(content) = content {
            self.def_by_content.insert(content, def);
        }
        self.defs.push(Def {
            name,
            node: usize::MAX,
            degenerate: false,
        });
        self.def_index.insert(key, def);
        self.pending.push((def, target));
        // The node is filled in when the work list reaches the def; until then nothing reads it.
        self.push(Kind::Ref(def), None)
    }

    /// Lowers the non-combinator part of an object schema: `type` (one or a list), `const`,
    /// `enum`, or the shape implied by object/array keywords when `type` is absent.
    fn lower_shape(
        &mut self,
        map: &'a Map<String, Value>,
        depth: usize,
        ctx: &mut DocumentCtx<'a, '_>,
    ) -> NodeId {
        if let Some(value) = map.get("const") {
            return self.lower_literals(std::slice::from_ref(value));
        }
        if let Some(value) = map.get("enum") {
            return match value {
                Value::Array(values) if !values.is_empty() => self.lower_literals(values),
                _ => self.push(Kind::Unknown, None),
            };
        }
        match map.get("type") {
            Some(Value::String(ty)) => self.lower_typed(ty, map, depth, ctx),
            Some(Value::Array(types)) if !types.is_empty() => {
                let mut members = Vec::with_capacity(types.len());
                for ty in types {
                    let member = match ty {
                        Value::String(ty) => self.lower_typed(ty, map, depth, ctx),
                        _ => self.push(Kind::Unknown, None),
                    };
                    members.push(member);
                }
                if members.len() == 1 {
                    members[0]
                } else {
                    self.push(Kind::Union(members), None)
                }
            }
            Some(_) => self.push(Kind::Unknown, None),
            None => {
                let implied = if ["items", "prefixItems"]
                    .iter()
                    .any(|k| map.contains_key(*k))
                {
                    "array"
                } else {
                    "object"
                };
                self.lower_typed(implied, map, depth, ctx)
            }
        }
    }

    /// `const` / `enum` values: scalars stay literals; an array or object value is lowered to
    /// its JSON type, since neither target can spell it as a literal type.
    fn lower_literals(&mut self, values: &[Value]) -> NodeId {
        let scalars: Vec<Value> = values
            .iter()
            .filter(|v| !v.is_array() && !v.is_object())
            .cloned()
            .collect();
        let has_array = values.iter().any(Value::is_array);
        let has_object = values.iter().any(Value::is_object);
        let mut members = Vec::new();
        if !scalars.is_empty() {
            members.push(self.push(Kind::Literals(scalars), None));
        }
        if has_array {
            let any = self.push(Kind::Any, None);
            members.push(self.push(Kind::Array(any), None));
        }
        if has_object {
            let object = Object {
                properties: Vec::new(),
                extra: Extra::Open,
            };
            members.push(self.push(Kind::Object(object), None));
        }
        if members.len() == 1 {
            members[0]
        } else {
            self.push(Kind::Union(members), None)
        }
    }

    fn lower_typed(
        &mut self,
        ty: &str,
        map: &'a Map<String, Value>,
        depth: usize,
        ctx: &mut DocumentCtx<'a, '_>,
    ) -> NodeId {
        let kind = match ty {
            "null" => Kind::Null,
            "boolean" => Kind::Boolean,
            "integer" => Kind::Integer,
            "number" => Kind::Number,
            "string" => Kind::String,
            "array" => self.lower_array(map, depth, ctx),
            "object" => Kind::Object(self.lower_object(map, depth, ctx)),
            // A type name outside JSON Schema (`dict`, `float`, `tuple` from other dialects): the
            // object or array keywords beside it still say what it is; otherwise unknown.
            _ if OBJECT_KEYWORDS.iter().any(|k| map.contains_key(*k)) => {
                Kind::Object(self.lower_object(map, depth, ctx))
            }
            _ if ["items", "prefixItems"]
                .iter()
                .any(|k| map.contains_key(*k)) =>
            {
                self.lower_array(map, depth, ctx)
            }
            _ => Kind::Unknown,
        };
        self.push(kind, None)
    }

    fn lower_array(
        &mut self,
        map: &'a Map<String, Value>,
        depth: usize,
        ctx: &mut DocumentCtx<'a, '_>,
    ) -> Kind {
        // 2020-12: `prefixItems` + `items` for the rest; draft-07: array `items` + `additionalItems`.
        let (prefix, rest) = match (map.get("prefixItems"), map.get("items")) {
            (Some(Value::Array(prefix)), rest) => (Some(prefix), rest),
            (_, Some(Value::Array(prefix))) => (Some(prefix), map.get("additionalItems")),
            (_, items) => (None, items),
        };
        let Some(prefix) = prefix else {
            let items = match rest {
                Some(items) => self.lower(items, depth + 1, ctx),
                None => self.push(Kind::Any, None),
            };
            return Kind::Array(items);
        };
        let items: Vec<NodeId> = prefix
            .iter()
            .map(|item| self.lower(item, depth + 1, ctx))
            .collect();
        let min = map
            .get("minItems")
            .and_then(Value::as_u64)
            .map_or(0, |m| usize::try_from(m).unwrap_or(usize::MAX))
            .min(items.len());
        let rest = match rest {
            Some(Value::Bool(false)) => None,
            Some(schema) => Some(self.lower(schema, depth + 1, ctx)),
            None => Some(self.push(Kind::Any, None)),
        };
        Kind::Tuple { items, min, rest }
    }

    fn lower_object(
        &mut self,
        map: &'a Map<String, Value>,
        depth: usize,
        ctx: &mut DocumentCtx<'a, '_>,
    ) -> Object {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut properties = Vec::new();
        if let Some(Value::Object(declared)) = map.get("properties") {
            for (name, schema) in declared {
                let node = self.lower(schema, depth + 1, ctx);
                properties.push(Property {
                    name: name.clone(),
                    node,
                    required: required.contains(&name.as_str()),
                });
            }
        }
        // A required key without a declaration still has to be present: any value.
        for name in required {
            if !properties.iter().any(|p| p.name == name) {
                let node = self.push(Kind::Any, None);
                properties.push(Property {
                    name: name.to_owned(),
                    node,
                    required: true,
                });
            }
        }
        let closed = |key: &str| map.get(key) == Some(&Value::Bool(false));
        let extra = match map.get("additionalProperties") {
            _ if closed("additionalProperties") || closed("unevaluatedProperties") => Extra::Closed,
            None | Some(Value::Bool(true)) => Extra::Open,
            Some(schema) => Extra::Typed(self.lower(schema, depth + 1, ctx)),
        };
        Object { properties, extra }
    }
}

/// Per-document context of the lowering.
struct DocumentCtx<'a, 'n> {
    /// Distinguishes documents in `def_index` (each tool's parameters and output).
    document: usize,
    root: &'a Value,
    tool_base: &'n str,
    names: &'n mut NameAllocator,
    /// The document's [`Lowering::definitions_id`], once computed.
    definitions: Option<usize>,
}

/// Whether a `$ref` target may be shared between documents, and how: `None` when it refers
/// anywhere but `#/$defs/…` / `#/definitions/…` (its meaning depends on the rest of its
/// document), `Some(false)` when it refers nowhere, `Some(true)` when it refers into the
/// document's definitions (then equal only together with them).
fn shareable(target: &Value) -> Option<bool> {
    let mut refers = false;
    let mut stack = vec![target];
    while let Some(node) = stack.pop() {
        match node {
            Value::Object(map) => {
                if let Some(reference) = map.get("$ref") {
                    let local = reference.as_str().is_some_and(|r| {
                        r.starts_with("#/$defs/") || r.starts_with("#/definitions/")
                    });
                    if !local {
                        return None;
                    }
                    refers = true;
                }
                stack.extend(map.values());
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    Some(refers)
}

/// Decodes `%XX` escapes of a URI fragment (RFC 3986 §2.1) before it is read as a JSON pointer
/// (RFC 6901 §6). Malformed escapes are kept verbatim.
fn percent_decode(fragment: &str) -> String {
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = fragment.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8(out).unwrap_or_else(|_| fragment.to_owned())
}

/// `doc` (notes only, or none) preceded by the docs of `members`, which are taken off them so the
/// text is said once.
fn lift_member_docs(doc: Option<String>, members: &[NodeId], nodes: &mut [Node]) -> Option<String> {
    let mut lines: Vec<String> = Vec::new();
    for &member in members {
        if let Some(line) = nodes[member].doc.take()
            && !lines.contains(&line)
        {
            lines.push(line);
        }
    }
    if lines.is_empty() {
        return doc;
    }
    lines.extend(doc);
    Some(lines.join(" "))
}

/// The doc line of a schema: its description, then its format, range, length, pattern and
/// default as `keyword value` notes (JSON Schema 2020-12 validation and format vocabularies).
fn doc_of(map: &Map<String, Value>) -> Option<String> {
    const NOTED: &[&str] = &[
        "format",
        "minimum",
        "exclusiveMinimum",
        "maximum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minProperties",
        "maxProperties",
        "default",
        "deprecated",
    ];
    let mut text = map
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let mut notes = Vec::new();
    for key in NOTED {
        let Some(value) = map.get(*key) else { continue };
        if restates_type(map, key, value) {
            continue;
        }
        let rendered = match value {
            Value::String(s) => s.clone(),
            Value::Number(_) | Value::Bool(_) | Value::Null => value.to_string(),
            // Defaults may be arrays or objects: shown as JSON when small.
            _ => shallow_json(value),
        };
        // `keyword value`: the colon would cost a token and say nothing.
        notes.push(format!("{key} {rendered}"));
    }
    if !notes.is_empty() {
        if !text.trim().is_empty() {
            text.push(' ');
        }
        text.push('(');
        text.push_str(&notes.join("; "));
        text.push(')');
    }
    comment_line(&text)
}

/// `format` values that only name a machine number type (schemars writes them for every Rust
/// integer and float): the rendered `number` / `int` / `float` says all a program needs.
const NUMERIC_FORMATS: &[&str] = &[
    "int", "int8", "int16", "int32", "int64", "int128", "uint", "uint8", "uint16", "uint32",
    "uint64", "uint128", "float", "double", "integer", "number",
];

/// True when the note `key: value` of `map` adds nothing to its rendered type: a numeric
/// `format`, and the `minimum: 0` that comes with every unsigned (`uint*`) format.
fn restates_type(map: &Map<String, Value>, key: &str, value: &Value) -> bool {
    let format = map.get("format").and_then(Value::as_str);
    match key {
        "format" => format.is_some_and(|f| NUMERIC_FORMATS.contains(&f)),
        "minimum" => format.is_some_and(|f| f.starts_with("uint")) && value.as_f64() == Some(0.0),
        _ => false,
    }
}

/// JSON text of a small array or object value, or `…` when it nests or runs long. Never recurses
/// into nested containers, so a hostile `default` cannot cost stack or time.
fn shallow_json(value: &Value) -> String {
    let scalars = |v: &Value| !v.is_array() && !v.is_object();
    let text = match value {
        Value::Array(items) if items.iter().all(scalars) => value.to_string(),
        Value::Object(map) if map.values().all(scalars) => value.to_string(),
        _ => return "…".to_owned(),
    };
    if text.len() > MAX_DEFAULT_NOTE {
        "…".to_owned()
    } else {
        text
    }
}
