//! Lowering: JSON Schema documents walked into the model's nodes, `$ref` targets from a work
//! list, shapes, literals, arrays and objects.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use super::docs::{doc_of, lift_member_docs};
use super::{Def, DefId, Extra, Kind, Node, NodeId, Object, Property};
use crate::json::MAX_SDK_SCHEMA_DEPTH;
use crate::sdk::text::{NameAllocator, pascal_case};

/// Lowering state for a whole file.
pub(super) struct Lowering<'a> {
    pub(super) nodes: Vec<Node>,
    pub(super) defs: Vec<Def>,
    /// (document index, JSON pointer) → def, so each target is lowered once.
    pub(super) def_index: BTreeMap<(usize, String), DefId>,
    /// Content key (target text, and its document's definitions when it refers into them) →
    /// def, so equal definitions of different documents merge.
    pub(super) def_by_content: BTreeMap<String, DefId>,
    /// Definitions text of the documents seen → its id ([`Lowering::definitions_id`]).
    pub(super) definitions: BTreeMap<String, usize>,
    /// Defs allocated but not yet lowered, with their target schema.
    pub(super) pending: Vec<(DefId, &'a Value)>,
    /// Documents lowered so far; the next one's index.
    pub(super) documents: usize,
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
    pub(super) fn drop_repeated_docs(
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
    pub(super) fn lower_document(
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
