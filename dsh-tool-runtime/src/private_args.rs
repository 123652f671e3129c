//! How a `#[tool]`'s generated arguments struct is read and described: the map walk, the key
//! lookup, the errors and the schema's assembly live here, written once, and each tool supplies
//! only its field table, one `match` over its fields ([`ArgsStruct`]) and one
//! [`ArgProperty`] per field. serde's and schemars' derives would emit all of that per tool (a
//! key enum with its visitor, a struct visitor for maps and sequences, a wrapper type per field
//! for `deserialize_with` and another for `schema_with`), which was most of what a tool cost to
//! compile. Re-exported through [`crate::__private`]; not a public API.

use std::fmt;
use std::marker::PhantomData;

use schemars::_private::{
    get_title_and_description, insert_metadata_property_if_nonempty, insert_object_property,
};
use schemars::{Schema, SchemaGenerator};
use serde::Deserializer;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Unexpected, Visitor};

/// A generated arguments struct, as [`deserialize_args`] reads it: the values are collected in
/// `Slots` (one `Option` per field), then [`finish`](Self::finish) builds the struct.
pub trait ArgsStruct: Sized {
    /// The struct's name, as serde's derive names it in `expected struct …`.
    const STRUCT: &'static str;
    /// The wire names of the fields, in declaration order.
    const FIELDS: &'static [&'static str];
    /// Whether a key outside [`FIELDS`](Self::FIELDS) is an error (`deny_unknown_fields`)
    /// rather than skipped.
    const DENY_UNKNOWN: bool;
    /// One `Option` per field, `None` until the field's key is read.
    type Slots;

    /// All slots empty.
    fn slots() -> Self::Slots;

    /// Reads the value of field `index` (of [`FIELDS`](Self::FIELDS)) from `map` into its slot.
    ///
    /// # Errors
    /// `duplicate field` when the slot is already filled, or the value's own error.
    fn read<'de, A: MapAccess<'de>>(
        slots: &mut Self::Slots,
        index: usize,
        map: &mut A,
    ) -> Result<(), A::Error>;

    /// The struct, with each absent field's default.
    ///
    /// # Errors
    /// `missing field` for an absent field without a default.
    fn finish<E: de::Error>(slots: Self::Slots) -> Result<Self, E>;
}

/// Reads `T` from a map, as serde's derive would with the same attributes, with the same error
/// messages: `unknown field`, `duplicate field`, `missing field` and `invalid type: …, expected
/// struct T`. A sequence is not accepted (the registry always passes an object).
///
/// # Errors
/// The deserializer's error.
pub fn deserialize_args<'de, T: ArgsStruct, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    deserializer.deserialize_struct(T::STRUCT, T::FIELDS, ArgsVisitor::<T>(PhantomData))
}

/// Fails with `duplicate field` when `slot` is already filled.
///
/// # Errors
/// As said.
pub fn vacant<T, E: de::Error>(slot: &Option<T>, field: &'static str) -> Result<(), E> {
    match slot {
        Some(_) => Err(E::duplicate_field(field)),
        None => Ok(()),
    }
}

/// The value of a required field.
///
/// # Errors
/// `missing field` when it was absent.
pub fn required<T, E: de::Error>(slot: Option<T>, field: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(field))
}

struct ArgsVisitor<T>(PhantomData<fn() -> T>);

impl<'de, T: ArgsStruct> Visitor<'de> for ArgsVisitor<T> {
    type Value = T;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "struct {}", T::STRUCT)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let mut slots = T::slots();
        let seed = FieldSeed {
            fields: T::FIELDS,
            deny_unknown: T::DENY_UNKNOWN,
        };
        while let Some(key) = map.next_key_seed(seed)? {
            match key {
                Some(index) => T::read(&mut slots, index, &mut map)?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        T::finish(slots)
    }
}

