//! Every relative link and `#anchor` in the project's Markdown resolves: README.md,
//! ARCHITECTURE.md, BENCHMARKS.md and everything under docs/. A link names a file or directory of
//! the repository (relative to the linking file), and its anchor, when the target is Markdown,
//! one of the target's headings as GitHub slugs them (lower case, punctuation dropped, spaces as
//! hyphens, a repeated heading suffixed `-1`, `-2`, …) or an `<a id>`/`<a name>` of it.
//!
//! The Markdown is read with a small line parser: fenced code blocks (``` and ~~~, CommonMark's
//! closing rule) and code spans hold no links; inline links and images, `[label]: target`
//! definitions, ATX and setext headings are what it reads. Links to other sites are not fetched.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

/// A link that does not resolve: where it is, what it says, and why it fails.
#[derive(Debug, PartialEq, Eq)]
struct Broken {
    file: PathBuf,
    line: usize,
    target: String,
    reason: String,
}

/// What one Markdown file offers and asks for.
#[derive(Debug, Default)]
struct Scanned {
    /// The anchors its headings (and `<a id>`s) define.
    anchors: HashSet<String>,
    /// Its link targets, with their 1-based line numbers.
    links: Vec<(usize, String)>,
}

/// GitHub's heading slug: inline markup reduced to its text, lower case, every character that is
/// not a letter, digit, `-`, `_` or space dropped, spaces turned into hyphens.
fn slug(heading: &str) -> String {
    let text = strip_code_spans(heading, true);
    let text = link_texts(&text);
    text.chars()
        .filter(|c| !matches!(c, '*'))
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// `[text](target)` reduced to `text` (the text a heading renders).
fn link_texts(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|at| open + at) else {
            break;
        };
        let Some(end) = destination_end(&rest[close + 2..]) else {
            break;
        };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[close + 2 + end + 1..];
    }
    out.push_str(rest);
    out
}

/// The text of a line with its code spans removed (`keep` keeps their contents, as a heading's
/// rendered text does). A backtick run without its closing run of the same length is literal.
fn strip_code_spans(line: &str, keep: bool) -> String {
    let bytes = line.as_bytes();
    let mut out = String::new();
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'`' {
            let next = line[at..].find('`').map_or(line.len(), |n| at + n);
            out.push_str(&line[at..next]);
            at = next;
            continue;
        }
        let run = bytes[at..].iter().take_while(|b| **b == b'`').count();
        let fence = &line[at..at + run];
        let mut search = at + run;
        let mut closed = None;
        while let Some(found) = line[search..].find(fence).map(|n| search + n) {
            let after = bytes[found + run..]
                .iter()
                .take_while(|b| **b == b'`')
                .count();
            if after == 0 {
                closed = Some(found);
                break;
            }
            search = found + run + after;
        }
        match closed {
            Some(end) => {
                if keep {
                    out.push_str(line[at + run..end].trim());
                }
                at = end + run;
            }
            None => {
                out.push_str(fence);
                at += run;
            }
        }
    }
    out
}

