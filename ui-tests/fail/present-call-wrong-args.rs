use dsh_tools::{presentation::CallView, tool};

/// Read a file.
#[tool(present_call = present_read)]
async fn read(path: String) -> String {
    path
}

// Takes the path instead of the generated arguments struct.
fn present_read(path: &String) -> Option<CallView> {
    let _ = path;
    None
}

fn main() {}
