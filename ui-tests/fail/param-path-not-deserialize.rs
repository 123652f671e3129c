use dsh_tools::tool;

struct Page(u32);

/// Wait until a moment, then read a page. Each type is one error, the caret on the whole type.
#[tool]
async fn wait(at: std::time::Instant, page: Option<Page>) -> String {
    let _ = (at, page);
    String::new()
}

fn main() {}
