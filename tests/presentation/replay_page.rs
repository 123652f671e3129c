//! The replay page: each card kind drawn as its vocabulary says, failures visibly failed, sub-calls
//! nested under their run, text escaped, the page self-contained.

use std::sync::Arc;

use dsh_tools::ToolResult;
use dsh_tools::events::{LoggedEvent, ToolEvent};
use dsh_tools::presentation::{
    CallView, FileDiff, ReadLine, ReplayLimits, ResultView, SearchFile, SearchMatch, SearchShape,
    ToolCallKind, render_html, render_html_with,
};
use dsh_tools::result::{ContentBlock, ErrorCode};
use serde_json::{Value, json};

fn call(id: &str, name: &str, parent: Option<&str>, view: Option<CallView>) -> LoggedEvent {
    LoggedEvent::Tool(ToolEvent::Call {
        call_id: id.into(),
        root_call_id: parent.unwrap_or(id).into(),
        name: name.into(),
        arguments: Arc::new(json!({"id": id})),
        agent: None,
        parent: parent.map(str::to_owned),
        view,
        at_ms: 1_700_000_000_000,
    })
}

fn result(
    id: &str,
    name: &str,
    parent: Option<&str>,
    result: ToolResult,
    view: Option<ResultView>,
) -> LoggedEvent {
    LoggedEvent::Tool(ToolEvent::Result {
        call_id: id.into(),
        root_call_id: parent.unwrap_or(id).into(),
        name: name.into(),
        agent: None,
        parent: parent.map(str::to_owned),
        result: Arc::new(result),
        view,
        at_ms: 1_700_000_000_250,
        duration_ms: 250.0,
    })
}

fn ok(text: &str) -> ToolResult {
    ToolResult::success(Value::String(text.into()), vec![ContentBlock::text(text)])
}

/// The opening tag of the card of `id`.
fn card_tag<'p>(page: &'p str, id: &str) -> &'p str {
    let at = page
        .find(&format!("data-call-id=\"{id}\""))
        .unwrap_or_else(|| panic!("a card for {id}"));
    let start = page[..at].rfind("<article").unwrap();
    let end = at + page[at..].find('>').unwrap();
    &page[start..=end]
}

/// The markup of the card of `id`, up to the next card's start.
fn card_body<'p>(page: &'p str, id: &str) -> &'p str {
    let start = page.find(&format!("data-call-id=\"{id}\"")).unwrap();
    let rest = &page[start..];
    let end = rest[1..].find("<article").map_or(rest.len(), |end| end + 1);
    &rest[..end]
}

