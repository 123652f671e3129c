//! Every package of the workspace packs as crates.io takes it: its manifest says what the
//! registry requires, it carries the license files its `license` names, and its sources name no
//! file outside what `cargo package` puts in it.
//!
//! What a package holds is cargo's own answer (`cargo package --list`), so a file that is
//! git-ignored, excluded, or inside a nested package counts as missing just as it would in the
//! `.crate` file. The sources are read as tokens (comments and string contents are no code):
//! `include_str!`, `include_bytes!`, `include!` and `#[path]` are followed, a literal path from
//! the file's directory and `concat!(env!("CARGO_MANIFEST_DIR"), "…")` from the package's root;
//! any other argument fails the test, which cannot tell where it leads.
//!
//! `cargo package --workspace` checks the same and builds each package from its `.crate`, each
//! against the `.crate` files of the workspace packages it depends on (cargo's local overlay of
//! the registry): [`every_package_builds_from_its_crate_file`] runs it, and the scans above say
//! which file is at fault in the time of a `cargo metadata`.
//!
//! The suite runs with every feature; a library user builds with the default features or none.
//! [`the_doctests_pass_with_the_default_features`] and
//! [`the_facade_builds_without_default_features`] run those builds.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use serde_json::Value;

/// The workspace root, which is the facade package's root.
const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The license every package is offered under.
const LICENSE: &str = "MIT OR Apache-2.0";

/// The files [`LICENSE`] names, at the root of every package.
const LICENSE_FILES: &[&str] = &["LICENSE-MIT", "LICENSE-APACHE"];

/// Runs cargo in the workspace root, offline; its standard output.
fn cargo(args: &[&str]) -> String {
    cargo_output(args).0
}

/// Runs cargo in the workspace root, offline, and fails with its messages unless it succeeds;
/// its standard output and its standard error (where cargo reports what it builds). A build
/// shares the suite's target directory (`CARGO_TARGET_DIR` is inherited), so what an earlier
/// run compiled is compiled once.
fn cargo_output(args: &[&str]) -> (String, String) {
    let out = Command::new(env!("CARGO"))
        .args(args)
        .arg("--offline")
        .current_dir(ROOT)
        .output()
        .expect("cargo runs");
    let stdout = String::from_utf8(out.stdout).expect("cargo prints UTF-8");
    let stderr = String::from_utf8(out.stderr).expect("cargo prints UTF-8");
    assert!(
        out.status.success(),
        "cargo {}: {stdout}{stderr}",
        args.join(" ")
    );
    (stdout, stderr)
}

/// The workspace's packages, as `cargo metadata` describes them.
fn packages() -> Vec<Value> {
    let metadata: Value =
        serde_json::from_str(&cargo(&["metadata", "--no-deps", "--format-version", "1"]))
            .expect("cargo metadata prints JSON");
    let packages = metadata["packages"]
        .as_array()
        .expect("metadata lists packages")
        .clone();
    assert!(!packages.is_empty(), "the workspace has packages");
    packages
}

fn name(package: &Value) -> &str {
    package["name"].as_str().expect("a package has a name")
}

/// The directory of a package's manifest.
fn root_of(package: &Value) -> PathBuf {
    Path::new(
        package["manifest_path"]
            .as_str()
            .expect("a package has a manifest"),
    )
    .parent()
    .expect("a manifest has a directory")
    .to_path_buf()
}