/// Where a link destination (the text after `](`) ends: the index of its closing `)`, nested
/// parentheses balanced; `None` when it does not close on the line.
fn destination_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (at, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth == 0 => return Some(at),
            ')' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The target of a destination: `<…>` unwrapped, a title (`"…"` after a space) left out.
fn target_of(destination: &str) -> String {
    let destination = destination.trim();
    if let Some(inner) = destination.strip_prefix('<') {
        return inner.split('>').next().unwrap_or_default().to_owned();
    }
    destination
        .split_whitespace()
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// An opening code fence: its character and length.
fn fence_open(line: &str) -> Option<(char, usize)> {
    let indent = line.len() - line.trim_start_matches(' ').len();
    let rest = &line[indent..];
    let c = rest.chars().next()?;
    if indent > 3 || !matches!(c, '`' | '~') {
        return None;
    }
    let run = rest.chars().take_while(|x| *x == c).count();
    // A backtick fence's info string holds no backtick.
    (run >= 3 && !(c == '`' && rest[run..].contains('`'))).then_some((c, run))
}

/// Reads one Markdown text.
fn scan(text: &str) -> Scanned {
    let mut scanned = Scanned::default();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut add_heading = |scanned: &mut Scanned, heading: &str| {
        let base = slug(heading);
        let count = seen.entry(base.clone()).or_insert(0);
        let anchor = if *count == 0 {
            base.clone()
        } else {
            format!("{base}-{count}")
        };
        *count += 1;
        scanned.anchors.insert(anchor);
    };
    let mut fence: Option<(char, usize)> = None;
    let mut previous: Option<String> = None;
    for (index, line) in text.lines().enumerate() {
        if let Some((c, run)) = fence {
            let trimmed = line.trim();
            if trimmed.len() >= run && trimmed.chars().all(|x| x == c) {
                fence = None;
            }
            previous = None;
            continue;
        }
        if let Some(open) = fence_open(line) {
            fence = Some(open);
            previous = None;
            continue;
        }
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let hashes = trimmed.chars().take_while(|c| *c == '#').count();
        if indent <= 3
            && (1..=6).contains(&hashes)
            && trimmed[hashes..]
                .chars()
                .next()
                .is_none_or(char::is_whitespace)
        {
            let heading = trimmed[hashes..].trim().trim_end_matches('#').trim();
            add_heading(&mut scanned, heading);
        } else if indent <= 3
            && !trimmed.is_empty()
            && (trimmed.trim_end().chars().all(|c| c == '=')
                || trimmed.trim_end().chars().all(|c| c == '-'))
            && previous.is_some()
        {
            // A setext underline under a paragraph line.
            let heading = previous.take().unwrap_or_default();
            add_heading(&mut scanned, heading.trim());
            continue;
        }
        let plain = strip_code_spans(line, false);
        for attribute in ["id=\"", "name=\""] {
            let mut rest = plain.as_str();
            while let Some(at) = rest.find("<a ") {
                rest = &rest[at + 3..];
                let tag = rest.split('>').next().unwrap_or_default();
                if let Some(start) = tag.find(attribute) {
                    let value = &tag[start + attribute.len()..];
                    scanned
                        .anchors
                        .insert(value.split('"').next().unwrap_or_default().to_owned());
                }
            }
        }
        let mut rest = plain.as_str();
        while let Some(at) = rest.find("](") {
            rest = &rest[at + 2..];
            if let Some(end) = destination_end(rest) {
                scanned.links.push((index + 1, target_of(&rest[..end])));
                rest = &rest[end..];
            }
        }
        let definition = plain.trim_start();
        if indent <= 3
            && definition.starts_with('[')
            && let Some(close) = definition.find("]:")
        {
            scanned
                .links
                .push((index + 1, target_of(&definition[close + 2..])));
        }
        let paragraph = !trimmed.is_empty()
            && hashes == 0
            && !trimmed.starts_with('|')
            && !trimmed.starts_with("- ")
            && !trimmed.starts_with("* ")
            && !trimmed.starts_with('>');
        previous = paragraph.then(|| line.to_owned());
    }
    scanned
}

/// `path` with `.` and `..` resolved, or `None` when it climbs above `root`.
fn normalize(root: &Path, path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out.starts_with(root).then_some(out)
}

/// Every broken link of `files` (absolute paths of Markdown files below `root`).
fn check(root: &Path, files: &[PathBuf]) -> Vec<Broken> {
    let mut cache: HashMap<PathBuf, Scanned> = HashMap::new();
    let mut read = |path: &Path| -> Option<HashSet<String>> {
        if !cache.contains_key(path) {
            let text = std::fs::read_to_string(path).ok()?;
            cache.insert(path.to_owned(), scan(&text));
        }
        cache.get(path).map(|scanned| scanned.anchors.clone())
    };
    let mut broken = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).expect("a listed Markdown file reads");
        for (line, target) in scan(&text).links {
            let fail = |reason: &str| Broken {
                file: file.strip_prefix(root).unwrap_or(file).to_owned(),
                line,
                target: target.clone(),
                reason: reason.to_owned(),
            };
            if target.is_empty() {
                broken.push(fail("empty link"));
                continue;
            }
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                Some(file.clone())
            } else {
                normalize(
                    root,
                    &file.parent().expect("a file has a folder").join(path),
                )
            };
            let Some(resolved) = resolved else {
                broken.push(fail("leads outside the repository"));
                continue;
            };
            if !resolved.exists() {
                broken.push(fail("no such file or directory"));
                continue;
            }
            let (Some(anchor), true) =
                (anchor, resolved.extension().is_some_and(|ext| ext == "md"))
            else {
                continue;
            };
            match read(&resolved) {
                Some(anchors) if anchors.contains(anchor) => {}
                Some(_) => broken.push(fail("no heading has this anchor")),
                None => broken.push(fail("the target does not read as text")),
            }
        }
    }
    broken
}