#[test]
fn each_card_kind_is_drawn_from_its_vocabulary() {
    let events = vec![
        call(
            "read",
            "read_file",
            None,
            Some(CallView::Generic {
                title: "Read src/lib.rs".into(),
                kind: ToolCallKind::Read,
                raw_input: None,
                content: vec![],
                locations: vec![],
            }),
        ),
        result(
            "read",
            "read_file",
            None,
            ok("x"),
            Some(ResultView::Read {
                title: None,
                path: "src/lib.rs".into(),
                offset: 41,
                lines: vec![
                    ReadLine {
                        number: 41,
                        text: "fn a() {}".into(),
                    },
                    ReadLine {
                        number: 42,
                        text: "fn b() {}".into(),
                    },
                ],
                total_lines: 90,
                lang: Some("rust".into()),
            }),
        ),
        call("grep", "grep", None, None),
        result(
            "grep",
            "grep",
            None,
            ok("x"),
            Some(ResultView::Search {
                title: None,
                shape: SearchShape::Matches {
                    files: vec![SearchFile {
                        path: "a.rs".into(),
                        matches: vec![
                            SearchMatch {
                                line_number: 3,
                                line: "hit three".into(),
                            },
                            SearchMatch {
                                line_number: 9,
                                line: "hit nine".into(),
                            },
                        ],
                    }],
                },
                truncated: true,
                total: 2,
            }),
        ),
        call(
            "edit",
            "edit_file",
            None,
            Some(CallView::Diff {
                title: "Edit a.txt".into(),
                diffs: vec![],
                locations: vec![],
            }),
        ),
        result(
            "edit",
            "edit_file",
            None,
            ok("x"),
            Some(ResultView::Diff {
                title: None,
                diffs: vec![FileDiff {
                    path: "a.txt".into(),
                    old_text: Some("keep\nold line\n".into()),
                    new_text: "keep\nnew line\n".into(),
                }],
            }),
        ),
        call(
            "sh",
            "bash",
            None,
            Some(CallView::Terminal {
                title: "cargo test".into(),
                description: Some("Run the tests".into()),
                cwd: Some("/repo".into()),
            }),
        ),
        result(
            "sh",
            "bash",
            None,
            ok("x"),
            Some(ResultView::Terminal {
                title: None,
                output: Some("test result: ok".into()),
                exit_code: Some(0),
                signal: None,
            }),
        ),
        call("plain", "file_stats", None, None),
        result("plain", "file_stats", None, ok("12 bytes"), None),
    ];
    let page = render_html(&events);

    let read = card_tag(&page, "read");
    assert!(
        read.contains("data-kind=\"read\"") && read.contains("data-card=\"read\""),
        "{read}"
    );
    let body = card_body(&page, "read");
    assert!(
        body.contains("<td class=\"ln\">41</td><td class=\"src\">fn a() {}</td>"),
        "{body}"
    );
    assert!(body.contains("lines 41–42 of 90"));

    let grep = card_body(&page, "grep");
    assert!(card_tag(&page, "grep").contains("data-card=\"search\""));
    assert!(
        grep.contains("<tr class=\"hit\"><td class=\"ln\">3</td>"),
        "hit lines highlighted: {grep}"
    );
    assert!(
        grep.contains("<tr class=\"gap\">"),
        "a gap between lines 3 and 9"
    );
    assert!(grep.contains("truncated"));

    let edit = card_body(&page, "edit");
    assert!(card_tag(&page, "edit").contains("data-card=\"diff\""));
    assert!(
        edit.contains("<tr class=\"del\">") && edit.contains("- old line"),
        "{edit}"
    );
    assert!(edit.contains("<tr class=\"add\">") && edit.contains("+ new line"));
    assert!(edit.contains("<tr class=\"ctx\">") && edit.contains("  keep"));

    let sh = card_body(&page, "sh");
    assert!(card_tag(&page, "sh").contains("data-kind=\"execute\""));
    assert!(sh.contains("<pre class=\"terminal\"><span class=\"cwd\">/repo</span><span class=\"prompt\">$ </span>cargo test</pre>"), "{sh}");
    assert!(sh.contains("test result: ok") && sh.contains("exit code 0"));

    let plain = card_body(&page, "plain");
    assert!(card_tag(&page, "plain").contains("data-card=\"generic\""));
    assert!(
        plain.contains("<pre class=\"content\">12 bytes</pre>"),
        "raw content when no card: {plain}"
    );
    assert_eq!(
        page.matches("<article class=\"card").count(),
        5,
        "one card per call"
    );
}

#[test]
fn failures_running_calls_and_lost_events_are_visible() {
    let events = vec![
        call("bad", "read_file", None, None),
        result(
            "bad",
            "read_file",
            None,
            ToolResult::coded_failure(
                ErrorCode::InvalidArgs,
                "invalid arguments: missing required property \"path\"",
            ),
            None,
        ),
        LoggedEvent::Lagged { missed: 3 },
        call("slow", "grep", None, None),
    ];
    let page = render_html(&events);
    let bad = card_tag(&page, "bad");
    assert!(
        bad.contains("class=\"card failed\"") && bad.contains("data-card=\"error\""),
        "{bad}"
    );
    let body = card_body(&page, "bad");
    assert!(body.contains("<details open>"), "a failure starts open");
    assert!(
        body.contains("INVALID_ARGS")
            && body.contains("missing required property &quot;path&quot;")
    );
    assert!(page.contains("1 failed"));
    assert!(page.contains("3 events were lost here"));
    assert!(card_tag(&page, "slow").contains("class=\"card running\""));
}

#[test]
fn sub_calls_nest_collapsed_under_their_code_run() {
    let run_view = CallView::Generic {
        title: "Count lines in every file".into(),
        kind: ToolCallKind::Execute,
        raw_input: Some(json!("const a = 1;\nreturn a;")),
        content: vec![],
        locations: vec![],
    };
    let events = vec![
        call("run", "run_code", None, Some(run_view)),
        call("run:code:1", "list_files", Some("run"), None),
        call("run:code:2", "read_file", Some("run"), None),
        result("run:code:2", "read_file", Some("run"), ok("b"), None),
        result("run:code:1", "list_files", Some("run"), ok("a"), None),
        result("run", "run_code", None, ok("done"), None),
        call("after", "grep", None, None),
        result("after", "grep", None, ok("c"), None),
    ];
    let page = render_html(&events);
    let run = card_body(&page, "run");
    assert!(card_tag(&page, "run").contains("data-kind=\"execute\""));
    assert!(run.contains("<span class=\"title\">Count lines in every file</span>"));
    assert!(
        run.contains("<td class=\"ln\">2</td><td class=\"src\">return a;</td>"),
        "the program with line numbers: {run}"
    );
    assert!(run.contains("<section class=\"children\"><h3>2 sub-calls</h3>"));
    let (first, second, after) = (
        page.find("data-call-id=\"run:code:1\"").unwrap(),
        page.find("data-call-id=\"run:code:2\"").unwrap(),
        page.find("data-call-id=\"after\"").unwrap(),
    );
    let children_end = page[first..].find("</section>").unwrap() + first;
    assert!(
        first < second && second < children_end && children_end < after,
        "sub-calls in start order, inside the run"
    );
    assert!(
        card_body(&page, "run:code:1").contains("<details open>"),
        "a small run shows its sub-calls"
    );
}

