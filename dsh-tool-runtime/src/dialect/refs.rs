//! Local `$ref` handling shared by every dialect: inline what is not recursive, keep what is
//! recursive as a `$ref` into the output's own `#/$defs` (or refuse it), and leave no reference
//! that points at nothing.
//!
//! Also upgrades the draft-07 spellings MCP servers still emit (`definitions`, list-form
//! `items`, `additionalItems`, `dependencies`) to their 2020-12 keywords on the way.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value};

use super::Dialect;
use super::error::{DialectError, DialectErrorKind, Path};
use super::keywords::{
    Holds, holds, is_annotation, json_type, last_segment, live_children, resolve_local,
};
use crate::json::MAX_DIALECT_SCHEMA_DEPTH;

/// Most schema nodes the expansion builds; inlining can grow a schema exponentially.
pub const MAX_NODES: usize = 100_000;
/// Most distinct `$ref` targets analysed.
pub const MAX_REF_TARGETS: usize = 1_000;

/// What to do with a recursive `$ref`.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Recursion {
    /// Keep it, pointing into the output's `#/$defs` (or `#` for the root).
    Anchor,
    /// Fail with [`DialectErrorKind::RecursiveRef`].
    Reject,
}

struct Target<'a> {
    schema: &'a Value,
    recursive: bool,
    anchor: Option<String>,
}

/// The expansion state. On an error, `path` is left where the error happened: the error is
/// built from it and returned straight up, so no caller reads it again.
struct Expander<'a> {
    dialect: Dialect,
    recursion: Recursion,
    index: HashMap<&'a str, usize>,
    targets: Vec<Target<'a>>,
    nodes: usize,
    defs: Vec<(String, usize)>,
    names: HashSet<String>,
}

/// Inlines the local `$ref`s of `root` (an object schema). Returns the expanded root, with a
/// `$defs` holding exactly the kept recursive definitions, or the first error with its path.
pub(crate) fn expand(
    root: &Value,
    dialect: Dialect,
    recursion: Recursion,
) -> Result<Value, DialectError> {
    let (index, targets) = analyse(root).map_err(|kind| Path::default().error(dialect, kind))?;
    let mut expander = Expander {
        dialect,
        recursion,
        index,
        targets,
        nodes: 0,
        defs: Vec::new(),
        names: HashSet::new(),
    };
    let mut path = Path::default();
    // A root that is itself a `$ref` is inlined one level even when recursive: a parameters
    // schema must be an object at the root (a bare `$ref` root is rejected by clients).
    let mut out = expander.node(root, &mut path, 0, true)?;
    let mut kept = Map::new();
    let mut next = 0;
    while next < expander.defs.len() {
        let (name, id) = expander.defs[next].clone();
        next += 1;
        path.push("$defs");
        path.push(&name);
        let body = expander.node(expander.targets[id].schema, &mut path, 2, true)?;
        path.pop();
        path.pop();
        kept.insert(name, body);
    }
    if !kept.is_empty()
        && let Value::Object(map) = &mut out
    {
        map.insert("$defs".to_owned(), Value::Object(kept));
    }
    Ok(out)
}

/// Reference string → target id, and the targets.
type Analysis<'a> = (HashMap<&'a str, usize>, Vec<Target<'a>>);

/// Finds every `$ref` target reachable from the root and which of them lie on a cycle.
fn analyse(root: &Value) -> Result<Analysis<'_>, DialectErrorKind> {
    let mut index: HashMap<&str, usize> = HashMap::new();
    let mut targets: Vec<Target<'_>> = Vec::new();
    let mut edges: Vec<Vec<usize>> = Vec::new();
    // Targets whose own references are not collected yet.
    let mut pending: VecDeque<usize> = VecDeque::new();
    let mut owner: Option<usize> = None;
    let mut start = root;
    loop {
        for reference in references_in(start) {
            let id = match index.get(reference) {
                Some(&id) => id,
                None => {
                    let Some(schema) = resolve_local(root, reference) else {
                        // Reported with its path during expansion.
                        continue;
                    };
                    if targets.len() == MAX_REF_TARGETS {
                        return Err(DialectErrorKind::TooManyRefTargets {
                            limit: MAX_REF_TARGETS,
                        });
                    }
                    let id = targets.len();
                    index.insert(reference, id);
                    targets.push(Target {
                        schema,
                        recursive: false,
                        anchor: None,
                    });
                    edges.push(Vec::new());
                    pending.push_back(id);
                    id
                }
            };
            if let Some(owner) = owner {
                edges[owner].push(id);
            }
        }
        let Some(id) = pending.pop_front() else { break };
        owner = Some(id);
        start = targets[id].schema;
    }
    for id in on_cycles(&edges) {
        targets[id].recursive = true;
    }
    Ok((index, targets))
}

