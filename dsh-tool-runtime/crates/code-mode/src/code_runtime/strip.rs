//! TypeScript type stripping on the host, position-preserving: every character of erasable
//! syntax becomes a space (line terminators stay), so line and column numbers in the child's
//! stack traces are the model's own. This is the "strip-only" mode Node.js uses for
//! `--experimental-strip-types`; syntax with run-time meaning (`enum`, `namespace`, parameter
//! properties, `import x = require(...)`, decorators) is refused instead of transformed.
//!
//! Blanking alone can change what a program means where a line break is involved; the rules of
//! the reference strippers (`ts-blank-space`, `swc_fast_ts_strip`) keep it the same program:
//! - an erased statement or class member (`type`, `interface`, `declare ...`, overload and
//!   abstract signatures, index signatures) starts with `;` instead of a space, and so does a
//!   member whose leading modifiers are erased, so the next line never joins the previous one;
//! - an arrow function whose return type spans lines gets its `)` moved to the end of the type,
//!   so no line break separates `)` and `=>`;
//! - an `async` arrow whose type parameters span lines gets its `(` moved up to where the `<`
//!   was, so `async` and its parameters stay on one line;
//! - a prefix type assertion (`<T>value`) followed by a line break is refused: after `return`
//!   blanking it would end the statement.

use oxc::allocator::Allocator;
use oxc::ast::ast::{
    AccessorProperty, ArrowFunctionExpression, Class, ClassElement, Decorator, Expression,
    FormalParameter, Function, MethodDefinition, MethodDefinitionType, ModuleDeclaration,
    PropertyDefinition, PropertyDefinitionType, PropertyKey, TSAsExpression, TSEnumDeclaration,
    TSExternalModuleDeclaration, TSGlobalDeclaration, TSImportEqualsDeclaration,
    TSInterfaceDeclaration, TSNamespaceDeclaration, TSNonNullExpression, TSSatisfiesExpression,
    TSThisParameter, TSTypeAliasDeclaration, TSTypeAnnotation, TSTypeAssertion,
    TSTypeParameterDeclaration, TSTypeParameterInstantiation, VariableDeclaration,
    VariableDeclarator,
};
use oxc::ast_visit::{Visit, walk};
use oxc::parser::{ParseOptions, Parser};
use oxc::span::{GetSpan, SourceType, Span};
use oxc::syntax::scope::ScopeFlags;

/// The largest program accepted, in bytes. The parser recurses per nesting level; this bound
/// together with the big stack of [`strip_types`]'s thread keeps hostile nesting from
/// overflowing it.
pub(crate) const MAX_PROGRAM_BYTES: usize = 256 << 10;

/// The refusal of a program over [`MAX_PROGRAM_BYTES`], in either language: the bound is the
/// stripper's, and every runtime applies it so that programs have one limit.
pub fn oversized(program: &str) -> Option<String> {
    (program.len() > MAX_PROGRAM_BYTES).then(|| {
        format!(
            "program is {} bytes; at most {MAX_PROGRAM_BYTES} are accepted",
            program.len()
        )
    })
}

/// Stack for the stripping thread: generous, and only touched pages are committed.
const STRIP_STACK_BYTES: usize = 1 << 30;

/// Strips `source` (the body of an async function) on a dedicated big-stack thread.
///
/// # Errors
///
/// The text of the `exception` the run ends with: a syntax error with its position
/// (`program.ts:<line>:<column>: <message>`), refused non-erasable syntax, or a program over
/// [`MAX_PROGRAM_BYTES`].
pub async fn strip_types(source: String) -> Result<String, String> {
    if let Some(refusal) = oversized(&source) {
        return Err(refusal);
    }
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("dsh-strip-types".to_owned())
        .stack_size(STRIP_STACK_BYTES)
        .spawn(move || {
            // The receiver only goes away when the run itself was dropped.
            let _ = tx.send(strip_now(&source));
        })
        .map_err(|e| format!("could not start the type stripper: {e}"))?;
    rx.await
        .unwrap_or_else(|_| Err("the type stripper stopped unexpectedly".to_owned()))
}