#[test]
fn text_from_the_log_is_escaped_and_the_page_loads_nothing() {
    let hostile = "</pre><script>alert(1)</script><img src=\"https://example.invalid/x.png\">";
    let events = vec![
        call(
            "x\"><b>",
            "t",
            None,
            Some(CallView::Generic {
                title: hostile.into(),
                kind: ToolCallKind::Other,
                raw_input: Some(json!({"q": hostile})),
                content: vec![ContentBlock::Image {
                    media_type: "image/png\" onerror=\"alert(1)".into(),
                    data: "AAAA".into(),
                }],
                locations: vec![],
            }),
        ),
        result("x\"><b>", "t", None, ok(hostile), None),
    ];
    let page = render_html(&events);
    assert!(!page.contains("<script>alert"), "no injected script");
    assert!(!page.contains("<b>") && !page.contains("onerror=\""));
    assert!(page.contains("&lt;/pre&gt;&lt;script&gt;"));
    assert_eq!(
        page.matches("<script>").count(),
        1,
        "only the page's own script"
    );
    for attribute in [
        "src=\"http",
        "href=\"http",
        "src=\"//",
        "href=\"//",
        "@import",
        "url(",
    ] {
        assert!(
            !page.contains(attribute),
            "the page references no external asset ({attribute})"
        );
    }
    assert!(page.contains("Content-Security-Policy"));
}

/// Past its card limit the page stops drawing and says how many calls it left out; sub-calls
/// nested deeper than 16 levels are left out the same way.
#[test]
fn the_page_is_capped_and_says_what_it_left_out() {
    let events: Vec<LoggedEvent> = (0..5)
        .map(|n| call(&format!("c{n}"), "grep", None, None))
        .collect();
    let page = render_html_with(&events, &ReplayLimits::default().with_max_calls(3));
    assert_eq!(page.matches("<article").count(), 3);
    assert!(!page.contains("data-call-id=\"c3\""));
    assert!(
        page.contains("data-left-out=\"2\">2 of 5 calls are left out"),
        "{page}"
    );
    assert!(!render_html(&events).contains("data-left-out"));

    let mut chain = vec![call("n0", "run_code", None, None)];
    for n in 1..20 {
        chain.push(call(
            &format!("n{n}"),
            "run_code",
            Some(&format!("n{}", n - 1)),
            None,
        ));
    }
    let page = render_html(&chain);
    assert_eq!(page.matches("<article").count(), 16);
    assert!(page.contains("data-left-out=\"4\""), "{page}");
}

#[test]
fn a_tool_without_a_call_view_shows_its_name_once_and_no_guessed_kind() {
    let events = vec![
        call("own", "create_ticket", None, None),
        result("own", "create_ticket", None, ok("done"), None),
        call(
            "viewed",
            "read_file",
            None,
            Some(CallView::Generic {
                title: "Read src/lib.rs".into(),
                kind: ToolCallKind::Read,
                raw_input: None,
                content: vec![],
                locations: vec![],
            }),
        ),
        result("viewed", "read_file", None, ok("text"), None),
    ];
    let page = render_html(&events);
    let own = card_body(&page, "own");
    assert!(!own.contains("class=\"badge"), "no `other` badge: {own}");
    assert_eq!(
        own.matches("create_ticket").count(),
        2,
        "the name appears in data-tool and once as the title: {own}"
    );
    assert!(own.contains("<span class=\"title\">create_ticket</span>"));
    let viewed = card_body(&page, "viewed");
    assert!(viewed.contains("<span class=\"badge k-read\">read</span>"));
    assert!(viewed.contains("<span class=\"tool\">read_file</span>"));
}

#[test]
fn the_arguments_of_a_failed_call_start_open() {
    let events = vec![
        call("bad", "create_ticket", None, None),
        result(
            "bad",
            "create_ticket",
            None,
            ToolResult::coded_failure(ErrorCode::InvalidArgs, "unknown property \"asignee\""),
            None,
        ),
        call("good", "create_ticket", None, None),
        result("good", "create_ticket", None, ok("done"), None),
    ];
    let page = render_html(&events);
    assert!(
        card_body(&page, "bad").contains("<details class=\"raw\" open><summary>arguments"),
        "{}",
        card_body(&page, "bad")
    );
    assert!(card_body(&page, "good").contains("<details class=\"raw\"><summary>arguments"));
}
