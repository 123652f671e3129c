use dsh_tools::tool;

// Qualified, and with the `crate = …` attributes: still the root derives.
#[derive(dsh_tools::Deserialize, dsh_tools::JsonSchema)]
#[serde(crate = "dsh_tools::serde", rename_all = "snake_case")]
#[schemars(crate = "dsh_tools::schemars")]
enum Unit {
    Celsius,
    Fahrenheit,
}

/// Read the thermometer.
#[tool]
async fn thermometer(unit: Unit) -> f64 {
    match unit {
        Unit::Celsius => 21.0,
        Unit::Fahrenheit => 69.8,
    }
}

fn main() {}
