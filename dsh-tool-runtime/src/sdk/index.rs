//! Progressive disclosure: a prompt section that lists each tool in one line, and the run-time
//! answers (`sdk.describe`, `sdk.search`) that give a program the full declarations.

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

/// Longest label, in chars, that groups tools (`Notion` of `Notion | Create comment`).
const MAX_LABEL_CHARS: usize = 32;

/// One line of the index.
#[derive(Debug, Serialize)]
pub(crate) struct Entry {
    /// The name as a program writes it after `tools`: a bare key / method or a quoted string.
    key: String,
    summary: Option<String>,
    /// The label line (`Notion |`) that opens a run of tools whose descriptions all start with
    /// it; set on the run's first entry.
    heading: Option<String>,
    /// True inside such a run: the line is indented and its summary omits the label.
    grouped: bool,
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

/// The first sentence (or line) of a description, one line, cut at a word boundary past
/// [`MAX_SUMMARY_CHARS`] (with `…`). `*/` cannot end anything here: the index is plain text.
pub(crate) fn summary(description: &str) -> Option<String> {
    // A line break ends the first sentence too (`Create comment\nError Responses: …`).
    let first = description
        .trim_start()
        .split('\n')
        .next()
        .unwrap_or_default();
    let line = comment_line(first)?;
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

/// The label of a description that starts `Label | …` (a server's or product's name, as MCP
/// servers wrapping an API write it), with the rest of the description.
fn label(description: &str) -> Option<(&str, &str)> {
    let (label, rest) = description.split_once(" | ")?;
    let label = label.trim();
    (!label.is_empty() && label.chars().count() <= MAX_LABEL_CHARS && !label.contains('\n'))
        .then_some((label, rest))
}

/// The index entries of `tools` (already sorted and deduplicated). A run of two or more tools
/// whose descriptions share a label is listed under that label once.
pub(crate) fn entries(language: Language, tools: &[&ToolSpec]) -> Vec<Entry> {
    let labels: Vec<Option<&str>> = tools
        .iter()
        .map(|tool| label(&tool.description).map(|(label, _)| label))
        .collect();
    let shared = |i: usize| {
        labels[i].is_some()
            && ((i > 0 && labels[i - 1] == labels[i])
                || (i + 1 < labels.len() && labels[i + 1] == labels[i]))
    };
    tools
        .iter()
        .enumerate()
        .map(|(i, tool)| {
            let grouped = shared(i);
            let description = match label(&tool.description) {
                Some((_, rest)) if grouped => rest,
                _ => &tool.description,
            };
            Entry {
                key: key(language, &tool.name),
                summary: summary(description),
                heading: (grouped && (i == 0 || labels[i - 1] != labels[i]))
                    .then(|| labels[i].and_then(comment_line))
                    .flatten()
                    .map(|label| format!("{label} |")),
                grouped,
            }
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
