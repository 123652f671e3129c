//! The file templates of `sdk-templates/`, embedded at compile time and rendered with minijinja.
//!
//! Contexts hold only strings and sorted sequences built by the renderers; templates read no
//! clock, environment or path, so rendering is a pure function of the context.

use std::sync::OnceLock;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, UndefinedBehavior};
use serde::Serialize;

use super::{python as py, typescript as ts};

const TYPESCRIPT: &str = include_str!("../../../sdk-templates/sdk_tools.ts.j2");
const PYTHON: &str = include_str!("../../../sdk-templates/sdk_tools.py.j2");
const GUIDE_TYPESCRIPT: &str = include_str!("../../../sdk-templates/sdk_guide.ts.md");
const GUIDE_PYTHON: &str = include_str!("../../../sdk-templates/sdk_guide.py.md");

/// The full context a template sees: the guide lines, whether a file (header, guide as
/// comments) or a prompt section (guide as text, fenced code) is wanted, and the language part.
#[derive(Serialize)]
struct Full<'a, C: Serialize> {
    guide: Vec<&'static str>,
    file: bool,
    #[serde(flatten)]
    language: &'a C,
}

fn environment() -> &'static Environment<'static> {
    static ENVIRONMENT: OnceLock<Environment<'static>> = OnceLock::new();
    ENVIRONMENT.get_or_init(|| {
        let mut env = Environment::new();
        // Source code, not HTML: nothing is escaped by the engine (the renderers escape).
        env.set_auto_escape_callback(|_| AutoEscape::None);
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        let syntax = SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .build()
            .expect("the default delimiters are valid");
        env.set_syntax(syntax);
        env.add_template("sdk_tools.ts", TYPESCRIPT)
            .expect("the embedded TypeScript template parses");
        env.add_template("sdk_tools.py", PYTHON)
            .expect("the embedded Python template parses");
        env
    })
}

fn render<C: Serialize>(name: &str, guide: &'static str, language: &C, file: bool) -> String {
    let context = Full {
        guide: guide.lines().collect(),
        file,
        language,
    };
    // The templates and the shape of their context are fixed at compile time and covered by the
    // tests; no input value can make rendering fail.
    environment()
        .get_template(name)
        .and_then(|template| template.render(Serde(&context)))
        .expect("the embedded SDK templates render every context the renderers build")
}

/// Renders the TypeScript file (`file`) or prompt section.
pub(crate) fn typescript(context: &ts::Context, file: bool) -> String {
    render("sdk_tools.ts", GUIDE_TYPESCRIPT, context, file)
}

/// Renders the Python file (`file`) or prompt section.
pub(crate) fn python(context: &py::Context, file: bool) -> String {
    render("sdk_tools.py", GUIDE_PYTHON, context, file)
}
