use dsh_tools::{schemars, serde, serde_json, tool_type};

/// A plain struct: `#[tool_type]` reads and describes it without the derives.
///
/// Its second paragraph is the description.
#[tool_type]
#[derive(Debug, PartialEq)]
struct Plain {
    /// The name, prefixed.
    pub id: String,
    pub count: u64,
    /// A flag.
    ///
    /// Or nothing.
    pub r#type: Option<bool>,
}

/// A plain struct: `#[tool_type]` reads and describes it without the derives.
///
/// Its second paragraph is the description.
#[derive(serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(crate = "dsh_tools::serde", deny_unknown_fields)]
#[schemars(crate = "dsh_tools::schemars")]
struct Derived {
    /// The name, prefixed.
    pub id: String,
    pub count: u64,
    /// A flag.
    ///
    /// Or nothing.
    pub r#type: Option<bool>,
}

/// Open to unknown properties.
#[tool_type(allow_unknown)]
struct Open {
    pub id: String,
}

fn text<T: schemars::JsonSchema>(deserialize: bool) -> String {
    let settings = schemars::generate::SchemaSettings::draft2020_12();
    let settings = if deserialize {
        settings.for_deserialize()
    } else {
        settings.for_serialize()
    };
    serde_json::to_string(&settings.into_generator().into_root_schema_for::<T>()).unwrap()
}

fn read<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<(), String> {
    serde_json::from_value::<T>(value.clone())
        .map(drop)
        .map_err(|err| err.to_string().replace("Derived", "Plain"))
}

/// Runs the case.
pub(crate) fn main() {
    for deserialize in [true, false] {
        assert_eq!(
            text::<Plain>(deserialize),
            text::<Derived>(deserialize).replace("Derived", "Plain")
        );
    }
    for value in [
        serde_json::json!({"id": "a", "count": 1, "type": true}),
        serde_json::json!({"id": "a", "count": 1}),
        serde_json::json!(["a", 1, null]),
        serde_json::json!(["a"]),
        serde_json::json!({"count": 1}),
        serde_json::json!({"id": "a", "count": 1, "other": 2}),
        serde_json::json!("text"),
    ] {
        assert_eq!(
            read::<Plain>(&value),
            read::<Derived>(&value),
            "for {value}"
        );
    }
    let plain = Plain {
        id: "a".into(),
        count: 1,
        r#type: None,
    };
    let written = serde_json::to_value(&plain).unwrap();
    assert_eq!(serde_json::from_value::<Plain>(written).unwrap(), plain);
    assert!(serde_json::from_value::<Open>(serde_json::json!({"id": "a", "x": 1})).is_ok());
}
