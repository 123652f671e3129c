//! No new import circle inside a crate of the workspace.
//!
//! The graph: each crate's module tree, followed from its root file through its `mod` items
//! (`#[path]` included, every `cfg` taken). A module refers to another by a path that starts
//! with `crate::`, `super::`, `self::` or the name of one of its own child modules — in `use`
//! items, in expressions and types, and in macro arguments. A path resolves to the deepest
//! module it names (the item's module, not where a re-export leads).
//!
//! The granularity: the children of each module are the nodes of one graph, a child with
//! children of its own counting as one node for its whole subtree (`code_runtime/subprocess/`
//! is one node among `code_runtime`'s children). The parent's own file (`mod.rs`, `lib.rs`) is
//! no node: it is the module's front, re-exporting its children and holding what they share. An
//! arrow from child A to child B is any reference from a file under A into B's subtree. A
//! circle is a strongly connected component of two or more children: none of them can be read,
//! moved or split out without the others.
//!
//! `cargo test --test import_graph -- --nocapture` prints every circle with the arrows that
//! close it. The test fails on any circle: none is left in any crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use proc_macro2::{TokenStream, TokenTree};
use syn::visit::Visit;

/// The crates: a name for the report and the root file of each.
const CRATES: &[(&str, &str)] = &[
    ("dsh-tool-runtime", "dsh-tool-runtime/src/lib.rs"),
    (
        "dsh-tool-code-mode",
        "dsh-tool-runtime/crates/code-mode/src/lib.rs",
    ),
    (
        "dsh-tool-engines",
        "dsh-tool-runtime/crates/engines/src/lib.rs",
    ),
    ("dsh-tool-mcp", "dsh-tool-runtime/crates/mcp/src/lib.rs"),
    (
        "dsh-tool-provider",
        "dsh-tool-runtime/crates/provider/src/lib.rs",
    ),
    ("dsh-tool-macros", "dsh-tool-macros/src/lib.rs"),
    ("dsh-tools", "src/lib.rs"),
    ("dsh-tools (bin)", "src/bin/dsh-tools/main.rs"),
];

/// A module's path below its crate root (`["code_runtime", "quickjs"]`).
type ModPath = Vec<String>;

/// One crate's modules and the references between them.
#[derive(Debug, Default)]
struct Crate {
    /// Every module with a file of its own, and that file.
    files: BTreeMap<ModPath, PathBuf>,
    /// Every inline module (`mod tests { … }`), resolved as the file that holds it.
    inline: BTreeSet<ModPath>,
    /// From the module of a file to the modules it refers to.
    refs: BTreeMap<ModPath, BTreeSet<ModPath>>,
}

/// A circle among the children of `parent`, with one reference behind each of its arrows.
#[derive(Debug)]
struct Circle {
    parent: ModPath,
    members: Vec<String>,
    arrows: Vec<(ModPath, ModPath)>,
}

fn show(path: &[String]) -> String {
    if path.is_empty() {
        "crate".to_owned()
    } else {
        path.join("/")
    }
}

/// Reads the module tree under `root` (a `lib.rs`/`main.rs`) and every reference in it.
fn read_crate(root: &Path) -> Crate {
    let mut krate = Crate::default();
    let mut raw: Vec<(ModPath, Vec<String>)> = Vec::new();
    let mut pending = vec![(ModPath::new(), root.to_path_buf(), true)];
    while let Some((module, file, owns_dir)) = pending.pop() {
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
        let ast =
            syn::parse_file(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", file.display()));
        let dir = file.parent().expect("a file has a directory").to_path_buf();
        // `foo.rs` keeps its children in `foo/`; `mod.rs`, `lib.rs` and `main.rs` beside them.
        let child_dir = if owns_dir {
            dir.clone()
        } else {
            dir.join(file.file_stem().expect("a file has a stem"))
        };
        let mut walker = Walker {
            stack: module.clone(),
            file_module: module.clone(),
            file_dir: dir,
            child_dir,
            children: Vec::new(),
            inline: Vec::new(),
            paths: Vec::new(),
        };
        walker.visit_file(&ast);
        for (name, path, owns) in walker.children {
            let mut child = module.clone();
            child.push(name);
            pending.push((child, path, owns));
        }
        krate.inline.extend(walker.inline);
        raw.extend(walker.paths);
        krate.files.insert(module, file);
    }
    for (at, segs) in raw {
        let file_module = deepest(&krate.files, &at);
        if let Some(target) = resolve(&krate, &at, &segs)
            && target != file_module
        {
            krate.refs.entry(file_module).or_default().insert(target);
        }
    }
    krate
}

/// The longest prefix of `path` that is a module with a file.
fn deepest(files: &BTreeMap<ModPath, PathBuf>, path: &[String]) -> ModPath {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|p| files.contains_key(p))
        .unwrap_or_default()
}

