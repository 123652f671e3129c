//! The readers and schemas of `private_args` against serde's and schemars' derives.

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

    fn read<'de, S: FieldSource<'de>>(
        slots: &mut Self::Slots,
        index: usize,
        source: &mut S,
    ) -> Result<(), S::Error> {
        match index {
            0 => source.field(&mut slots.0, "name"),
            1 => source.field(&mut slots.1, "count"),
            _ => source.field(&mut slots.2, "flag"),
        }
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
        fn read<'de, S: FieldSource<'de>>(
            (): &mut (),
            _: usize,
            _: &mut S,
        ) -> Result<(), S::Error> {
            Ok(())
        }
        fn finish<E: de::Error>((): ()) -> Result<Self, E> {
            Ok(Self)
        }
    }
    assert!(deserialize_args::<Open, _>(json!({"any": [1, {"x": 2}]})).is_ok());
    assert!(deserialize_args::<Args, _>(json!({"name": "a", "any": 1})).is_err());
}

/// What `#[tool_type]` writes for a plain struct, by hand, beside the derives it replaces.
mod plain_type {
    use super::*;

    /// The output.
    ///
    /// What a tool answers.
    #[derive(Debug, PartialEq)]
    struct Out {
        id: String,
        count: u64,
        ok: Option<bool>,
    }

    impl<'de> serde::Deserialize<'de> for Out {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
            deserialize_args(deserializer)
        }
    }

    impl ArgsStruct for Out {
        // Named as the derived twin below, so that their messages compare equal.
        const STRUCT: &'static str = "Derived";
        const FIELDS: &'static [&'static str] = &["id", "count", "ok"];
        const DENY_UNKNOWN: bool = true;
        const SEQUENCE: bool = true;
        type Slots = (Option<String>, Option<u64>, Option<Option<bool>>);

        fn slots() -> Self::Slots {
            (None, None, None)
        }

        fn read<'de, S: FieldSource<'de>>(
            slots: &mut Self::Slots,
            index: usize,
            source: &mut S,
        ) -> Result<(), S::Error> {
            match index {
                0 => source.field(&mut slots.0, "id"),
                1 => source.field(&mut slots.1, "count"),
                _ => source.field(&mut slots.2, "ok"),
            }
        }

        fn finish<E: de::Error>(slots: Self::Slots) -> Result<Self, E> {
            Ok(Self {
                id: present(slots.0, "id")?,
                count: present(slots.1, "count")?,
                ok: present(slots.2, "ok")?,
            })
        }
    }

    /// The output.
    ///
    /// What a tool answers.
    #[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
    #[serde(deny_unknown_fields)]
    struct Derived {
        /// The name, prefixed.
        id: String,
        count: u64,
        /// A flag.
        ///
        /// Or nothing.
        ok: Option<bool>,
    }

    fn both(value: serde_json::Value) -> (Result<Out, String>, Result<Derived, String>) {
        (
            serde_json::from_value::<Out>(value.clone()).map_err(|err| err.to_string()),
            serde_json::from_value::<Derived>(value).map_err(|err| err.to_string()),
        )
    }

    #[test]
    fn reads_and_refuses_what_the_derive_does() {
        for value in [
            json!({"id": "a", "count": 1, "ok": true}),
            json!({"id": "a", "count": 1}),
            json!(["a", 1, null]),
            json!(["a", 1, false, "extra"]),
            json!(["a", 1]),
            json!([]),
            json!({"count": 1}),
            json!({"id": "a", "count": 1, "other": 2}),
            json!({"id": 3, "count": 1}),
            json!(7),
        ] {
            let (ours, derived) = both(value.clone());
            let ours = ours.map(|out| (out.id, out.count, out.ok));
            let derived = derived.map(|out| (out.id, out.count, out.ok));
            assert_eq!(ours, derived, "for {value}");
        }
        let duplicate = r#"{"id": "a", "id": "b", "count": 1}"#;
        assert_eq!(
            serde_json::from_str::<Out>(duplicate)
                .unwrap_err()
                .to_string(),
            serde_json::from_str::<Derived>(duplicate)
                .unwrap_err()
                .to_string()
        );
    }

    #[test]
    fn the_schema_is_the_one_the_derive_writes() {
        let properties = [
            ArgProperty {
                name: "id",
                optional: Optional::WhenOptionDeserializing(
                    <String as schemars::JsonSchema>::_schemars_private_is_option,
                ),
                doc: Some("The name, prefixed."),
                description: None,
                schema: SchemaGenerator::subschema_for::<String>,
                mutate: None,
            },
            ArgProperty {
                name: "count",
                optional: Optional::WhenOptionDeserializing(
                    <u64 as schemars::JsonSchema>::_schemars_private_is_option,
                ),
                doc: None,
                description: None,
                schema: SchemaGenerator::subschema_for::<u64>,
                mutate: None,
            },
            ArgProperty {
                name: "ok",
                optional: Optional::WhenOptionDeserializing(
                    <Option<bool> as schemars::JsonSchema>::_schemars_private_is_option,
                ),
                doc: Some("A flag.\n\nOr nothing."),
                description: None,
                schema: SchemaGenerator::subschema_for::<Option<bool>>,
                mutate: None,
            },
        ];
        for settings in [
            schemars::generate::SchemaSettings::draft2020_12().for_deserialize(),
            schemars::generate::SchemaSettings::draft2020_12().for_serialize(),
        ] {
            let mut ours = SchemaGenerator::new(settings.clone());
            let mut derived = SchemaGenerator::new(settings);
            let ours = type_schema(
                &mut ours,
                "The output.\n\nWhat a tool answers.",
                true,
                &properties,
            );
            let derived = <Derived as schemars::JsonSchema>::json_schema(&mut derived);
            // Key order included: the schema reaches the model as text.
            assert_eq!(
                serde_json::to_string(&ours).unwrap(),
                serde_json::to_string(&derived).unwrap()
            );
        }
    }
}
