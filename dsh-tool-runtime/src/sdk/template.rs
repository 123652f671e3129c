//! The file templates of `sdk-templates/` (the `dsh-sdk-templates` crate), embedded at compile
//! time and rendered with minijinja.
//!
//! Contexts hold only strings and sorted sequences built by the renderers; templates read no
//! clock, environment or path, so rendering is a pure function of the context.

use std::sync::OnceLock;

use minijinja::syntax::SyntaxConfig;
use minijinja::value::Serde;
use minijinja::{AutoEscape, Environment, UndefinedBehavior, context};
use serde::Serialize;

use super::Language;
use super::index::Entry;
use super::{python as py, typescript as ts};

const TEMPLATES: &[(&str, &str)] = &[
    ("sdk_tools.ts", dsh_sdk_templates::SDK_TOOLS_TS),
    ("sdk_tools.py", dsh_sdk_templates::SDK_TOOLS_PY),
    ("sdk_index.ts", dsh_sdk_templates::SDK_INDEX_TS),
    ("sdk_index.py", dsh_sdk_templates::SDK_INDEX_PY),
    ("sdk_guide.ts", dsh_sdk_templates::SDK_GUIDE_TS),
    ("sdk_guide.py", dsh_sdk_templates::SDK_GUIDE_PY),
];

/// Which text a declarations template renders.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Part {
    /// A whole file: `@generated` header, the guide as comments, the declarations.
    File,
    /// A prompt section: the guide as text, the declarations in a fenced code block.
    Section,
    /// The declarations alone (what `sdk.describe` answers).
    Declarations,
}

/// The full context a template sees: the guide lines, which part is wanted, and the language
/// part.
#[derive(Serialize)]
struct Full<'a, C: Serialize> {
    guide: Vec<String>,
    part: Part,
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
        for (name, source) in TEMPLATES {
            env.add_template(name, source)
                .expect("the embedded SDK templates parse");
        }
        env
    })
}

// The templates and the shape of their contexts are fixed at compile time and covered by the
// tests; no input value can make rendering fail.
const RENDERS: &str = "the embedded SDK templates render every context the renderers build";

fn extension(language: Language) -> &'static str {
    match language {
        Language::TypeScript => "ts",
        Language::Python => "py",
    }
}

/// The guide's lines; `index` selects the progressive-disclosure wording.
fn guide(language: Language, index: bool) -> Vec<String> {
    environment()
        .get_template(&format!("sdk_guide.{}", extension(language)))
        .and_then(|template| template.render(context! { index }))
        .expect(RENDERS)
        .lines()
        .map(str::to_owned)
        .collect()
}

fn render<C: Serialize>(language: Language, language_context: &C, part: Part) -> String {
    let context = Full {
        guide: guide(language, false),
        part,
        language: language_context,
    };
    environment()
        .get_template(&format!("sdk_tools.{}", extension(language)))
        .and_then(|template| template.render(Serde(&context)))
        .expect(RENDERS)
}

/// Renders the TypeScript file, prompt section or declarations.
pub(crate) fn typescript(context: &ts::Context, part: Part) -> String {
    render(Language::TypeScript, context, part)
}

/// Renders the Python file, prompt section or declarations.
pub(crate) fn python(context: &py::Context, part: Part) -> String {
    render(Language::Python, context, part)
}

/// Renders the progressive-disclosure prompt section: the index guide and one line per tool.
pub(crate) fn index(language: Language, entries: &[Entry]) -> String {
    environment()
        .get_template(&format!("sdk_index.{}", extension(language)))
        .and_then(|template| {
            template.render(context! {
                guide => guide(language, true),
                tools => Serde(entries),
            })
        })
        .expect(RENDERS)
}
