use dsh_tools::tool;

/// Echo a value.
#[tool]
async fn echo<T: serde::de::DeserializeOwned>(value: T) -> T {
    value
}

fn main() {}