/// The `$ref` strings in the live part of a schema (not inside `$defs`), iteratively.
fn references_in(start: &Value) -> Vec<&str> {
    let mut out = Vec::new();
    let mut stack = vec![start];
    while let Some(node) = stack.pop() {
        if let Value::Object(map) = node {
            if let Some(reference) = map.get("$ref").and_then(Value::as_str) {
                out.push(reference);
            }
            stack.extend(live_children(map));
        }
    }
    out
}

/// The nodes of a directed graph that lie on a cycle (strongly connected components of more
/// than one node, or with a self-edge), by an iterative Tarjan walk.
fn on_cycles(edges: &[Vec<usize>]) -> Vec<usize> {
    let n = edges.len();
    let mut order = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack: Vec<usize> = Vec::new();
    let mut counter = 0;
    let mut out = Vec::new();
    for start in 0..n {
        if order[start] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(start, 0)];
        order[start] = counter;
        low[start] = counter;
        counter += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (node, ref mut next)) = work.last_mut() {
            if let Some(&child) = edges[node].get(*next) {
                *next += 1;
                if order[child] == usize::MAX {
                    order[child] = counter;
                    low[child] = counter;
                    counter += 1;
                    stack.push(child);
                    on_stack[child] = true;
                    work.push((child, 0));
                } else if on_stack[child] {
                    low[node] = low[node].min(order[child]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == order[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                if component.len() > 1 || edges[node].contains(&node) {
                    out.extend(component);
                }
            }
        }
    }
    out
}

impl<'a> Expander<'a> {
    fn error(&self, path: &Path, kind: DialectErrorKind) -> DialectError {
        path.error(self.dialect, kind)
    }

    /// Expands one schema node. `force_inline` inlines a top-level `$ref` even when recursive
    /// (used for the root and for the body of a kept definition).
    fn node(
        &mut self,
        node: &'a Value,
        path: &mut Path,
        depth: usize,
        force_inline: bool,
    ) -> Result<Value, DialectError> {
        if depth > MAX_DIALECT_SCHEMA_DEPTH {
            return Err(self.error(
                path,
                DialectErrorKind::TooDeep {
                    limit: MAX_DIALECT_SCHEMA_DEPTH,
                },
            ));
        }
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(self.error(path, DialectErrorKind::TooLarge { limit: MAX_NODES }));
        }
        let map = match node {
            Value::Bool(_) => return Ok(node.clone()),
            Value::Object(map) => map,
            other => {
                return Err(self.error(
                    path,
                    DialectErrorKind::NotASchema {
                        found: json_type(other),
                    },
                ));
            }
        };
        let reference = map.get("$ref").and_then(Value::as_str);
        let list_items = map.get("items").is_some_and(Value::is_array);
        let mut out = Map::new();
        for (keyword, value) in map {
            match keyword.as_str() {
                "$ref" if reference.is_some() => {}
                // Meta keywords: the output declares no dialect and no base URI of its own;
                // definitions come back as the output's `$defs` when still referenced.
                "$schema" | "$id" | "$defs" | "definitions" => {}
                // Draft-07 tuples: list `items` is 2020-12 `prefixItems`, `additionalItems`
                // is `items`; without list `items`, `additionalItems` had no effect.
                "items" if list_items => {
                    let expanded = self.list(keyword, value, path, depth)?;
                    out.insert("prefixItems".to_owned(), expanded);
                }
                "additionalItems" => {
                    if list_items {
                        let expanded = self.one(keyword, value, path, depth)?;
                        out.insert("items".to_owned(), expanded);
                    }
                }
                // Draft-07 `dependencies` splits into 2020-12 `dependentRequired` (lists)
                // and `dependentSchemas` (schemas).
                "dependencies" => self.dependencies(value, &mut out, path, depth)?,
                _ => {
                    let expanded = match holds(keyword, value) {
                        Some(Holds::One) => self.one(keyword, value, path, depth)?,
                        Some(Holds::Map) => self.entries(keyword, value, path, depth)?,
                        Some(Holds::List) => self.list(keyword, value, path, depth)?,
                        None => value.clone(),
                    };
                    out.insert(keyword.clone(), expanded);
                }
            }
        }
        match reference {
            Some(reference) => self.reference(reference, out, path, depth, force_inline),
            None => Ok(Value::Object(out)),
        }
    }

    fn one(
        &mut self,
        keyword: &str,
        value: &'a Value,
        path: &mut Path,
        depth: usize,
    ) -> Result<Value, DialectError> {
        path.push(keyword);
        let out = self.node(value, path, depth + 1, false)?;
        path.pop();
        Ok(out)
    }

    fn entries(
        &mut self,
        keyword: &str,
        value: &'a Value,
        path: &mut Path,
        depth: usize,
    ) -> Result<Value, DialectError> {
        let Value::Object(entries) = value else {
            return Err(self.not_a_schema(path, value));
        };
        let mut out = Map::new();
        for (name, child) in entries {
            out.insert(
                name.clone(),
                self.member(keyword, name, child, path, depth)?,
            );
        }
        Ok(Value::Object(out))
    }

    fn list(
        &mut self,
        keyword: &str,
        value: &'a Value,
        path: &mut Path,
        depth: usize,
    ) -> Result<Value, DialectError> {
        let Value::Array(entries) = value else {
            return Err(self.not_a_schema(path, value));
        };
        let mut out = Vec::with_capacity(entries.len());
        for (index, child) in entries.iter().enumerate() {
            out.push(self.member(keyword, &index.to_string(), child, path, depth)?);
        }
        Ok(Value::Array(out))
    }

    /// Expands one member of a schema map or list at `<keyword>/<segment>`.
    fn member(
        &mut self,
        keyword: &str,
        segment: &str,
        child: &'a Value,
        path: &mut Path,
        depth: usize,
    ) -> Result<Value, DialectError> {
        path.push(keyword);
        path.push(segment);
        let expanded = self.node(child, path, depth + 2, false);
        path.pop();
        path.pop();
        expanded
    }

    fn not_a_schema(&self, path: &Path, value: &Value) -> DialectError {
        self.error(
            path,
            DialectErrorKind::NotASchema {
                found: json_type(value),
            },
        )
    }

    fn dependencies(
        &mut self,
        value: &'a Value,
        out: &mut Map<String, Value>,
        path: &mut Path,
        depth: usize,
    ) -> Result<(), DialectError> {
        let Value::Object(entries) = value else {
            return Err(self.error(
                path,
                DialectErrorKind::NotASchema {
                    found: json_type(value),
                },
            ));
        };
        let mut required = Map::new();
        let mut schemas = Map::new();
        path.push("dependencies");
        for (name, child) in entries {
            if child.is_array() {
                required.insert(name.clone(), child.clone());
                continue;
            }
            path.push(name);
            let expanded = self.node(child, path, depth + 2, false)?;
            path.pop();
            schemas.insert(name.clone(), expanded);
        }
        path.pop();
        if !required.is_empty() {
            out.insert("dependentRequired".to_owned(), Value::Object(required));
        }
        if !schemas.is_empty() {
            out.insert("dependentSchemas".to_owned(), Value::Object(schemas));
        }
        Ok(())
    }

    /// A node with `$ref` (its other keywords already expanded into `siblings`).
    fn reference(
        &mut self,
        reference: &str,
        siblings: Map<String, Value>,
        path: &mut Path,
        depth: usize,
        force_inline: bool,
    ) -> Result<Value, DialectError> {
        let unresolved = || DialectErrorKind::UnresolvedRef {
            reference: reference.to_owned(),
        };
        let Some(&id) = self.index.get(reference) else {
            return Err(self.error(path, unresolved()));
        };
        if self.targets[id].recursive && !force_inline {
            if self.recursion == Recursion::Reject {
                return Err(self.error(
                    path,
                    DialectErrorKind::RecursiveRef {
                        reference: reference.to_owned(),
                    },
                ));
            }
            let anchor = self.anchor(id, reference);
            let mut out = Map::new();
            out.insert("$ref".to_owned(), Value::String(anchor));
            out.extend(siblings);
            return Ok(Value::Object(out));
        }
        let body = self.node(self.targets[id].schema, path, depth, false)?;
        Ok(merge(body, siblings))
    }

    /// The output reference for a kept recursive target, registering its definition once.
    fn anchor(&mut self, id: usize, reference: &str) -> String {
        if let Some(anchor) = &self.targets[id].anchor {
            return anchor.clone();
        }
        // A root that is not already an object schema is kept as a definition of its own: the
        // transform makes the output root an object, which a `"$ref": "#"` must not start seeing.
        let object_root =
            self.targets[id].schema.get("type").and_then(Value::as_str) == Some("object");
        let anchor = if reference == "#" && object_root {
            "#".to_owned()
        } else {
            let base = match last_segment(reference) {
                _ if reference == "#" => "root".to_owned(),
                name if name.is_empty() => "definition".to_owned(),
                name => name,
            };
            let mut name = base.clone();
            let mut suffix = 2;
            while !self.names.insert(name.clone()) {
                name = format!("{base}_{suffix}");
                suffix += 1;
            }
            self.defs.push((name.clone(), id));
            format!("#/$defs/{}", name.replace('~', "~0").replace('/', "~1"))
        };
        self.targets[id].anchor = Some(anchor.clone());
        anchor
    }
}