/// The Markdown files below `dir`, recursively.
fn markdown_below(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            markdown_below(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "md") {
            out.push(path);
        }
    }
}

#[test]
fn every_relative_link_and_anchor_of_the_docs_resolves() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<PathBuf> = ["README.md", "ARCHITECTURE.md", "BENCHMARKS.md"]
        .iter()
        .map(|name| root.join(name))
        .collect();
    markdown_below(&root.join("docs"), &mut files);
    assert!(
        files.iter().any(|file| file.starts_with(root.join("docs"))),
        "the guide is under docs/"
    );
    let broken = check(&root, &files);
    let report: Vec<String> = broken
        .iter()
        .map(|b| {
            format!(
                "{}:{}: ({}) {}",
                b.file.display(),
                b.line,
                b.target,
                b.reason
            )
        })
        .collect();
    assert!(report.is_empty(), "broken links:\n{}", report.join("\n"));
}

#[test]
fn headings_slug_as_github_slugs_them() {
    for (heading, expected) in [
        (
            "Embedded runtime: when to pick which",
            "embedded-runtime-when-to-pick-which",
        ),
        ("`dsh-tools serve --http`", "dsh-tools-serve---http"),
        ("OAuth 2.1", "oauth-21"),
        (
            "Python on Monty's worker pool",
            "python-on-montys-worker-pool",
        ),
        ("`#[tool]`", "tool"),
        ("The `dsh-tools` command", "the-dsh-tools-command"),
        ("Event logs and `replay`", "event-logs-and-replay"),
        (
            "A [linked](x.md) **bold** name_with_underscore",
            "a-linked-bold-name_with_underscore",
        ),
        (
            "Dispatch (`benches/dispatch.rs`)",
            "dispatch-benchesdispatchrs",
        ),
    ] {
        assert_eq!(slug(heading), expected, "{heading}");
    }
}

#[test]
fn a_broken_file_anchor_or_escape_is_reported_and_code_is_not_read() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir(root.join("guide")).unwrap();
    std::fs::write(
        root.join("guide/one.md"),
        "# One\n\n## Twice\n\n## Twice\n\nSetext\n---\n\n<a id=\"here\"></a>\n",
    )
    .unwrap();
    let index = "\
# Index

[fine](guide/one.md#twice-1) [setext](guide/one.md#setext) [html](guide/one.md#here)
[self](#index) [folder](guide/) ![image](guide/one.md) [web](https://example.com/#nothing)
[missing](guide/two.md)
[bad anchor](guide/one.md#twice-2)
[out](../elsewhere.md)
`[in a span](nowhere.md)`

```md
[in a fence](nowhere.md)
```

[defined]: guide/none.md
";
    std::fs::write(root.join("index.md"), index).unwrap();
    let broken = check(&root, &[root.join("index.md")]);
    let found: Vec<(usize, &str, &str)> = broken
        .iter()
        .map(|b| (b.line, b.target.as_str(), b.reason.as_str()))
        .collect();
    assert_eq!(
        found,
        [
            (5, "guide/two.md", "no such file or directory"),
            (6, "guide/one.md#twice-2", "no heading has this anchor"),
            (7, "../elsewhere.md", "leads outside the repository"),
            (14, "guide/none.md", "no such file or directory"),
        ]
    );
}
