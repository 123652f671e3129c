//! Progressive disclosure (SPEC §13): a prompt section that lists each tool in one line, and the
//! run-time answers (`sdk.describe`, `sdk.search`) that give a program the full declarations.

use std::collections::BTreeSet;

use serde::Serialize;

use super::text::comment_line;
use super::{Language, ToolSpec, python, typescript};

/// Longest summary, in chars, before it is cut at a word boundary.
const MAX_SUMMARY_CHARS: usize = 24;

/// Most results `sdk.search` returns.
pub const MAX_SEARCH_RESULTS: usize = 12;

/// Query words `sdk.search` looks at; the rest are ignored.
const MAX_QUERY_WORDS: usize = 16;

/// One line of the index.
#[derive(Debug, Serialize)]
pub(crate) struct Entry {
    /// The name as a program writes it after `tools`: a bare key / method or a quoted string.
    key: String,
    summary: Option<String>,
}

/// The name as the index lists it: as it is when made of ASCII letters, digits, `_`, `-` and
/// `.` only (the guide says how to reach such names), otherwise as a program writes it after
/// `tools` in `language`, quoted.
fn key(language: Language, name: &str) -> String {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    match language {
        _ if plain => name.to_owned(),
        Language::TypeScript => typescript::key(name),
        Language::Python => python::access_key(name),
    }
}

/// The first sentence of a description, one line, cut at a word boundary past
/// [`MAX_SUMMARY_CHARS`] (with `…`). `*/` cannot end anything here: the index is plain text.
pub(crate) fn summary(description: &str) -> Option<String> {
    let line = comment_line(description)?;
    let sentence = line
        .find(". ")
        .map_or(line.as_str(), |end| &line[..=end])
        .trim_end_matches('.');
    if sentence.chars().count() <= MAX_SUMMARY_CHARS {
        return Some(sentence.to_owned());
    }
    let mut cut = String::new();
    for word in sentence.split(' ') {
        if cut.chars().count() + word.chars().count() + 1 > MAX_SUMMARY_CHARS {
            break;
        }
        if !cut.is_empty() {
            cut.push(' ');
        }
        cut.push_str(word);
    }
    if cut.is_empty() {
        cut = sentence.chars().take(MAX_SUMMARY_CHARS).collect();
    }
    cut.push('…');
    Some(cut)
}

/// The index entries of `tools` (already sorted and deduplicated).
pub(crate) fn entries(language: Language, tools: &[&ToolSpec]) -> Vec<Entry> {
    tools
        .iter()
        .map(|tool| Entry {
            key: key(language, &tool.name),
            summary: summary(&tool.description),
        })
        .collect()
}

/// Lower-case alphanumeric words of `text`.
fn words(text: &str) -> BTreeSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|word| !word.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The tools matching `query`, best first: each query word found in the name counts 2, in the
/// description 1 (a word matches when it starts a word of the tool's text); ties by name.
/// Tools matching no word are left out; at most [`MAX_SEARCH_RESULTS`].
pub(crate) fn search<'t>(tools: &[&'t ToolSpec], query: &str) -> Vec<&'t ToolSpec> {
    // A query is a few words; a megabyte of them would cost the host, not the program.
    let wanted: BTreeSet<String> = words(query).into_iter().take(MAX_QUERY_WORDS).collect();
    let mut scored: Vec<(usize, &ToolSpec)> = tools
        .iter()
        .filter_map(|tool| {
            let name = words(&tool.name);
            let description = words(&tool.description);
            let hit = |set: &BTreeSet<String>, word: &String| {
                set.iter().any(|w| w.starts_with(word.as_str()))
            };
            let score: usize = wanted
                .iter()
                .map(|word| {
                    2 * usize::from(hit(&name, word)) + usize::from(hit(&description, word))
                })
                .sum();
            (score > 0).then_some((score, *tool))
        })
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.name.cmp(&b.1.name)));
    scored
        .into_iter()
        .take(MAX_SEARCH_RESULTS)
        .map(|(_, tool)| tool)
        .collect()
}
