//! How schema nodes become Python type hints: the renderer that walks the model and writes
//! aliases, `TypedDict` classes, literals and unions, sharing the classes tools have in common.

use std::collections::BTreeSet;

use serde_json::Value;

use super::syntax::{ExtraNote, Field, comment, integer_text, stem, typed_dict, union};
use super::{Param, Params, ToolEntry, is_bare_tool_name, is_plain_member, member_lines};
use crate::sdk::model::{DefId, Extra, Kind, Model, NodeId};
use crate::sdk::text::{NameAllocator, pascal_case, quoted};

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
pub(super) struct Rendered<'m> {
    pub(super) render: Renderer<'m>,
    /// Each tool's output class, when its output is one.
    pub(super) output_classes: Vec<Option<String>>,
    pub(super) tools: Vec<ToolEntry>,
}

pub(super) struct Renderer<'m> {
    model: &'m Model,
    names: NameAllocator,
    pub(super) blocks: Vec<String>,
    /// Classes emitted so far, by shape (name stem — [`NAMED_TYPE`] for named types —,
    /// totality, keys, types and extra keys; docs apart), each with its name and field docs: an
    /// object shape met again reuses its class instead of repeating it.
    shapes: std::collections::BTreeMap<String, Vec<SharedClass>>,
    pub(super) uses: BTreeSet<&'static str>,
    def_emitted: Vec<bool>,
    def_queue: Vec<DefId>,
    /// Set while the next [`Renderer::ty`] renders a tool's output type.
    output_root: bool,
    /// The class a tool's output type rendered as, when it is one.
    output_class: Option<String>,
}

impl<'m> Renderer<'m> {
    pub(super) fn new(model: &'m Model, names: NameAllocator) -> Self {
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
    pub(super) fn tools(mut self, output_hints: &[Option<String>]) -> Rendered<'m> {
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
    pub(super) fn shared_output_hint(&self, output: NodeId) -> String {
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