/// The module `segs`, written inside module `at`, leads to; `None` for another crate's path.
fn resolve(krate: &Crate, at: &[String], segs: &[String]) -> Option<ModPath> {
    let first = segs.first()?;
    let mut base: ModPath = match first.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => at.to_vec(),
        name => {
            let mut child = at.to_vec();
            child.push(name.to_owned());
            if !krate.files.contains_key(&child) && !krate.inline.contains(&child) {
                return None;
            }
            at.to_vec()
        }
    };
    let mut rest = if first == "crate" { &segs[1..] } else { segs };
    while let Some(head) = rest.first() {
        match head.as_str() {
            "super" => {
                base.pop();
            }
            "self" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(deepest(&krate.files, &base))
}

/// Collects one file's `mod` items and the paths it writes.
struct Walker {
    /// The module being walked: the file's, then any inline module inside it.
    stack: ModPath,
    file_module: ModPath,
    /// Where `#[path]` is relative to, and where `mod name;` looks for `name.rs`/`name/mod.rs`.
    file_dir: PathBuf,
    child_dir: PathBuf,
    children: Vec<(String, PathBuf, bool)>,
    inline: Vec<ModPath>,
    paths: Vec<(ModPath, Vec<String>)>,
}

impl Walker {
    fn record(&mut self, segs: Vec<String>) {
        if !segs.is_empty() {
            self.paths.push((self.stack.clone(), segs));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.leaf(prefix, &n.ident),
            syn::UseTree::Rename(r) => self.leaf(prefix, &r.ident),
            syn::UseTree::Glob(_) => self.record(prefix.clone()),
            syn::UseTree::Group(g) => {
                for item in &g.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }

    fn leaf(&mut self, prefix: &[String], ident: &syn::Ident) {
        let mut segs = prefix.to_vec();
        // `use super::{self, x}` names the module itself.
        if ident != "self" {
            segs.push(ident.to_string());
        }
        self.record(segs);
    }

    /// Paths in a macro's arguments (`format!("{}", crate::x::Y)`): runs of `ident ::`.
    fn tokens(&mut self, tokens: TokenStream) {
        let mut run: Vec<String> = Vec::new();
        let mut colons = 0;
        for tree in tokens {
            match tree {
                TokenTree::Ident(ident) if run.is_empty() || colons == 2 => {
                    run.push(ident.to_string());
                    colons = 0;
                }
                TokenTree::Punct(p) if p.as_char() == ':' && !run.is_empty() && colons < 2 => {
                    colons += 1;
                }
                other => {
                    self.record(std::mem::take(&mut run));
                    colons = 0;
                    match other {
                        TokenTree::Group(g) => self.tokens(g.stream()),
                        TokenTree::Ident(ident) => run.push(ident.to_string()),
                        _ => {}
                    }
                }
            }
        }
        self.record(run);
    }
}

impl<'ast> Visit<'ast> for Walker {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let name = item.ident.to_string();
        if let Some((_, items)) = &item.content {
            self.stack.push(name);
            self.inline.push(self.stack.clone());
            for item in items {
                self.visit_item(item);
            }
            self.stack.pop();
            return;
        }
        assert_eq!(
            self.stack, self.file_module,
            "`mod {name};` inside an inline module"
        );
        let explicit = item.attrs.iter().find_map(|attr| match &attr.meta {
            syn::Meta::NameValue(nv) if nv.path.is_ident("path") => match &nv.value {
                syn::Expr::Lit(syn::ExprLit {
                    lit: syn::Lit::Str(s),
                    ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        });
        let (path, owns_dir) = match explicit {
            // A `#[path]` file keeps its own children beside it only when named `mod.rs`.
            Some(rel) => {
                let path = self.file_dir.join(&rel);
                let owns = path.file_name().is_some_and(|n| n == "mod.rs");
                (path, owns)
            }
            None => {
                let flat = self.child_dir.join(format!("{name}.rs"));
                if flat.exists() {
                    (flat, false)
                } else {
                    (self.child_dir.join(&name).join("mod.rs"), true)
                }
            }
        };
        self.children.push((name, path, owns_dir));
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        if path.leading_colon.is_none() {
            self.record(path.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, path);
    }

    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        self.visit_path(&mac.path);
        self.tokens(mac.tokens.clone());
    }

    // `pub(in crate::x)` says who may see an item, not what the module uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}

/// The circles of one crate, each parent's children taken as one graph.
fn circles(krate: &Crate) -> Vec<Circle> {
    let mut found = Vec::new();
    for parent in krate.files.keys() {
        let depth = parent.len();
        let under = |m: &ModPath| m.len() > depth && m[..depth] == parent[..];
        let children: Vec<String> = krate
            .files
            .keys()
            .filter(|m| m.len() == depth + 1 && under(m))
            .map(|m| m[depth].clone())
            .collect();
        if children.len() < 2 {
            continue;
        }
        let index = |name: &str| children.iter().position(|c| c == name);
        let mut edges = vec![BTreeSet::new(); children.len()];
        let mut example = BTreeMap::new();
        for (from, targets) in &krate.refs {
            for to in targets {
                if !under(from) || !under(to) || from[depth] == to[depth] {
                    continue;
                }
                let (Some(a), Some(b)) = (index(&from[depth]), index(&to[depth])) else {
                    continue;
                };
                edges[a].insert(b);
                example
                    .entry((a, b))
                    .or_insert_with(|| (from.clone(), to.clone()));
            }
        }
        for component in strongly_connected(&edges) {
            if component.len() < 2 {
                continue;
            }
            let arrows = example
                .iter()
                .filter(|((a, b), _)| component.contains(a) && component.contains(b))
                .map(|(_, arrow)| arrow.clone())
                .collect();
            let mut members: Vec<String> = component.iter().map(|&i| children[i].clone()).collect();
            members.sort();
            found.push(Circle {
                parent: parent.clone(),
                members,
                arrows,
            });
        }
    }
    found
}

/// Tarjan's algorithm over `edges` (node index → successors).
fn strongly_connected(edges: &[BTreeSet<usize>]) -> Vec<Vec<usize>> {
    struct State<'a> {
        edges: &'a [BTreeSet<usize>],
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(s: &mut State<'_>, v: usize) {
        s.index[v] = Some(s.next);
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for &w in s.edges[v].iter() {
            match s.index[w] {
                None => {
                    visit(s, w);
                    s.low[v] = s.low[v].min(s.low[w]);
                }
                Some(iw) if s.on_stack[w] => s.low[v] = s.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(s.low[v]) == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().expect("v is on the stack");
                s.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            s.out.push(component);
        }
    }
    let n = edges.len();
    let mut s = State {
        edges,
        index: vec![None; n],
        low: vec![0; n],
        stack: Vec::new(),
        on_stack: vec![false; n],
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if s.index[v].is_none() {
            visit(&mut s, v);
        }
    }
    s.out
}

fn report(name: &str, found: &[Circle]) -> String {
    let mut text = String::new();
    for circle in found {
        text.push_str(&format!(
            "{name}: in {}: {{{}}}\n",
            show(&circle.parent),
            circle.members.join(", ")
        ));
        for (from, to) in &circle.arrows {
            text.push_str(&format!("    {} -> {}\n", show(from), show(to)));
        }
    }
    text
}

#[test]
fn import_circles_do_not_grow() {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut total = 0;
    let mut text = String::new();
    for (name, root) in CRATES {
        let krate = read_crate(&workspace.join(root));
        assert!(
            krate.files.len() > 1 || *name != "dsh-tool-runtime",
            "the module tree was read"
        );
        let found = circles(&krate);
        total += found.len();
        text.push_str(&report(name, &found));
    }
    println!("{total} import circles\n{text}");
    assert_eq!(total, 0, "import circles:\n{text}");
}

/// Writes `files` (path, text) under a new directory and reads the crate rooted at `lib.rs`.
fn fixture(files: &[(&str, &str)]) -> (tempfile::TempDir, Crate) {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }
    let krate = read_crate(&dir.path().join("lib.rs"));
    (dir, krate)
}

#[test]
fn two_siblings_that_use_each_other_are_a_circle() {
    let (_dir, krate) = fixture(&[
        ("lib.rs", "mod a; mod b; mod c;"),
        ("a.rs", "use super::b::B; pub struct A;"),
        ("b.rs", "pub struct B; fn f() { let _ = crate::a::A; }"),
        ("c.rs", "use crate::a::A;"),
    ]);
    let found = circles(&krate);
    assert_eq!(found.len(), 1, "{}", report("fixture", &found));
    assert_eq!(found[0].members, ["a", "b"]);
    assert_eq!(found[0].arrows.len(), 2);
}

#[test]
fn a_folder_counts_as_one_node_and_its_front_as_none() {
    let (_dir, krate) = fixture(&[
        ("lib.rs", "mod x; mod y;"),
        // `x/mod.rs` re-exports its child and its child uses the front: no circle.
        (
            "x/mod.rs",
            "mod inner; pub use inner::I; pub struct Shared;",
        ),
        (
            "x/inner.rs",
            "pub struct I(super::Shared); fn f() { format!(\"{:?}\", crate::y::Y); }",
        ),
        ("y.rs", "#[path = \"y_more.rs\"] mod more; pub struct Y;"),
        // Reached through `#[path]`: `y::more`, whose `super` is `y`.
        ("y_more.rs", "use super::super::x::I; use super::Y;"),
    ]);
    assert!(
        krate
            .files
            .contains_key(&vec!["y".to_owned(), "more".to_owned()])
    );
    let found = circles(&krate);
    assert_eq!(found.len(), 1, "{}", report("fixture", &found));
    assert_eq!(found[0].members, ["x", "y"]);
}

#[test]
fn inline_modules_and_other_crates_make_no_arrow() {
    let (_dir, krate) = fixture(&[
        ("lib.rs", "mod a; mod b;"),
        (
            "a.rs",
            "pub struct A; #[cfg(test)] mod tests { use super::A; }",
        ),
        (
            "b.rs",
            "use serde::Serialize; pub(in crate::a) struct B; fn f() { std::mem::drop(crate::a::A); }",
        ),
    ]);
    assert!(circles(&krate).is_empty());
    let a = vec!["a".to_owned()];
    assert_eq!(krate.refs.get(&a), None, "{:?}", krate.refs);
}
