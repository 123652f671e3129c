//! Tool-owned presentation: the cards the example tools draw, meta on top-level calls only, and
//! presenters that panic or fail falling back to the generic card without failing the call.

use crate::toolset;

use std::path::PathBuf;

use dsh_tools::events::ToolEvent;
use dsh_tools::hooks::PostDecision;
use dsh_tools::presentation::{
    CallView, FileLocation, ReadLine, ResultView, SearchFile, SearchMatch, SearchShape,
    ToolCallKind,
};
use dsh_tools::{Registry, ToolCall, ToolDefinition, ToolResult, tool};
use serde_json::{Value, json};

/// A small tree the toolset reads: two Rust files and a note.
fn fixture(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join("presentation")
        .join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(
        root.join("src/lib.rs"),
        "//! A crate.\npub fn one() -> u32 {\n    1\n}\npub fn two() -> u32 {\n    2\n}\n",
    )
    .unwrap();
    std::fs::write(
        root.join("src/main.rs"),
        "fn main() {\n    println!(\"{}\", one());\n}\n",
    )
    .unwrap();
    std::fs::write(root.join("NOTES.txt"), "one\ntwo\n").unwrap();
    root
}

/// Runs one top-level call and returns its call card, result card and result.
async fn present(
    registry: &Registry,
    call: ToolCall,
) -> (Option<CallView>, Option<ResultView>, ToolResult) {
    let mut events = registry.subscribe();
    let result = registry.execute(call).await;
    let (mut call_view, mut result_view) = (None, None);
    while let Ok(event) = events.try_recv() {
        match event {
            ToolEvent::Call { view, .. } => call_view = view,
            ToolEvent::Result {
                view,
                result: logged,
                ..
            } => {
                assert_eq!(*logged, result, "the event carries the returned result");
                result_view = view;
            }
            _ => {}
        }
    }
    (call_view, result_view, result)
}

fn toolset_registry(root: &PathBuf) -> Registry {
    let registry = Registry::new();
    registry.register_all(toolset::definitions(root)).unwrap();
    registry
}

#[tokio::test]
async fn read_file_presents_a_read_card_with_numbered_lines() {
    let root = fixture("read");
    let registry = toolset_registry(&root);
    let call = ToolCall::new(
        "r1",
        "read_file",
        json!({"path": "src/lib.rs", "offset": 2, "limit": 2}),
    );
    let (call_view, result_view, result) = present(&registry, call).await;
    assert_eq!(
        call_view,
        Some(CallView::Generic {
            title: "Read src/lib.rs".into(),
            kind: ToolCallKind::Read,
            raw_input: None,
            content: vec![],
            locations: vec![FileLocation {
                path: "src/lib.rs".into(),
                line: Some(2)
            }],
        })
    );
    assert_eq!(
        result_view,
        Some(ResultView::Read {
            title: None,
            path: "src/lib.rs".into(),
            offset: 2,
            lines: vec![
                ReadLine {
                    number: 2,
                    text: "pub fn one() -> u32 {".into()
                },
                ReadLine {
                    number: 3,
                    text: "    1".into()
                },
            ],
            total_lines: 7,
            lang: Some("rust".into()),
        })
    );
    let ToolResult::Success { meta, .. } = result else {
        panic!("read succeeds: {result:?}");
    };
    assert_eq!(meta, Some(json!({"lang": "rust"})));
}

#[tokio::test]
async fn grep_presents_search_matches_grouped_by_file_with_truncation() {
    let root = fixture("grep");
    let registry = toolset_registry(&root);
    let (call_view, result_view, _) = present(
        &registry,
        ToolCall::new("g1", "grep", json!({"pattern": "one", "dir": "src"})),
    )
    .await;
    assert!(matches!(
        call_view,
        Some(CallView::Generic { kind: ToolCallKind::Search, ref title, .. }) if title == "Search /one/ in src"
    ));
    assert_eq!(
        result_view,
        Some(ResultView::Search {
            title: Some("2 matches in 2 files".into()),
            shape: SearchShape::Matches {
                files: vec![
                    SearchFile {
                        path: "src/lib.rs".into(),
                        matches: vec![SearchMatch {
                            line_number: 2,
                            line: "pub fn one() -> u32 {".into()
                        }],
                    },
                    SearchFile {
                        path: "src/main.rs".into(),
                        matches: vec![SearchMatch {
                            line_number: 2,
                            line: "    println!(\"{}\", one());".into()
                        }],
                    },
                ],
            },
            truncated: false,
            total: 2,
        })
    );
    let (_, truncated, _) = present(
        &registry,
        ToolCall::new(
            "g2",
            "grep",
            json!({"pattern": "u32|one", "max_matches": 1}),
        ),
    )
    .await;
    let Some(ResultView::Search {
        truncated, total, ..
    }) = truncated
    else {
        panic!("a search card: {truncated:?}");
    };
    assert!(truncated, "max_matches cut the hits");
    assert_eq!(total, 1);
}

