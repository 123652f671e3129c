//! Regenerates the committed SDK of the example toolset: `sdk/tools.ts` and `sdk/tools.py`.
//!
//! ```text
//! cargo run --example generate_sdk
//! ```
//!
//! Files are written only when their bytes change, so the command is safe in build scripts.

#[path = "../src/bin/dsh-tools/toolset.rs"]
mod toolset;

use std::path::Path;

use dsh_tools::Registry;
use dsh_tools::prelude::*;
use dsh_tools::sdk::{Language, write_if_changed};

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let registry = Registry::new();
    registry.register_all(toolset::definitions(root))?;
    for (language, file) in [
        (Language::TypeScript, "sdk/tools.ts"),
        (Language::Python, "sdk/tools.py"),
    ] {
        let written = write_if_changed(root.join(file), &registry.sdk(None, language))?;
        println!("{file}: {}", if written { "written" } else { "up to date" });
    }
    Ok(())
}