/// The files `cargo package` puts in a package, relative to its root, `/`-separated.
fn packaged(package: &Value) -> BTreeSet<String> {
    cargo(&["package", "--list", "--allow-dirty", "-p", name(package)])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// `path` with `.` and `..` resolved without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// Where the argument of an `include…!` leads: a path, `None` for the build's `OUT_DIR`, or
/// why this test cannot follow it.
fn include_target(
    arg: TokenStream,
    file_dir: &Path,
    package_root: &Path,
) -> Result<Option<PathBuf>, String> {
    let mut tokens: Vec<TokenTree> = arg.into_iter().collect();
    if matches!(tokens.last(), Some(TokenTree::Punct(p)) if p.as_char() == ',') {
        tokens.pop();
    }
    match tokens.as_slice() {
        [TokenTree::Literal(lit)] => Ok(Some(file_dir.join(string(lit)?))),
        [
            TokenTree::Ident(concat),
            TokenTree::Punct(bang),
            TokenTree::Group(args),
        ] if concat == "concat" && bang.as_char() == '!' => {
            let mut text = String::new();
            for piece in split_commas(args.stream()) {
                match piece.as_slice() {
                    [TokenTree::Literal(lit)] => text.push_str(&string(lit)?),
                    [
                        TokenTree::Ident(env),
                        TokenTree::Punct(bang),
                        TokenTree::Group(var),
                    ] if env == "env" && bang.as_char() == '!' => {
                        match var.stream().to_string().as_str() {
                            "\"CARGO_MANIFEST_DIR\"" => {
                                text.push_str(&package_root.to_string_lossy())
                            }
                            "\"OUT_DIR\"" => return Ok(None),
                            other => return Err(format!("env!({other}) in a path")),
                        }
                    }
                    _ => return Err(format!("`{}` in a path", args.stream())),
                }
            }
            Ok(Some(PathBuf::from(text)))
        }
        _ => Err(format!(
            "`{}` is no literal path",
            tokens.into_iter().collect::<TokenStream>()
        )),
    }
}

/// A string literal's value.
fn string(lit: &proc_macro2::Literal) -> Result<String, String> {
    syn::parse_str::<syn::LitStr>(&lit.to_string())
        .map(|s| s.value())
        .map_err(|_| format!("`{lit}` is no string literal"))
}

/// The comma-separated pieces of a macro's arguments.
fn split_commas(stream: TokenStream) -> Vec<Vec<TokenTree>> {
    let mut pieces = vec![Vec::new()];
    for token in stream {
        match &token {
            TokenTree::Punct(p) if p.as_char() == ',' => pieces.push(Vec::new()),
            _ => pieces.last_mut().expect("one piece at least").push(token),
        }
    }
    pieces.retain(|piece| !piece.is_empty());
    pieces
}

/// Every path `tokens` names at compile time, or why one cannot be followed.
fn collect(
    tokens: TokenStream,
    file_dir: &Path,
    package_root: &Path,
    found: &mut Vec<(String, Result<Option<PathBuf>, String>)>,
) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, token) in tokens.iter().enumerate() {
        let TokenTree::Group(group) = token else {
            continue;
        };
        // `include_str!(…)`, `include_bytes!(…)`, `include!(…)`.
        if let [TokenTree::Ident(name), TokenTree::Punct(bang)] = &tokens[i.saturating_sub(2)..i]
            && bang.as_char() == '!'
            && ["include_str", "include_bytes", "include"].contains(&name.to_string().as_str())
        {
            found.push((
                format!("{name}!{group}"),
                include_target(group.stream(), file_dir, package_root),
            ));
        }
        // `#[path = "…"]`: relative to the directory of the file that says it.
        if group.delimiter() == Delimiter::Bracket
            && let [
                TokenTree::Ident(path),
                TokenTree::Punct(eq),
                TokenTree::Literal(lit),
            ] = group.stream().into_iter().collect::<Vec<_>>().as_slice()
            && path == "path"
            && eq.as_char() == '='
        {
            found.push((
                format!("#{group}"),
                string(lit).map(|p| Some(file_dir.join(p))),
            ));
        }
        collect(group.stream(), file_dir, package_root, found);
    }
}

/// What is wrong with the paths one source file names: each reference that leaves its package
/// or names a file the package does not hold, and each this test cannot follow.
fn file_problems(
    text: &str,
    file: &Path,
    package_root: &Path,
    packaged: &BTreeSet<String>,
) -> Vec<String> {
    let tokens: TokenStream = match text.parse() {
        Ok(tokens) => tokens,
        Err(e) => return vec![format!("{}: does not tokenize: {e}", file.display())],
    };
    let mut found = Vec::new();
    let file_dir = file.parent().expect("a file has a directory");
    collect(tokens, file_dir, package_root, &mut found);
    let mut problems = Vec::new();
    for (written, target) in found {
        match target {
            Ok(None) => {}
            Ok(Some(target)) => match normalize(&target).strip_prefix(package_root) {
                Err(_) => problems.push(format!(
                    "{}: {written} reaches outside the package ({})",
                    file.display(),
                    package_root.display()
                )),
                Ok(relative) => {
                    let relative = relative.to_string_lossy().replace('\\', "/");
                    if !packaged.contains(&relative) {
                        problems.push(format!(
                            "{}: {written} names {relative}, which the package does not hold",
                            file.display()
                        ));
                    }
                }
            },
            Err(why) => problems.push(format!("{}: {written}: {why}", file.display())),
        }
    }
    problems
}

