//! How a `#[tool]`'s generated arguments struct, and a plain `#[tool_type]` struct, are read and
//! described: the map walk, the key lookup, the errors and the schema's assembly live here,
//! written once, and each struct supplies only its field table, one `match` over its fields
//! ([`ArgsStruct`]) and one [`ArgProperty`] per field. serde's and schemars' derives would emit
//! all of that per struct (a key enum with its visitor, a struct visitor for maps and sequences,
//! a wrapper type per field for `deserialize_with` and another for `schema_with`), which was most
//! of what a tool cost to compile. Re-exported through [`crate::__private`]; not a public API.

use std::fmt;
use std::marker::PhantomData;

use schemars::_private::{
    get_title_and_description, insert_metadata_property_if_nonempty, insert_object_property,
};
use schemars::{Schema, SchemaGenerator};
use serde::Deserializer;
use serde::de::{
    self, DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Unexpected, Visitor,
};

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
    /// Whether a sequence of the field values in declaration order is read too, as serde's
    /// derive reads a struct (a `#[tool_type]` struct); an arguments struct takes a map only.
    const SEQUENCE: bool = false;
    /// One `Option` per field, `None` until the field's key is read.
    type Slots;

    /// All slots empty.
    fn slots() -> Self::Slots;

    /// Reads the value of field `index` (of [`FIELDS`](Self::FIELDS)) from `source` into its
    /// slot, through [`FieldSource::field`].
    ///
    /// # Errors
    /// The source's: `duplicate field`, a sequence too short, or the value's own error.
    fn read<'de, S: FieldSource<'de>>(
        slots: &mut Self::Slots,
        index: usize,
        source: &mut S,
    ) -> Result<(), S::Error>;

    /// The struct, with each absent field's default.
    ///
    /// # Errors
    /// `missing field` for an absent field without a default.
    fn finish<E: de::Error>(slots: Self::Slots) -> Result<Self, E>;
}

/// Where [`ArgsStruct::read`] takes a field's value from: the map being walked, or the sequence.
pub trait FieldSource<'de> {
    /// The deserializer's error.
    type Error: de::Error;

    /// Reads the next value into `slot`, the slot of the field `name`.
    ///
    /// # Errors
    /// `duplicate field` (map) when the slot is already filled, `invalid length` (sequence)
    /// when the sequence has ended, or the value's own error.
    fn field<T: de::Deserialize<'de>>(
        &mut self,
        slot: &mut Option<T>,
        name: &'static str,
    ) -> Result<(), Self::Error>;
}

/// The value after the key just read.
struct MapSource<'a, A>(&'a mut A);

impl<'de, A: MapAccess<'de>> FieldSource<'de> for MapSource<'_, A> {
    type Error = A::Error;

    fn field<T: de::Deserialize<'de>>(
        &mut self,
        slot: &mut Option<T>,
        name: &'static str,
    ) -> Result<(), A::Error> {
        vacant(slot, name)?;
        *slot = Some(self.0.next_value()?);
        Ok(())
    }
}

/// The next element, the value of field `index` of struct `T`.
struct SeqSource<'a, A, T> {
    seq: &'a mut A,
    index: usize,
    of: PhantomData<fn() -> T>,
}

impl<'de, A: SeqAccess<'de>, T: ArgsStruct> FieldSource<'de> for SeqSource<'_, A, T> {
    type Error = A::Error;

    fn field<V: de::Deserialize<'de>>(
        &mut self,
        slot: &mut Option<V>,
        _name: &'static str,
    ) -> Result<(), A::Error> {
        match self.seq.next_element()? {
            Some(value) => {
                *slot = Some(value);
                Ok(())
            }
            None => {
                // serde's derive: "struct T with 1 element" / "with N elements".
                let count = T::FIELDS.len();
                let plural = if count == 1 { "" } else { "s" };
                let expected = format!("struct {} with {count} element{plural}", T::STRUCT);
                Err(de::Error::invalid_length(self.index, &expected.as_str()))
            }
        }
    }
}

