//! The HTML of a card's parts: result views, code, diffs, locations and content blocks.

use std::fmt::Write as _;

use super::page::escape;
use crate::cards::{FileDiff, FileLocation, ResultView, SearchShape, ToolCallKind};
use crate::result::ContentBlock;

pub(super) fn result_view(page: &mut String, view: &ResultView) {
    match view {
        ResultView::Generic { title, content } => {
            if let Some(title) = title {
                let _ = writeln!(page, "<p class=\"result-title\">{}</p>", escape(title));
            }
            content_blocks(page, content);
        }
        ResultView::Terminal {
            output,
            exit_code,
            signal,
            ..
        } => {
            let _ = writeln!(
                page,
                "<pre class=\"terminal\">{}</pre>",
                escape(output.as_deref().unwrap_or(""))
            );
            match (exit_code, signal) {
                (Some(code), _) => {
                    let class = if *code == 0 { "ok" } else { "bad" };
                    let _ = writeln!(page, "<p class=\"exit {class}\">exit code {code}</p>");
                }
                (None, Some(signal)) => {
                    let _ = writeln!(
                        page,
                        "<p class=\"exit bad\">killed by {}</p>",
                        escape(signal)
                    );
                }
                (None, None) => {}
            }
        }
        ResultView::Diff { diffs, .. } => diff_list(page, diffs),
        ResultView::Search {
            shape,
            truncated,
            total,
            ..
        } => {
            match shape {
                SearchShape::Matches { files } => {
                    for file in files {
                        let _ = write!(
                            page,
                            "<div class=\"file\"><div class=\"path\">{}</div>",
                            escape(&file.path)
                        );
                        code_view(
                            page,
                            file.matches
                                .iter()
                                .map(|hit| (hit.line_number, hit.line.as_str(), true)),
                        );
                        page.push_str("</div>\n");
                    }
                }
                SearchShape::Paths { paths } => {
                    page.push_str("<ul class=\"paths\">");
                    for path in paths {
                        let _ = write!(page, "<li>{}</li>", escape(path));
                    }
                    page.push_str("</ul>\n");
                }
            }
            let shown = match shape {
                SearchShape::Matches { files } => files.iter().map(|f| f.matches.len()).sum(),
                SearchShape::Paths { paths } => paths.len(),
            };
            let _ = write!(page, "<p class=\"foot\">{shown} shown of {total}");
            if *truncated {
                page.push_str(" · <span class=\"bad\">truncated</span>");
            }
            page.push_str("</p>\n");
        }
        ResultView::Read {
            path,
            offset,
            lines,
            total_lines,
            lang,
            ..
        } => {
            let _ = write!(
                page,
                "<div class=\"file\"><div class=\"path\">{}",
                escape(path)
            );
            let range = match (lines.first(), lines.last()) {
                (Some(first), Some(last)) => {
                    format!("lines {}–{} of {total_lines}", first.number, last.number)
                }
                _ => format!("no lines at {offset} of {total_lines}"),
            };
            let _ = write!(page, "<span class=\"range\">{range}</span>");
            if let Some(lang) = lang {
                let _ = write!(page, "<span class=\"lang\">{}</span>", escape(lang));
            }
            page.push_str("</div>");
            code_view(
                page,
                lines
                    .iter()
                    .map(|line| (line.number, line.text.as_str(), false)),
            );
            page.push_str("</div>\n");
        }
    }
}

/// A code view: line numbers in a gutter, hit lines highlighted, a gap marked between
/// non-consecutive lines.
pub(super) fn code_view<'t>(page: &mut String, lines: impl Iterator<Item = (u64, &'t str, bool)>) {
    page.push_str("<table class=\"code\"><tbody>");
    let mut previous: Option<u64> = None;
    for (number, text, hit) in lines {
        if previous.is_some_and(|previous| number > previous + 1) {
            page.push_str("<tr class=\"gap\"><td class=\"ln\">⋯</td><td></td></tr>");
        }
        previous = Some(number);
        let _ = write!(
            page,
            "<tr{}><td class=\"ln\">{number}</td><td class=\"src\">{}</td></tr>",
            if hit { " class=\"hit\"" } else { "" },
            escape(text)
        );
    }
    page.push_str("</tbody></table>");
}