/// A key of the map: the index of the field it names, or `None` for a key that is skipped.
#[derive(Clone, Copy)]
struct FieldSeed {
    fields: &'static [&'static str],
    deny_unknown: bool,
}

impl<'de> DeserializeSeed<'de> for FieldSeed {
    type Value = Option<usize>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl FieldSeed {
    fn by_name<E: de::Error>(self, name: &str) -> Result<Option<usize>, E> {
        match self.fields.iter().position(|field| *field == name) {
            Some(index) => Ok(Some(index)),
            None if self.deny_unknown => Err(E::unknown_field(name, self.fields)),
            None => Ok(None),
        }
    }
}

impl Visitor<'_> for FieldSeed {
    type Value = Option<usize>;

    fn expecting(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("field identifier")
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        match usize::try_from(value) {
            Ok(index) if index < self.fields.len() => Ok(Some(index)),
            _ if self.deny_unknown => Err(E::invalid_value(
                Unexpected::Unsigned(value),
                &format!("field index 0 <= i < {}", self.fields.len()).as_str(),
            )),
            _ => Ok(None),
        }
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        self.by_name(value)
    }

    fn visit_bytes<E: de::Error>(self, value: &[u8]) -> Result<Self::Value, E> {
        self.by_name(&String::from_utf8_lossy(value))
    }
}

/// When a property is left out of `required`, as schemars' derive decides it for the field.
#[derive(Debug, Clone, Copy)]
pub enum Optional {
    /// A field without a default: always required.
    Never,
    /// An `Option` (serde `default` with `skip_serializing_if`): never required.
    Always,
    /// A field with a default: optional in the deserialize view only.
    WhenDeserializing,
}

/// One property of a generated arguments struct's schema.
#[derive(Debug)]
pub struct ArgProperty {
    /// The wire name.
    pub name: &'static str,
    /// Whether it is left out of `required`.
    pub optional: Optional,
    /// The field's doc comment, its lines joined with `\n` (the title and description come from
    /// it as schemars splits it).
    pub doc: Option<&'static str>,
    /// `#[arg(description = …)]`, which replaces the doc comment's description.
    pub description: Option<&'static str>,
    /// The type's schema (through `ToolArg`).
    pub schema: fn(&mut SchemaGenerator) -> Schema,
    /// The `#[arg]` constraints and the default value, applied after the metadata.
    pub mutate: Option<fn(&mut Schema)>,
}

