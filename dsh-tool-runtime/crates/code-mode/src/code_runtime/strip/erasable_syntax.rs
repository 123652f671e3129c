//! What each piece of erasable TypeScript syntax becomes: the [`Stripper`] visitor blanks type
//! annotations, starts erased statements and members with `;`, moves the `)` or `(` an arrow
//! function needs on its line, and refuses syntax with run-time meaning.

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
use oxc::span::{GetSpan, Span};
use oxc::syntax::scope::ScopeFlags;

/// The walk over a parsed program that records what to blank, what to write over the blanks
/// and the first syntax it refuses.
pub(super) struct Stripper<'s> {
    pub(super) source: &'s str,
    pub(super) blanks: Vec<(u32, u32)>,
    /// Characters written over blanked bytes: `;`, a moved `)` or `(`.
    pub(super) puts: Vec<(u32, u8)>,
    pub(super) refused: Option<(u32, &'static str)>,
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