pub(super) fn diff_list(page: &mut String, diffs: &[FileDiff]) {
    for diff in diffs {
        let label = if diff.old_text.is_none() {
            " (new file)"
        } else {
            ""
        };
        let _ = write!(
            page,
            "<div class=\"file\"><div class=\"path\">{}{label}</div><table class=\"code diff\"><tbody>",
            escape(&diff.path)
        );
        let old = diff.old_text.as_deref().unwrap_or("");
        let text_diff = similar::TextDiff::from_lines(old, &diff.new_text);
        for (index, group) in text_diff.grouped_ops(3).iter().enumerate() {
            if index > 0 {
                page.push_str("<tr class=\"gap\"><td class=\"ln\">⋯</td><td class=\"ln\">⋯</td><td></td></tr>");
            }
            for op in group {
                for change in text_diff.iter_changes(op) {
                    let (class, sign) = match change.tag() {
                        similar::ChangeTag::Delete => ("del", '-'),
                        similar::ChangeTag::Insert => ("add", '+'),
                        similar::ChangeTag::Equal => ("ctx", ' '),
                    };
                    let number =
                        |n: Option<usize>| n.map(|n| (n + 1).to_string()).unwrap_or_default();
                    let text = change.value();
                    let _ = write!(
                        page,
                        "<tr class=\"{class}\"><td class=\"ln\">{}</td><td class=\"ln\">{}</td><td class=\"src\">{sign} {}</td></tr>",
                        number(change.old_index()),
                        number(change.new_index()),
                        escape(text.strip_suffix('\n').unwrap_or(text))
                    );
                }
            }
        }
        page.push_str("</tbody></table></div>\n");
    }
}

pub(super) fn locations_list(page: &mut String, locations: &[FileLocation]) {
    if locations.is_empty() {
        return;
    }
    page.push_str("<ul class=\"locations\">");
    for location in locations {
        let _ = match location.line {
            Some(line) => write!(page, "<li>{}:{line}</li>", escape(&location.path)),
            None => write!(page, "<li>{}</li>", escape(&location.path)),
        };
    }
    page.push_str("</ul>\n");
}

pub(super) fn content_blocks(page: &mut String, content: &[ContentBlock]) {
    for block in content {
        match block {
            ContentBlock::Text { text } => {
                let _ = writeln!(page, "<pre class=\"content\">{}</pre>", escape(text));
            }
            ContentBlock::Image { media_type, data } => {
                // Only well-formed base64 of an image type goes into the `src` attribute.
                let safe = media_type.starts_with("image/")
                    && media_type[6..]
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+.-".contains(&b))
                    && data
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"+/=".contains(&b));
                if safe {
                    let _ = writeln!(
                        page,
                        "<img class=\"content\" alt=\"image result\" src=\"data:{media_type};base64,{data}\">"
                    );
                } else {
                    page.push_str(
                        "<p class=\"notice\">An image that is not valid base64 was left out.</p>\n",
                    );
                }
            }
            // Sound and binary resources are named, not embedded: the page stays text and images.
            ContentBlock::Audio { media_type, .. } => {
                let _ = writeln!(
                    page,
                    "<p class=\"notice\">An audio clip ({}) was left out.</p>",
                    escape(media_type)
                );
            }
            ContentBlock::Resource { uri, contents, .. } => {
                let _ = writeln!(page, "<p class=\"notice\">Resource {}</p>", escape(uri));
                if let crate::result::ResourceContents::Text(text) = contents {
                    let _ = writeln!(page, "<pre class=\"content\">{}</pre>", escape(text));
                }
            }
        }
    }
}

pub(super) fn result_card_name(view: &ResultView) -> &'static str {
    match view {
        ResultView::Generic { .. } => "generic",
        ResultView::Terminal { .. } => "terminal",
        ResultView::Diff { .. } => "diff",
        ResultView::Search { .. } => "search",
        ResultView::Read { .. } => "read",
    }
}

pub(super) fn kind_name(kind: ToolCallKind) -> &'static str {
    match kind {
        ToolCallKind::Read => "read",
        ToolCallKind::Edit => "edit",
        ToolCallKind::Delete => "delete",
        ToolCallKind::Move => "move",
        ToolCallKind::Search => "search",
        ToolCallKind::Execute => "execute",
        ToolCallKind::Fetch => "fetch",
        ToolCallKind::Other => "other",
    }
}
