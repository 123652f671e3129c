//! The schemars path that `#[derive(JsonSchema)]` expands through: `#[tool]`'s generated argument
//! structs and tool authors' own types (`#[schemars(crate = "dsh_tools::schemars")]`).
//!
//! It is schemars itself with one helper replaced. schemars 1.x generates the schema of an
//! internally tagged enum's newtype variant by asking the inner type for its whole schema before
//! deciding whether to refer to it; for `#[serde(tag = "type")] enum Node { Group(Box<Node>), … }`
//! that request reaches `Node` again and recurses until the stack overflows, which aborts the
//! process. The replacement notices a type whose variant schema is already being built further up
//! this thread and answers with a reference to it instead (`$ref`), which is what the schema means.

pub use ::schemars::*;

/// The helpers schemars' derive output calls, as schemars has them, but for the one above.
#[doc(hidden)]
pub mod _private {
    use std::borrow::Cow;
    use std::cell::RefCell;

    use ::schemars::{JsonSchema, Schema, SchemaGenerator};

    pub use ::schemars::_private::*;

    thread_local! {
        /// The `schema_id`s whose newtype-variant schema is being generated on this thread.
        static IN_PROGRESS: RefCell<Vec<Cow<'static, str>>> = const { RefCell::new(Vec::new()) };
    }

    /// Pops its entry even when a schema function panics.
    struct InProgress;

    impl Drop for InProgress {
        fn drop(&mut self) {
            IN_PROGRESS.with(|stack| stack.borrow_mut().pop());
        }
    }

    /// schemars' helper for an internally tagged newtype variant, made safe for a variant that
    /// holds its own enum: the inner type's second visit is a `$ref` (`subschema_for` finds it
    /// pending at the latest on the level below), never an endless descent.
    pub fn json_schema_for_internally_tagged_enum_newtype_variant<T: ?Sized + JsonSchema>(
        generator: &mut SchemaGenerator,
    ) -> Schema {
        let id = T::schema_id();
        let recursing =
            !T::inline_schema() && IN_PROGRESS.with(|stack| stack.borrow().contains(&id));
        if recursing {
            return generator.subschema_for::<T>();
        }
        IN_PROGRESS.with(|stack| stack.borrow_mut().push(id));
        let _pop = InProgress;
        ::schemars::_private::json_schema_for_internally_tagged_enum_newtype_variant::<T>(generator)
    }
}
