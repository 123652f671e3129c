//! Text helpers shared by both target languages: one-line comment text, case conversion and the
//! collision-free allocator of generated type names.

use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Longest generated type name base, in bytes (ASCII only), before a numeric suffix. Keeps names
/// readable when a tool or `$defs` key is a paragraph of text.
const MAX_NAME_BASE: usize = 120;

/// Longest comment text, in chars, before it is cut with an ellipsis. A description is prose for
/// the model, and a 100 KiB one would drown every other tool.
const MAX_COMMENT_CHARS: usize = 4_000;

/// Characters that change how the surrounding text displays without being visible themselves:
/// bidirectional overrides and isolates (the "Trojan Source" set, CVE-2021-42574) and the BOM.
fn is_invisible_format(c: char) -> bool {
    matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}' | '\u{200E}' | '\u{200F}')
}

/// Writes `c` as visible escape text: `\xNN` below U+0100, `\uNNNN` above.
fn push_escape_text(out: &mut String, c: char) {
    let code = u32::from(c);
    if code < 0x100 {
        let _ = write!(out, "\\x{code:02x}");
    } else {
        let _ = write!(out, "\\u{code:04x}");
    }
}

/// Turns free text (a description) into one comment line: every whitespace run (including
/// newlines, U+2028 and U+2029) becomes one space, control characters (C0, DEL, C1) and invisible
/// format characters become visible `\xNN` / `\uNNNN` text, the result is trimmed and bounded.
/// Returns `None` when nothing visible is left. Language-specific terminators (`*/`, `"""`) are the
/// caller's business.
pub(crate) fn comment_line(text: &str) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut pending_space = false;
    for (count, c) in text.chars().enumerate() {
        if count >= MAX_COMMENT_CHARS {
            out.push_str(" …");
            break;
        }
        if c.is_whitespace() {
            pending_space = !out.is_empty();
            continue;
        }
        if pending_space {
            out.push(' ');
            pending_space = false;
        }
        if c.is_control() || is_invisible_format(c) {
            push_escape_text(&mut out, c);
        } else {
            out.push(c);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// Escapes `text` as the body of a double-quoted string literal valid in both TypeScript (ES2019+)
/// and Python 3: backslash and quote escaped, control characters, line and paragraph separators
/// and invisible format characters as `\uNNNN`, everything else verbatim (both languages read
/// source as UTF-8). JSON's escapes (RFC 8259 §7) are a subset of both languages' escapes.
pub(crate) fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control()
                || matches!(c, '\u{2028}' | '\u{2029}')
                || is_invisible_format(c) =>
            {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// True for a plain ASCII identifier: `[A-Za-z_][A-Za-z0-9_]*`. Both targets accept more (Unicode
/// identifiers), but Python folds identifiers with NFKC (PEP 3131), so a non-ASCII name could
/// silently become another one; ASCII keeps "bare" and "quoted" decisions identical everywhere.
pub(crate) fn is_ascii_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// PascalCase of the ASCII letters and digits of `text`: every run of other characters (dashes,
/// dots, underscores, spaces, non-ASCII) starts a new word whose first letter is upper-cased; the
/// rest of each word keeps its case, so `getUser` stays `GetUser`. May be empty.
pub(crate) fn pascal_case(text: &str) -> String {
    let mut out = String::new();
    let mut word_start = true;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if word_start {
                out.push(c.to_ascii_uppercase());
            } else {
                out.push(c);
            }
            word_start = false;
        } else {
            word_start = true;
        }
        if out.len() >= MAX_NAME_BASE {
            break;
        }
    }
    out
}

/// Hands out type names that are unique within one generated file and avoid a reserved set (the
/// target language's keywords, its standard names and the fixed names the SDK declares).
#[derive(Debug, Clone)]
pub(crate) struct NameAllocator {
    reserved: &'static [&'static str],
    taken: BTreeSet<String>,
}

impl NameAllocator {
    pub(crate) fn new(reserved: &'static [&'static str]) -> Self {
        Self {
            reserved,
            taken: BTreeSet::new(),
        }
    }

    /// Allocates a name from `base`: an identifier is made of it (a `Tool` prefix when it is empty
    /// or starts with a digit), then `2`, `3`, … is appended until the name is neither taken nor
    /// reserved. Suffixing after escaping means two inputs that escape alike (`a-b`, `a.b`) still
    /// get distinct names.
    pub(crate) fn allocate(&mut self, base: &str) -> String {
        let mut stem: String = base.chars().filter(char::is_ascii_alphanumeric).collect();
        stem.truncate(MAX_NAME_BASE);
        if !stem.starts_with(|c: char| c.is_ascii_alphabetic()) {
            stem.insert_str(0, "Tool");
        }
        let mut candidate = stem.clone();
        let mut n = 2u64;
        while self.taken.contains(&candidate) || self.reserved.contains(&candidate.as_str()) {
            candidate = format!("{stem}{n}");
            n += 1;
        }
        self.taken.insert(candidate.clone());
        candidate
    }

    /// Gives back a name allocated for a type that was not emitted after all, so the next
    /// allocation from the same base takes it and numbering stays without gaps.
    pub(crate) fn release(&mut self, name: &str) {
        self.taken.remove(name);
    }
}

/// Normalizes generated text: `\n` line endings, no trailing spaces or tabs, no run of more than
/// one blank line, exactly one final newline.
pub(crate) fn normalize(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 1);
    let mut blank_run = 0usize;
    for line in text.split('\n') {
        let line = line
            .strip_suffix('\r')
            .unwrap_or(line)
            .trim_end_matches([' ', '\t']);
        if line.is_empty() {
            blank_run += 1;
            if blank_run > 1 {
                continue;
            }
        } else {
            blank_run = 0;
        }
        out.push_str(line);
        out.push('\n');
    }
    let end = out.trim_end_matches('\n').len();
    out.truncate(end);
    out.push('\n');
    out
}