/// Reads `T` from a map (and from a sequence when [`ArgsStruct::SEQUENCE`]), as serde's derive
/// would with the same attributes, with the same error messages: `unknown field`, `duplicate
/// field`, `missing field`, `invalid length` and `invalid type: …, expected struct T`.
///
/// # Errors
/// The deserializer's error.
pub fn deserialize_args<'de, T: ArgsStruct, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    deserializer.deserialize_struct(T::STRUCT, T::FIELDS, ArgsVisitor::<T>(PhantomData))
}

/// Fails with `duplicate field` when `slot` is already filled.
fn vacant<T, E: de::Error>(slot: &Option<T>, field: &'static str) -> Result<(), E> {
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

/// The value of a field of a `#[tool_type]` struct, as serde's derive reads an absent one: the
/// type deserializes from nothing (an `Option` is `None`), else `missing field`.
///
/// # Errors
/// `missing field` when it was absent and the type needs a value.
pub fn present<T: DeserializeOwned, E: de::Error>(
    slot: Option<T>,
    field: &'static str,
) -> Result<T, E> {
    match slot {
        Some(value) => Ok(value),
        None => T::deserialize(Missing(field, PhantomData)),
    }
}

/// serde's stand-in for an absent field: `None` to an `Option`, `missing field` to anything else.
struct Missing<E>(&'static str, PhantomData<E>);

impl<'de, E: de::Error> Deserializer<'de> for Missing<E> {
    type Error = E;

    fn deserialize_any<V: Visitor<'de>>(self, _visitor: V) -> Result<V::Value, E> {
        Err(E::missing_field(self.0))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, E> {
        visitor.visit_none()
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string
        bytes byte_buf unit unit_struct newtype_struct seq tuple
        tuple_struct map struct enum identifier ignored_any
    }
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
                Some(index) => T::read(&mut slots, index, &mut MapSource(&mut map))?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        T::finish(slots)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<T, A::Error> {
        if !T::SEQUENCE {
            return Err(de::Error::invalid_type(Unexpected::Seq, &self));
        }
        let mut slots = T::slots();
        for index in 0..T::FIELDS.len() {
            let mut source = SeqSource::<A, T> {
                seq: &mut seq,
                index,
                of: PhantomData,
            };
            T::read(&mut slots, index, &mut source)?;
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
    /// A field of a `#[tool_type]` struct: optional in the deserialize view when its type reads
    /// an absent value (the type's `JsonSchema::_schemars_private_is_option`).
    WhenOptionDeserializing(fn() -> bool),
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
    /// The type's schema (through `ToolArg`, or `subschema_for`).
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
    let mut schema = object_schema(generator, deny_unknown, properties);
    insert_metadata_property_if_nonempty(&mut schema, "title", get_title_and_description(doc).0);
    schema
}

/// The schema of a plain `#[tool_type]` struct, as schemars' derive writes it: the object of
/// [`args_schema`], then the title and the description from the struct's doc comment `doc`.
pub fn type_schema(
    generator: &mut SchemaGenerator,
    doc: &str,
    deny_unknown: bool,
    properties: &[ArgProperty],
) -> Schema {
    let mut schema = object_schema(generator, deny_unknown, properties);
    let (title, description) = get_title_and_description(doc);
    insert_metadata_property_if_nonempty(&mut schema, "title", title);
    insert_metadata_property_if_nonempty(&mut schema, "description", description);
    schema
}

/// An object (closed when `deny_unknown`) of one property per field, each with its doc comment
/// as title and description, `required` for the fields that are not optional.
fn object_schema(
    generator: &mut SchemaGenerator,
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
            Optional::WhenOptionDeserializing(is_option) => {
                generator.contract().is_deserialize() && is_option()
            }
        };
        insert_object_property(&mut schema, property.name, optional, sub);
    }
    schema
}

#[cfg(test)]
mod tests;