#[tokio::test]
async fn list_files_presents_search_paths() {
    let root = fixture("list");
    let registry = toolset_registry(&root);
    let (call_view, result_view, _) = present(
        &registry,
        ToolCall::new("l1", "list_files", json!({"suffix": ".rs"})),
    )
    .await;
    assert!(matches!(
        call_view,
        Some(CallView::Generic { kind: ToolCallKind::Search, ref title, .. }) if title == "List files in . (*.rs)"
    ));
    assert_eq!(
        result_view,
        Some(ResultView::Search {
            title: Some("2 files".into()),
            shape: SearchShape::Paths {
                paths: vec!["src/lib.rs".into(), "src/main.rs".into()]
            },
            truncated: false,
            total: 2,
        })
    );
    let (_, limited, _) = present(
        &registry,
        ToolCall::new("l2", "list_files", json!({"limit": 1})),
    )
    .await;
    assert!(matches!(
        limited,
        Some(ResultView::Search {
            truncated: true,
            total: 1,
            ..
        })
    ));
}

#[tokio::test]
async fn file_stats_keeps_the_generic_card() {
    let root = fixture("stats");
    let registry = toolset_registry(&root);
    let (call_view, result_view, result) = present(
        &registry,
        ToolCall::new("s1", "file_stats", json!({"path": "NOTES.txt"})),
    )
    .await;
    assert!(matches!(
        call_view,
        Some(CallView::Generic { kind: ToolCallKind::Read, ref title, .. }) if title == "Stat NOTES.txt"
    ));
    assert_eq!(
        result_view, None,
        "no result presenter: the raw content shows"
    );
    assert!(!result.is_error());
}

#[tokio::test]
async fn failures_carry_no_result_card() {
    let root = fixture("failure");
    let registry = toolset_registry(&root);
    let (call_view, result_view, result) = present(
        &registry,
        ToolCall::new("f1", "read_file", json!({"path": "missing.rs"})),
    )
    .await;
    assert!(
        call_view.is_some(),
        "the pending card is drawn before the body runs"
    );
    assert_eq!(result_view, None);
    assert!(result.is_error());
}

#[tokio::test]
async fn presentation_meta_is_computed_for_top_level_calls_only() {
    let root = fixture("meta");
    let registry = toolset_registry(&root);
    let mut nested = ToolCall::new("outer:code:1", "read_file", json!({"path": "src/lib.rs"}));
    nested.parent = Some("outer".into());
    nested.root_call_id = Some("outer".into());
    let (_, view, result) = present(&registry, nested).await;
    let ToolResult::Success { meta, .. } = result else {
        panic!("nested read succeeds: {result:?}");
    };
    assert_eq!(meta, None, "a sub-call gets no meta");
    assert!(
        matches!(view, Some(ResultView::Read { lang: None, ref lines, .. }) if lines.len() == 7),
        "the presenter works without meta: {view:?}"
    );
    let (_, view, result) = present(
        &registry,
        ToolCall::new("top", "read_file", json!({"path": "src/lib.rs"})),
    )
    .await;
    assert!(matches!(result, ToolResult::Success { meta: Some(_), .. }));
    assert!(matches!(view, Some(ResultView::Read { lang: Some(_), .. })));
}

/// Echo a word; every presenter of this tool panics or fails.
#[tool(
    present_call = exploding_call,
    present_result = exploding_result,
    presentation_meta = exploding_meta
)]
async fn fragile(word: String) -> String {
    word
}

fn exploding_call(_: &FragileArgs) -> Option<CallView> {
    panic!("call card exploded")
}

fn exploding_result(_: &FragileArgs, _: &String, _: Option<&Value>) -> Option<ResultView> {
    panic!("result card exploded")
}

fn exploding_meta(_: &FragileArgs, _: &String) -> Result<Value, String> {
    Err("no meta today".into())
}

#[tokio::test]
async fn presenters_that_panic_or_fail_fall_back_without_failing_the_call() {
    let registry = Registry::new();
    registry
        .register(ToolDefinition::from_tool(FragileTool))
        .unwrap();
    registry
        .register(
            ToolDefinition::builder("dynamic")
                .description("Return the arguments.")
                .present_call(|_| panic!("dynamic call card exploded"))
                .present_result(|_, _| panic!("dynamic result card exploded"))
                .handler(|args: Value, _exec| async move { Ok(args) })
                .build()
                .unwrap(),
        )
        .unwrap();
    let (call_view, result_view, result) = present(
        &registry,
        ToolCall::new("p1", "fragile", json!({"word": "hi"})),
    )
    .await;
    assert_eq!((call_view, result_view), (None, None));
    assert_eq!(
        result,
        ToolResult::success(
            json!("hi"),
            vec![dsh_tools::result::ContentBlock::text("hi")]
        ),
        "the call succeeds, without meta"
    );
    let (call_view, result_view, result) =
        present(&registry, ToolCall::new("p2", "dynamic", json!({"a": 1}))).await;
    assert_eq!((call_view, result_view), (None, None));
    assert!(!result.is_error());
}

#[tokio::test]
async fn a_replaced_value_drops_the_card_made_from_the_old_one() {
    let root = fixture("replaced");
    let registry = toolset_registry(&root);
    registry.on_post_execute(|_view, _result, _next| async {
        PostDecision::Accept {
            content: None,
            value: Some(json!({"path": "x", "offset": 1, "lines": [], "total_lines": 0})),
            contexts: vec![],
        }
    });
    let (call_view, result_view, result) = present(
        &registry,
        ToolCall::new("r", "read_file", json!({"path": "src/lib.rs"})),
    )
    .await;
    assert!(call_view.is_some());
    assert!(!result.is_error(), "{result:?}");
    assert_eq!(result_view, None, "the card described the replaced value");
}
