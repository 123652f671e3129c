//! How a `#[tool]`'s generated arguments struct is read: the map walk, the key lookup and the
//! errors live here, written once, and each tool supplies only its field table and one `match`
//! over its fields ([`ArgsStruct`]). serde's derive would emit all of that per tool (a key
//! enum with its visitor, a struct visitor for maps and sequences, and a wrapper type per field
//! for `deserialize_with`). Re-exported through [`crate::__private`]; not a public API.

use std::fmt;
use std::marker::PhantomData;

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
