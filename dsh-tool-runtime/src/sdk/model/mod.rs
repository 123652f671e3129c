//! The language-neutral model both renderers read: JSON Schema (2020-12, with the draft-07 and
//! OpenAPI spellings real MCP servers still send) lowered to a small type algebra.
//!
//! Lowering never fails: a piece it cannot express becomes [`Kind::Unknown`] for that node only.
//! Recursion is bounded by [`MAX_SDK_SCHEMA_DEPTH`]; `$ref` targets are lowered from a work list, not by
//! recursion, so neither deep nor self-referencing schemas can exhaust the stack.

mod docs;
mod lowering;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::ToolSpec;
use super::text::{NameAllocator, comment_line, pascal_case};
use lowering::Lowering;

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
