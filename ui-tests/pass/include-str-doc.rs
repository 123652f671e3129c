use dsh_tools::{tool, Tool};

#[doc = include_str!("include-str-doc.md")]
/// More text.
#[tool]
async fn documented() {}

fn main() {
    assert_eq!(
        <DocumentedTool as Tool>::DESCRIPTION,
        "Text from a file.\n\nMore text."
    );
}