/// Keywords whose meaning depends on keywords beside them (JSON Schema 2020-12 §10.3.1, §10.3.2,
/// §11): merged into one node with keywords of another schema, they would start reading those.
const READS_SIBLINGS: &[&str] = &[
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "items",
    "contains",
    "minContains",
    "maxContains",
    "then",
    "else",
    "$dynamicAnchor",
    "$anchor",
];

/// An inlined `$ref` target merged with the keywords written beside the `$ref` (2020-12 applies
/// both). Siblings override annotations. The two are merged only where that is provably the
/// same schema: when both constrain the same keyword, or either side holds a keyword that reads
/// its siblings (a `$ref` to `{"unevaluatedProperties": false}` beside `properties`), the target
/// goes under `allOf` instead — an in-place applicator exactly like `$ref`.
fn merge(body: Value, siblings: Map<String, Value>) -> Value {
    let body = match body {
        Value::Bool(true) => Map::new(),
        Value::Bool(false) => {
            let mut never = Map::new();
            never.insert("not".to_owned(), Value::Object(Map::new()));
            never
        }
        Value::Object(map) => map,
        other => return other,
    };
    if siblings.is_empty() {
        return Value::Object(body);
    }
    let constrains = |map: &Map<String, Value>| map.keys().any(|key| !is_annotation(key));
    let reads =
        |map: &Map<String, Value>| map.keys().any(|key| READS_SIBLINGS.contains(&key.as_str()));
    let conflict = siblings
        .keys()
        .any(|key| !is_annotation(key) && body.contains_key(key))
        || (reads(&body) && constrains(&siblings))
        || (reads(&siblings) && constrains(&body));
    if conflict {
        let mut out = siblings;
        match out.get_mut("allOf") {
            Some(Value::Array(all)) => all.push(Value::Object(body)),
            _ => {
                out.insert("allOf".to_owned(), Value::Array(vec![Value::Object(body)]));
            }
        }
        return Value::Object(out);
    }
    let mut out = body;
    out.extend(siblings);
    Value::Object(out)
}