/// The schema of a generated arguments struct, as schemars' derive writes it for the struct
/// `#[tool]` used to derive it on: an object (closed when `deny_unknown`), one property per
/// field with its doc comment as title and description, `required` for the fields without a
/// default, and the title from the struct's doc comment `doc`.
pub fn args_schema(
    generator: &mut SchemaGenerator,
    doc: &str,
    deny_unknown: bool,
    properties: &[ArgProperty],
) -> Schema {
    let mut object = serde_json::Map::new();
    object.insert("type".into(), "object".into());
    if deny_unknown {
        object.insert("additionalProperties".into(), false.into());
    }
    let mut schema = Schema::from(object);
    for property in properties {
        let mut sub = (property.schema)(generator);
        let (title, description) = match property.doc {
            Some(doc) => get_title_and_description(doc),
            None => ("", ""),
        };
        insert_metadata_property_if_nonempty(&mut sub, "title", title);
        insert_metadata_property_if_nonempty(
            &mut sub,
            "description",
            property.description.unwrap_or(description),
        );
        if let Some(mutate) = property.mutate {
            mutate(&mut sub);
        }
        let optional = match property.optional {
            Optional::Never => false,
            Optional::Always => true,
            Optional::WhenDeserializing => generator.contract().is_deserialize(),
        };
        insert_object_property(&mut schema, property.name, optional, sub);
    }
    insert_metadata_property_if_nonempty(&mut schema, "title", get_title_and_description(doc).0);
    schema
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// What `#[tool]` generates for `(name: String, #[arg(default = 7)] count: u64,
    /// flag: Option<bool>)`, written by hand.
    #[derive(Debug, PartialEq)]
    struct Args {
        name: String,
        count: u64,
        flag: Option<bool>,
    }

    impl<'de> serde::Deserialize<'de> for Args {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserialize_args(deserializer)
        }
    }

    impl ArgsStruct for Args {
        // Named as the derived twin below, so that their messages compare equal.
        const STRUCT: &'static str = "Derived";
        const FIELDS: &'static [&'static str] = &["name", "count", "flag"];
        const DENY_UNKNOWN: bool = true;
        type Slots = (Option<String>, Option<u64>, Option<Option<bool>>);

        fn slots() -> Self::Slots {
            (None, None, None)
        }

        fn read<'de, A: MapAccess<'de>>(
            slots: &mut Self::Slots,
            index: usize,
            map: &mut A,
        ) -> Result<(), A::Error> {
            match index {
                0 => {
                    vacant(&slots.0, "name")?;
                    slots.0 = Some(map.next_value()?);
                }
                1 => {
                    vacant(&slots.1, "count")?;
                    slots.1 = Some(map.next_value()?);
                }
                _ => {
                    vacant(&slots.2, "flag")?;
                    slots.2 = Some(map.next_value()?);
                }
            }
            Ok(())
        }

        fn finish<E: de::Error>(slots: Self::Slots) -> Result<Self, E> {
            Ok(Self {
                name: required(slots.0, "name")?,
                count: slots.1.unwrap_or(7),
                flag: slots.2.unwrap_or_default(),
            })
        }
    }

    /// The same struct through serde's derive: the reference for every message.
    #[derive(Debug, PartialEq, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Derived {
        name: String,
        #[serde(default = "seven")]
        count: u64,
        #[serde(default)]
        flag: Option<bool>,
    }

    fn seven() -> u64 {
        7
    }

    fn both(value: serde_json::Value) -> (Result<Args, String>, Result<Derived, String>) {
        (
            serde_json::from_value::<Args>(value.clone()).map_err(|err| err.to_string()),
            serde_json::from_value::<Derived>(value).map_err(|err| err.to_string()),
        )
    }

    #[test]
    fn reads_what_the_derive_reads() {
        let (ours, derived) = both(json!({"flag": true, "name": "a"}));
        let derived = derived.unwrap();
        assert_eq!(
            ours.unwrap(),
            Args {
                name: derived.name,
                count: derived.count,
                flag: derived.flag
            }
        );
        assert_eq!(derived.count, 7);
    }

    #[test]
    fn errors_read_as_the_derive_writes_them() {
        for value in [
            json!({"name": "a", "nmae": 1}),
            json!({"count": 1}),
            json!({"name": 3}),
            json!("text"),
            json!({"name": "a", "count": -1}),
        ] {
            let (ours, derived) = both(value.clone());
            let (ours, derived) = (ours.unwrap_err(), derived.unwrap_err());
            assert_eq!(ours, derived, "for {value}");
        }
    }

    #[test]
    fn a_duplicate_key_is_refused() {
        let err = serde_json::from_str::<Args>(r#"{"name": "a", "name": "b"}"#).unwrap_err();
        let derived = serde_json::from_str::<Derived>(r#"{"name": "a", "name": "b"}"#).unwrap_err();
        assert_eq!(err.to_string(), derived.to_string());
    }

    // What `#[tool]` used to derive for documented arguments `(#[arg(length(min = 1, max = 8),
    // pattern = "^a")] name: String, #[arg(default = 7, range(min = 1, max = 9))] count: u64,
    // #[arg(rename = "theFlag", description = "Replaced.")] flag: Option<bool>)`: the reference
    // for `args_schema`.
    /// What `#[tool]` used to derive.
    #[derive(schemars::JsonSchema)]
    #[expect(dead_code, reason = "only the derived schema is read")]
    #[serde(deny_unknown_fields)]
    #[schemars(description = "")]
    struct DerivedSchema {
        /// The name.
        ///
        /// What it names.
        #[schemars(length(min = 1, max = 8), regex(pattern = "^a"))]
        name: String,
        /// A count.
        #[schemars(range(min = 1, max = 9))]
        #[serde(default = "seven")]
        count: u64,
        /// A flag.
        #[schemars(description = "Replaced.")]
        #[serde(
            rename = "theFlag",
            default,
            skip_serializing_if = "::core::option::Option::is_none"
        )]
        flag: Option<bool>,
    }

    /// `DerivedSchema` through `args_schema`, as `#[tool]` writes it now.
    fn tool_schema(generator: &mut SchemaGenerator, deny_unknown: bool) -> Schema {
        args_schema(
            generator,
            "What `#[tool]` used to derive.",
            deny_unknown,
            &[
                ArgProperty {
                    name: "name",
                    optional: Optional::Never,
                    doc: Some("The name.\n\nWhat it names."),
                    description: None,
                    schema: |generator| generator.subschema_for::<String>(),
                    mutate: Some(|schema| {
                        use schemars::_private::insert_validation_property as insert;
                        insert(schema, "string", "minLength", 1);
                        insert(schema, "string", "maxLength", 8);
                        insert(schema, "array", "minItems", 1);
                        insert(schema, "array", "maxItems", 8);
                        insert(schema, "string", "pattern", "^a".to_string());
                    }),
                },
                ArgProperty {
                    name: "count",
                    optional: Optional::WhenDeserializing,
                    doc: Some("A count."),
                    description: None,
                    schema: |generator| generator.subschema_for::<u64>(),
                    mutate: Some(|schema| {
                        use schemars::_private::insert_validation_property as insert;
                        insert(schema, "number", "minimum", 1);
                        insert(schema, "number", "maximum", 9);
                        schema.insert("default".into(), seven().into());
                    }),
                },
                ArgProperty {
                    name: "theFlag",
                    optional: Optional::Always,
                    doc: Some("A flag."),
                    description: Some("Replaced."),
                    schema: |generator| generator.subschema_for::<Option<bool>>(),
                    mutate: None,
                },
            ],
        )
    }

    #[test]
    fn the_schema_is_the_one_the_derive_wrote() {
        for settings in [
            schemars::generate::SchemaSettings::draft2020_12().for_deserialize(),
            schemars::generate::SchemaSettings::draft2020_12().for_serialize(),
        ] {
            let mut ours = SchemaGenerator::new(settings.clone());
            let mut derived = SchemaGenerator::new(settings);
            let (ours, derived) = (
                tool_schema(&mut ours, true),
                <DerivedSchema as schemars::JsonSchema>::json_schema(&mut derived),
            );
            // Key order included: the schema reaches the model as text.
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&derived).unwrap()
            );
        }
        let open = tool_schema(&mut SchemaGenerator::default(), false);
        assert_eq!(open.get("additionalProperties"), None);
    }

    #[test]
    fn unknown_keys_are_skipped_when_allowed() {
        struct Open;
        impl ArgsStruct for Open {
            const STRUCT: &'static str = "Open";
            const FIELDS: &'static [&'static str] = &[];
            const DENY_UNKNOWN: bool = false;
            type Slots = ();
            fn slots() {}
            fn read<'de, A: MapAccess<'de>>(
                (): &mut (),
                _: usize,
                _: &mut A,
            ) -> Result<(), A::Error> {
                Ok(())
            }
            fn finish<E: de::Error>((): ()) -> Result<Self, E> {
                Ok(Self)
            }
        }
        assert!(deserialize_args::<Open, _>(json!({"any": [1, {"x": 2}]})).is_ok());
        assert!(deserialize_args::<Args, _>(json!({"name": "a", "any": 1})).is_err());
    }
}