/// Strips `source` on the current thread (which needs a stack sized for the program's nesting).
pub(crate) fn strip_now(source: &str) -> Result<String, String> {
    let allocator = Allocator::default();
    let options = ParseOptions {
        allow_return_outside_function: true,
        ..ParseOptions::default()
    };
    let ret = Parser::new(&allocator, source, SourceType::ts().with_module(true))
        .with_options(options)
        .parse();
    if let Some(error) = ret.diagnostics.iter().next() {
        let offset = error.labels.first().map_or(0, |label| label.offset());
        return Err(located(source, offset as usize, &error.message));
    }
    let mut stripper = Stripper {
        source,
        blanks: Vec::new(),
        puts: Vec::new(),
        refused: None,
    };
    stripper.visit_program(&ret.program);
    if let Some((offset, what)) = stripper.refused {
        return Err(located(
            source,
            offset as usize,
            &format!(
                "{what} is not erasable TypeScript syntax; only type annotations can be stripped, so rewrite it with plain JavaScript"
            ),
        ));
    }
    Ok(blank_out(source, stripper.blanks, stripper.puts))
}

fn located(source: &str, offset: usize, message: &str) -> String {
    let before = &source[..floor_char_boundary(source, offset)];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    format!("SyntaxError: program.ts:{line}:{column}: {message}")
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    i = i.min(s.len());
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Replaces every character inside `blanks` by a space, keeping line terminators, then writes
/// each of `puts` (an ASCII character at a blanked byte offset).
fn blank_out(source: &str, mut blanks: Vec<(u32, u32)>, puts: Vec<(u32, u8)>) -> String {
    blanks.sort_unstable();
    let mut out = String::with_capacity(source.len());
    let mut ranges = blanks.into_iter().peekable();
    for (i, c) in source.char_indices() {
        let i = i as u32;
        while ranges.peek().is_some_and(|&(_, end)| end <= i) {
            ranges.next();
        }
        let inside = ranges.peek().is_some_and(|&(start, _)| start <= i);
        if inside && !matches!(c, '\n' | '\r' | '\u{2028}' | '\u{2029}') {
            // One space per byte keeps every later offset (and so `puts`) in place.
            out.extend(std::iter::repeat_n(' ', c.len_utf8()));
        } else {
            out.push(c);
        }
    }
    let mut bytes = out.into_bytes();
    for (at, byte) in puts {
        // Only onto a space that blanking made, so the text stays UTF-8.
        if bytes.get(at as usize) == Some(&b' ') {
            bytes[at as usize] = byte;
        }
    }
    String::from_utf8(bytes).unwrap_or_default()
}

struct Stripper<'s> {
    source: &'s str,
    blanks: Vec<(u32, u32)>,
    /// Characters written over blanked bytes: `;`, a moved `)` or `(`.
    puts: Vec<(u32, u8)>,
    refused: Option<(u32, &'static str)>,
}

const MEMBER_MODIFIERS: &[&str] = &[
    "public",
    "private",
    "protected",
    "readonly",
    "override",
    "declare",
    "abstract",
];

impl Stripper<'_> {
    fn blank(&mut self, span: Span) {
        if span.start < span.end {
            self.blanks.push((span.start, span.end));
        }
    }

    /// Blanks a whole statement or class member and starts it with `;`, so that the code before
    /// and after it cannot join into one statement.
    fn erase(&mut self, span: Span) {
        if span.start < span.end {
            self.blank(span);
            self.puts.push((span.start, b';'));
        }
    }

    fn spans_lines(&self, from: u32, to: u32) -> bool {
        self.source
            .get(from as usize..to as usize)
            .is_some_and(|t| t.contains(['\n', '\r', '\u{2028}', '\u{2029}']))
    }

    fn refuse(&mut self, span: Span, what: &'static str) {
        if self.refused.is_none() {
            self.refused = Some((span.start, what));
        }
    }

    /// Blanks the single `mark` character (`?` or `!`) that follows `after`, skipping spaces and
    /// a computed key's `]`.
    fn blank_mark_after(&mut self, after: u32, mark: u8) {
        let bytes = self.source.as_bytes();
        let mut i = after as usize;
        while i < bytes.len() && (bytes[i].is_ascii_whitespace() || bytes[i] == b']') {
            i += 1;
        }
        if bytes.get(i) == Some(&mark) {
            self.blanks.push((i as u32, i as u32 + 1));
        }
    }

    /// Blanks TypeScript-only modifier words between `from` and `to` (a member's start and its
    /// key).
    /// When the member's first word is erased, the member starts with `;` (a computed key, a
    /// generator `*` or a string key on the next line would otherwise continue the previous
    /// member's initializer).
    fn blank_modifiers(&mut self, from: u32, to: u32) {
        let text = &self.source[from as usize..to as usize];
        let mut offset = 0;
        let mut first = true;
        for word in text.split(|c: char| !c.is_ascii_alphanumeric() && c != '_') {
            if !word.is_empty() {
                let start = from + offset as u32;
                if MEMBER_MODIFIERS.contains(&word) {
                    self.blanks.push((start, start + word.len() as u32));
                    if first {
                        self.puts.push((start, b';'));
                    }
                }
                first = false;
            }
            offset += word.len() + 1;
        }
    }

    fn member_start(span: Span, decorators: &[Decorator<'_>]) -> u32 {
        decorators.last().map_or(span.start, |d| d.span.end)
    }

    fn key_start(key: &PropertyKey<'_>, computed: bool, source: &str) -> u32 {
        let start = key.span().start;
        if computed {
            // The computed key's span excludes its `[`: stop before it.
            source[..start as usize]
                .rfind('[')
                .map_or(start, |i| i as u32)
        } else {
            start
        }
    }
}

impl<'a> Visit<'a> for Stripper<'_> {
    fn visit_ts_type_annotation(&mut self, it: &TSTypeAnnotation<'a>) {
        self.blank(it.span);
    }

    fn visit_ts_type_parameter_declaration(&mut self, it: &TSTypeParameterDeclaration<'a>) {
        self.blank(it.span);
    }

    fn visit_ts_type_parameter_instantiation(&mut self, it: &TSTypeParameterInstantiation<'a>) {
        self.blank(it.span);
    }

    fn visit_ts_interface_declaration(&mut self, it: &TSInterfaceDeclaration<'a>) {
        self.erase(it.span);
    }

    fn visit_ts_type_alias_declaration(&mut self, it: &TSTypeAliasDeclaration<'a>) {
        self.erase(it.span);
    }

    fn visit_ts_enum_declaration(&mut self, it: &TSEnumDeclaration<'a>) {
        if it.declare {
            self.erase(it.span);
        } else {
            self.refuse(it.span, "`enum`");
        }
    }

    fn visit_ts_namespace_declaration(&mut self, it: &TSNamespaceDeclaration<'a>) {
        if it.declare {
            self.erase(it.span);
        } else {
            self.refuse(it.span, "`namespace`");
        }
    }

    fn visit_ts_external_module_declaration(&mut self, it: &TSExternalModuleDeclaration<'a>) {
        if it.declare {
            self.erase(it.span);
        } else {
            self.refuse(it.span, "`module`");
        }
    }

    fn visit_ts_global_declaration(&mut self, it: &TSGlobalDeclaration<'a>) {
        self.erase(it.span);
    }

    fn visit_ts_import_equals_declaration(&mut self, it: &TSImportEqualsDeclaration<'a>) {
        self.refuse(it.span, "`import ... = ...`");
    }

    fn visit_module_declaration(&mut self, it: &ModuleDeclaration<'a>) {
        // A program is a function body: static `import`/`export` cannot appear there.
        self.refuse(
            it.span(),
            "a static `import` or `export` (use `await import(...)`)",
        );
    }

    fn visit_ts_as_expression(&mut self, it: &TSAsExpression<'a>) {
        self.visit_expression(&it.expression);
        self.blank(Span::new(it.expression.span().end, it.span.end));
    }

    fn visit_ts_satisfies_expression(&mut self, it: &TSSatisfiesExpression<'a>) {
        self.visit_expression(&it.expression);
        self.blank(Span::new(it.expression.span().end, it.span.end));
    }

    fn visit_ts_non_null_expression(&mut self, it: &TSNonNullExpression<'a>) {
        self.visit_expression(&it.expression);
        self.blank(Span::new(it.expression.span().end, it.span.end));
    }

    fn visit_ts_type_assertion(&mut self, it: &TSTypeAssertion<'a>) {
        let expression = it.expression.span().start;
        if self.spans_lines(it.span.start, expression) {
            self.refuse(
                it.span,
                "a `<T>value` type assertion followed by a line break (blanked, the line break would end the statement; write `value as T`)",
            );
        }
        self.blank(Span::new(it.span.start, expression));
        self.visit_expression(&it.expression);
    }

    fn visit_decorator(&mut self, it: &Decorator<'a>) {
        self.refuse(it.span, "a decorator");
    }

    fn visit_arrow_function_expression(&mut self, it: &ArrowFunctionExpression<'a>) {
        let params = it.params.span;
        if let Some(types) = &it.type_parameters
            && it.r#async
            && self.spans_lines(types.span.start, params.start)
        {
            // `async <\n T\n>(a) => a`: the `(` takes the place of the `<`.
            self.puts.push((types.span.start, b'('));
            self.blank(Span::new(params.start, params.start + 1));
        }
        if let Some(annotation) = &it.return_type
            && params.end > params.start
            && self.source.as_bytes().get(params.end as usize - 1) == Some(&b')')
            && self.spans_lines(params.end, annotation.span.end)
        {
            // `(a):\n T => a`: the `)` moves to the end of the type, next to `=>`.
            self.blank(Span::new(params.end - 1, params.end));
            self.puts.push((annotation.span.end - 1, b')'));
        }
        walk::walk_arrow_function_expression(self, it);
    }

    fn visit_ts_this_parameter(&mut self, it: &TSThisParameter<'a>) {
        self.blank(it.span);
        self.blank_mark_after(it.span.end, b',');
    }

    fn visit_expression(&mut self, it: &Expression<'a>) {
        // Long operator chains nest the tree deeply without nesting brackets: grow on demand.
        stacker::maybe_grow(256 << 10, 16 << 20, || walk::walk_expression(self, it));
    }

    fn visit_formal_parameter(&mut self, it: &FormalParameter<'a>) {
        if it.accessibility.is_some() || it.readonly || it.r#override {
            self.refuse(it.span, "a parameter property");
        }
        if it.optional {
            self.blank_mark_after(it.pattern.span().end, b'?');
        }
        walk::walk_formal_parameter(self, it);
    }

    fn visit_function(&mut self, it: &Function<'a>, flags: ScopeFlags) {
        if it.declare || it.body.is_none() {
            self.erase(it.span);
            return;
        }
        walk::walk_function(self, it, flags);
    }

    fn visit_variable_declaration(&mut self, it: &VariableDeclaration<'a>) {
        if it.declare {
            self.erase(it.span);
            return;
        }
        walk::walk_variable_declaration(self, it);
    }

    fn visit_variable_declarator(&mut self, it: &VariableDeclarator<'a>) {
        if it.definite {
            self.blank_mark_after(it.id.span().end, b'!');
        }
        walk::walk_variable_declarator(self, it);
    }

    fn visit_class(&mut self, it: &Class<'a>) {
        if it.declare {
            self.erase(it.span);
            return;
        }
        if it.r#abstract {
            let head = &self.source[it.span.start as usize..it.body.span.start as usize];
            if let Some(i) = head.find("abstract") {
                let start = it.span.start + i as u32;
                self.blanks.push((start, start + "abstract".len() as u32));
            }
        }
        if let (Some(first), Some(last)) = (it.implements.first(), it.implements.last()) {
            let head = &self.source[it.span.start as usize..first.span.start as usize];
            if let Some(i) = head.rfind("implements") {
                self.blank(Span::new(it.span.start + i as u32, last.span.end));
            }
        }
        walk::walk_class(self, it);
    }

    fn visit_class_element(&mut self, it: &ClassElement<'a>) {
        match it {
            ClassElement::TSIndexSignature(sig) => self.erase(sig.span),
            ClassElement::MethodDefinition(m) => self.visit_method_definition(m),
            ClassElement::PropertyDefinition(p) => self.visit_property_definition(p),
            ClassElement::AccessorProperty(a) => self.visit_accessor_property(a),
            ClassElement::StaticBlock(_) => walk::walk_class_element(self, it),
        }
    }

    fn visit_method_definition(&mut self, it: &MethodDefinition<'a>) {
        if it.r#type == MethodDefinitionType::TSAbstractMethodDefinition || it.value.body.is_none()
        {
            self.erase(it.span);
            return;
        }
        let key = Self::key_start(&it.key, it.computed, self.source);
        self.blank_modifiers(Self::member_start(it.span, &it.decorators), key);
        if it.optional {
            self.blank_mark_after(it.key.span().end, b'?');
        }
        walk::walk_method_definition(self, it);
    }

    fn visit_property_definition(&mut self, it: &PropertyDefinition<'a>) {
        if it.r#type == PropertyDefinitionType::TSAbstractPropertyDefinition || it.declare {
            self.erase(it.span);
            return;
        }
        let key = Self::key_start(&it.key, it.computed, self.source);
        self.blank_modifiers(Self::member_start(it.span, &it.decorators), key);
        if it.optional {
            self.blank_mark_after(it.key.span().end, b'?');
        }
        if it.definite {
            self.blank_mark_after(it.key.span().end, b'!');
        }
        walk::walk_property_definition(self, it);
    }

    fn visit_accessor_property(&mut self, it: &AccessorProperty<'a>) {
        if it.r#type == oxc::ast::ast::AccessorPropertyType::TSAbstractAccessorProperty {
            self.erase(it.span);
            return;
        }
        let key = Self::key_start(&it.key, it.computed, self.source);
        self.blank_modifiers(Self::member_start(it.span, &it.decorators), key);
        if it.definite {
            self.blank_mark_after(it.key.span().end, b'!');
        }
        walk::walk_accessor_property(self, it);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[track_caller]
    fn same(ts: &str, js: &str) {
        let out = strip_now(ts).unwrap();
        assert_eq!(
            out.split_whitespace().collect::<Vec<_>>().join(" "),
            js.split_whitespace().collect::<Vec<_>>().join(" "),
            "stripped {ts:?} to {out:?}"
        );
        assert_eq!(out.lines().count(), ts.lines().count());
    }

    #[test]
    fn strips_erasable_syntax() {
        same("const x: number = 1;", "const x = 1;");
        same("let y!: string;", "let y ;");
        same(
            "function f<T>(a: T, b?: number): T { return a; }",
            "function f (a , b ) { return a; }",
        );
        same(
            "function g(this: Window, a: number) { return a; }",
            "function g( a ) { return a; }",
        );
        same(
            "const v = (x as any).y satisfies unknown;",
            "const v = (x ).y ;",
        );
        same("const w = o!.p!;", "const w = o .p ;");
        same("const z = <number>q;", "const z = q;");
        same(
            "interface I {\n a: string\n}\ntype T = I;\nreturn 1;",
            "; ; return 1;",
        );
        same(
            "declare const d: number;\ndeclare function h(): void;",
            "; ;",
        );
        same(
            "function o(a: string): void;\nfunction o(a: any) {}",
            "; function o(a ) {}",
        );
        same(
            "abstract class A<T> extends B<T> implements C, D {\n private readonly x?: number = 1;\n declare y: string;\n public static m?(): void {}\n abstract n(): void;\n [k: string]: any;\n}",
            "class A extends B {\n ; x = 1;\n ;\n ; static m () {}\n ;\n ;\n}",
        );
        same(
            "const f2 = async <T,>(a: T): Promise<T> => a;",
            "const f2 = async (a ) => a;",
        );
        same(
            "const r = f<string>(1);\nreturn await r;",
            "const r = f (1);\nreturn await r;",
        );
    }

    #[test]
    fn keeps_statement_boundaries_across_line_breaks() {
        // The erased declaration must not let `(b)` call `a`.
        same("let x = a\ntype T = number\n(b)", "let x = a\n;\n(b)");
        same(
            "class C {\n x = a\n private ['k']() {}\n}",
            "class C {\n x = a\n ; ['k']() {}\n}",
        );
        same(
            "const f = (a: number):\n  Promise<number> => g(a)",
            "const f = (a\n ) => g(a)",
        );
        same(
            "const h = async <\n  T,\n>(a: T) => a",
            "const h = async (\n \n a ) => a",
        );
        let err = strip_now("return <number>\n  value").unwrap_err();
        assert!(
            err.contains("type assertion followed by a line break"),
            "{err}"
        );
        let err = strip_now("class K { m(@inject x: number) {} }").unwrap_err();
        assert!(err.contains("a decorator"), "{err}");
    }

    #[test]
    fn keeps_positions() {
        let ts = "const a: {\n  k: number\n} = { k: 1 };\nthrow new Error('x');";
        let js = strip_now(ts).unwrap();
        assert_eq!(js.lines().count(), 4);
        assert_eq!(js.lines().nth(3), Some("throw new Error('x');"));
    }

    #[test]
    fn refuses_non_erasable_syntax() {
        for (ts, what) in [
            ("enum E { A }", "`enum`"),
            ("namespace N { export const a = 1; }", "`namespace`"),
            (
                "class K { constructor(private a: number) {} }",
                "a parameter property",
            ),
            ("import fs = require('fs');", "`import ... = ...`"),
            ("import x from 'y';", "a static `import`"),
        ] {
            let err = strip_now(ts).unwrap_err();
            assert!(err.contains(what), "{ts}: {err}");
            assert!(err.starts_with("SyntaxError: program.ts:1:"), "{err}");
        }
    }

    #[test]
    fn reports_syntax_errors_with_their_line() {
        let err = strip_now("const a = 1;\nconst = ;").unwrap_err();
        assert!(err.starts_with("SyntaxError: program.ts:2:"), "{err}");
    }

    #[tokio::test]
    async fn survives_hostile_nesting() {
        for program in [
            "(".repeat(MAX_PROGRAM_BYTES),
            "!".repeat(MAX_PROGRAM_BYTES - 1) + "x",
            "x".to_owned() + &"+1".repeat(MAX_PROGRAM_BYTES / 2 - 1),
            "[".repeat(MAX_PROGRAM_BYTES / 2) + &"]".repeat(MAX_PROGRAM_BYTES / 2),
        ] {
            // Any answer will do, as long as the process is still here to see it.
            let _ = strip_types(program).await;
        }
        assert!(
            strip_types("x".repeat(MAX_PROGRAM_BYTES + 1))
                .await
                .is_err()
        );
    }
}
