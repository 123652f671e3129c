use dsh_tools::{Tool, tool};

#[doc = include_str!("include-str-doc.md")]
/// More text.
#[tool]
async fn documented() {}

/// Runs the case.
pub(crate) fn main() {
    assert_eq!(
        <DocumentedTool as Tool>::DESCRIPTION,
        "Text from a file.\n\nMore text."
    );
}