#[test]
fn every_manifest_says_what_the_registry_requires() {
    let mut problems = Vec::new();
    for package in packages() {
        let name = name(&package);
        if package["description"].as_str().is_none_or(str::is_empty) {
            problems.push(format!("{name}: no description"));
        }
        if package["license"].as_str() != Some(LICENSE) {
            problems.push(format!(
                "{name}: license {} (expected {LICENSE})",
                package["license"]
            ));
        }
        // `publish = false` reads as an empty list of registries.
        if package["publish"] == serde_json::json!([]) {
            problems.push(format!("{name}: publish = false"));
        }
        for dep in package["dependencies"].as_array().expect("dependencies") {
            // A path dependency without a version is dropped from a published dev-dependency
            // list, and refused anywhere else.
            if dep["path"].is_string() && dep["kind"] != "dev" && dep["req"] == "*" {
                problems.push(format!(
                    "{name}: path dependency {} has no version",
                    dep["name"]
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_package_carries_its_license_files() {
    let root_dir = Path::new(ROOT);
    let mut problems = Vec::new();
    for package in packages() {
        let name = name(&package);
        let files = packaged(&package);
        for license in LICENSE_FILES {
            if !files.contains(*license) {
                problems.push(format!("{name}: {license} is not in the package"));
                continue;
            }
            let text = std::fs::read_to_string(root_of(&package).join(license));
            let original = std::fs::read_to_string(root_dir.join(license))
                .unwrap_or_else(|e| panic!("{license} at the workspace root: {e}"));
            if text.as_deref().ok() != Some(original.as_str()) {
                problems.push(format!("{name}: {license} differs from the root's"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn no_source_reaches_outside_its_package() {
    let mut problems = Vec::new();
    let mut followed = 0;
    for package in packages() {
        let root = root_of(&package);
        let files = packaged(&package);
        for target in package["targets"].as_array().expect("targets") {
            let source = Path::new(target["src_path"].as_str().expect("a target has a source"));
            let held = source
                .strip_prefix(&root)
                .is_ok_and(|rel| files.contains(&rel.to_string_lossy().replace('\\', "/")));
            if !held {
                problems.push(format!(
                    "{}: target {} is built from {}, which the package does not hold",
                    name(&package),
                    target["name"],
                    source.display()
                ));
            }
        }
        for file in files.iter().filter(|f| f.ends_with(".rs")) {
            let path = root.join(file);
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
            followed += 1;
            problems.extend(file_problems(&text, &path, &root, &files));
        }
    }
    assert!(followed > 100, "read {followed} source files");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The checks above would pass on a scanner that finds nothing: this one shows what it finds.
#[test]
fn the_scanner_catches_what_leaves_a_package() {
    let root = Path::new("/w/runtime");
    let file = root.join("src/sdk/template.rs");
    let packaged: BTreeSet<String> = ["src/sdk/template.rs", "src/sdk/guide.md", "src/x.rs"]
        .into_iter()
        .map(str::to_owned)
        .collect();
    let text = r####"
        //! include_str!("../../../outside/in/a/comment.js") is no code.
        #![doc = include_str!("guide.md")]
        const A: &str = include_str!("../../../sdk-templates/worker.mjs");
        static B: std::sync::LazyLock<Vec<u8>> = std::sync::LazyLock::new(|| {
            include_bytes!(
                "../../missing.bin"
            ).to_vec()
        });
        const C: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/x.rs"));
        const D: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/../LICENSE-MIT"));
        const E: &str = include_str!(concat!(env!("OUT_DIR"), "/generated.rs"));
        const F: &str = "include_str!(\"../../../in/a/string\")";
        macro_rules! text { () => { include_str!(r"../x.rs") } }
        #[path = "../../../elsewhere/mod.rs"]
        mod elsewhere;
        #[path = "../x.rs"]
        mod x;
        const G: &str = include_str!(name_of_file!());
    "####;
    let problems = file_problems(text, &file, root, &packaged);
    let expected = [
        "include_str!(\"../../../sdk-templates/worker.mjs\") reaches outside the package",
        "include_bytes!(\"../../missing.bin\") names missing.bin, which the package does not hold",
        "/../LICENSE-MIT\")) reaches outside the package",
        "#[path = \"../../../elsewhere/mod.rs\"] reaches outside the package",
        "include_str!(name_of_file ! ()): `name_of_file ! ()` is no literal path",
    ];
    assert_eq!(problems.len(), expected.len(), "{problems:#?}");
    for (problem, expected) in problems.iter().zip(expected) {
        assert!(problem.contains(expected), "{problem:?} lacks {expected:?}");
    }
}

/// The workspace's packages in the order they are published: each after every package it
/// depends on (normal and build dependencies; dev-dependencies are dropped from a published
/// manifest's requirements).
const PUBLISH_ORDER: &[&str] = &[
    "dsh-sdk-templates",
    "dsh-tool-macros",
    "dsh-tool-runtime",
    "dsh-tool-code-mode",
    "dsh-tool-engines",
    "dsh-tool-mcp",
    "dsh-tool-provider",
    "dsh-tools",
];

#[test]
fn the_packages_publish_in_dependency_order() {
    let packages = packages();
    let mut names: Vec<&str> = packages.iter().map(name).collect();
    names.sort_unstable();
    let mut listed = PUBLISH_ORDER.to_vec();
    listed.sort_unstable();
    assert_eq!(
        names, listed,
        "PUBLISH_ORDER lists every package of the workspace"
    );
    let mut problems = Vec::new();
    for package in &packages {
        let place = |n: &str| PUBLISH_ORDER.iter().position(|p| *p == n);
        let own = place(name(package)).expect("listed");
        for dep in package["dependencies"].as_array().expect("dependencies") {
            let dep_name = dep["name"].as_str().expect("a dependency has a name");
            if dep["kind"] == "dev" {
                continue;
            }
            if let Some(theirs) = place(dep_name)
                && theirs >= own
            {
                problems.push(format!(
                    "{} depends on {dep_name}, which is published after it",
                    name(package)
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What crates.io does with each package, at the cost of a `cargo check`: every package is
/// packed (`cargo package --workspace --no-verify`), each `.crate` unpacked into a workspace of
/// its own where the packages reach each other only as unpacked `.crate` files
/// (`[patch.crates-io]`, as if published), and that workspace checked with every feature, from
/// the repository's `Cargo.lock` and profiles and in the suite's target directory, so the
/// registry dependencies' checks are shared with earlier runs. A file the build needs that a
/// package leaves out, a build script reading outside its package, a dependency only the
/// workspace supplied: each fails here. `cargo package --workspace` (verifying) does the same with
/// a full build of each package under its own features, which costs a cold CI run tens of
/// minutes.
#[test]
fn every_package_builds_from_its_crate_file() {
    cargo_output(&["package", "--workspace", "--no-verify", "--allow-dirty"]);
    let metadata: Value =
        serde_json::from_str(&cargo(&["metadata", "--no-deps", "--format-version", "1"]))
            .expect("cargo metadata prints JSON");
    let target = PathBuf::from(
        metadata["target_directory"]
            .as_str()
            .expect("metadata names the target directory"),
    );
    let workspace = tempfile::tempdir().expect("a temporary directory");
    let crates = workspace.path().join("crates");
    std::fs::create_dir(&crates).expect("the crates directory");
    let mut members = Vec::new();
    let mut patches = String::new();
    for package in packages() {
        let (name, version) = (
            name(&package),
            package["version"].as_str().expect("a version"),
        );
        let file = target.join(format!("package/{name}-{version}.crate"));
        let unpacked = Command::new("tar")
            .arg("xzf")
            .arg(&file)
            .arg("-C")
            .arg(&crates)
            .status()
            .expect("tar runs");
        assert!(unpacked.success(), "{} unpacks", file.display());
        members.push(format!("\"crates/{name}-{version}\""));
        patches.push_str(&format!(
            "{name} = {{ path = \"crates/{name}-{version}\" }}\n"
        ));
    }
    assert_eq!(
        members.len(),
        PUBLISH_ORDER.len(),
        "every package is packed"
    );
    let root_manifest =
        std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).expect("the root manifest");
    let profiles = root_manifest
        .find("[profile.")
        .map(|start| {
            let rest = &root_manifest[start..];
            let end = rest.find("\n[package]").unwrap_or(rest.len());
            &rest[..end]
        })
        .unwrap_or_default();
    std::fs::write(
        workspace.path().join("Cargo.toml"),
        format!(
            "[workspace]\nmembers = [{}]\nresolver = \"3\"\n\n[patch.crates-io]\n{patches}\n{profiles}\n",
            members.join(", ")
        ),
    )
    .expect("the workspace manifest");
    for file in ["Cargo.lock", "rust-toolchain.toml"] {
        std::fs::copy(Path::new(ROOT).join(file), workspace.path().join(file)).expect(file);
    }
    let out = Command::new(env!("CARGO"))
        .args(["check", "--workspace", "--all-features", "--offline"])
        .env("CARGO_TARGET_DIR", &target)
        .current_dir(workspace.path())
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "the packages do not build from their .crate files:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every README, guide and rustdoc snippet compiles under the default features too: a chapter or
/// a snippet that needs more is `cfg`-gated on the features it names (the suite's own doctests
/// run with every feature).
#[test]
fn the_doctests_pass_with_the_default_features() {
    cargo_output(&["test", "--doc", "--workspace", "--no-fail-fast"]);
}

/// The facade with no feature at all (no code mode, no MCP): the library builds and its unit
/// tests pass.
#[test]
fn the_facade_builds_without_default_features() {
    cargo_output(&["build", "-p", "dsh-tools", "--no-default-features", "--lib"]);
    cargo_output(&["test", "-p", "dsh-tools", "--no-default-features", "--lib"]);
}

/// Where `unsafe_code` may be allowed: the engines crate, and code mode's process and sandbox
/// calls. Test modules (`#[cfg(test)] mod …`) are not part of the fence.
fn may_allow_unsafe(package: &str, file: &str) -> bool {
    package == "dsh-tool-engines"
        || (package == "dsh-tool-code-mode"
            && ["src/code_runtime/process.rs", "src/code_runtime/sandbox.rs"].contains(&file))
}

/// The `allow(unsafe_code)` attributes in `tokens`, outside `#[cfg(test)]` modules.
fn unsafe_allows(tokens: TokenStream) -> usize {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut found = 0;
    let mut skip_next_module = false;
    for (i, token) in tokens.iter().enumerate() {
        let TokenTree::Group(group) = token else {
            continue;
        };
        let text = group.stream().to_string();
        if group.delimiter() == Delimiter::Bracket {
            let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
            if compact == "cfg(test)" {
                skip_next_module = true;
            }
            if compact.starts_with("allow(") && compact.contains("unsafe_code") {
                found += 1;
            }
            continue;
        }
        let is_module = matches!(&tokens[i.saturating_sub(2)..i],
            [TokenTree::Ident(kw), TokenTree::Ident(_)] if kw == "mod");
        if group.delimiter() == Delimiter::Brace {
            // `#[cfg(test)]` applies to the next item only.
            let skip = is_module && skip_next_module;
            skip_next_module = false;
            if skip {
                continue;
            }
        }
        found += unsafe_allows(group.stream());
    }
    found
}

#[test]
fn unsafe_is_allowed_only_where_the_fence_names() {
    let mut problems = Vec::new();
    let mut allowed = 0;
    for package in packages() {
        let name = name(&package);
        let root = root_of(&package);
        let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("a manifest");
        if !manifest.contains("[lints]\nworkspace = true") {
            problems.push(format!("{name}: does not inherit the workspace's lints"));
        }
        for file in packaged(&package)
            .iter()
            .filter(|f| f.starts_with("src/") && f.ends_with(".rs"))
        {
            let text = std::fs::read_to_string(root.join(file)).expect("a source file");
            let tokens: TokenStream = text.parse().expect("a source file tokenizes");
            let allows = unsafe_allows(tokens);
            if allows > 0 && !may_allow_unsafe(name, file) {
                problems.push(format!("{name}: {file} allows unsafe_code"));
            }
            allowed += allows;
        }
    }
    assert!(allowed > 0, "the engines allow unsafe_code somewhere");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The scanner of the fence sees attributes at any depth and leaves test modules out.
#[test]
fn the_fence_scanner_counts_allows_outside_test_modules() {
    let text = r#"
        #![allow(unsafe_code)]
        fn f() { #[allow(unsafe_code)] let x = unsafe { 1 }; }
        // allow(unsafe_code) in a comment is no attribute.
        #[cfg(test)]
        mod tests { #[allow(unsafe_code)] fn g() {} }
        mod inner { #[allow(dead_code, unsafe_code)] fn h() {} }
        #[cfg(test)]
        fn only_in_tests() {}
        mod after { #[allow(unsafe_code)] fn i() {} }
    "#;
    assert_eq!(unsafe_allows(text.parse().unwrap()), 4);
}
