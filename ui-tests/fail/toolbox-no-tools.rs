use dsh_tools::toolbox;

struct Files;

#[toolbox(crate = dsh_tools)]
impl Files {
    /// Forgot `#[tool]`.
    async fn read(&self, path: String) -> String {
        path
    }
}

fn main() {}
