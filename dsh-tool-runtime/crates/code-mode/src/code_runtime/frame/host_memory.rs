//! How much host memory a call's arguments may take to decode, and what decoding a JSON text
//! would take, counted without building its tree.

use serde_json::Value;

/// Host memory a call's decoded arguments may take per byte of its frame, past
/// [`ALLOWANCE_FLOOR`]: with the frame's own buffer, a call frame at the 1 MiB frame cap costs
/// the host at most about 3 × its bytes (SPEC §8.1: ≤ ~4×).
pub const ALLOWANCE_PER_BYTE: usize = 2;

/// Host memory a call's decoded arguments may always take, bytes, whatever its frame's size:
/// the arguments of any frame up to about 13 KB decode whatever they
/// hold, and small values nested thousands of levels deep do.
pub const ALLOWANCE_FLOOR: usize = 2 << 20;

/// Host memory the arguments of a call frame of `len` bytes may take to decode.
pub(super) fn call_allowance(len: usize) -> usize {
    len.saturating_mul(ALLOWANCE_PER_BYTE).max(ALLOWANCE_FLOOR)
}

/// The most [`decoded_size`] counts per byte of text: one-element arrays nested in each other
/// (`[[[0]]]`) take 2 bytes a level for a vector of 4 slots; a nested object takes 5 (`{"":`
/// and `}`) for 4 members; string bytes cost one each.
const MOST_PER_BYTE: usize = {
    let array = 4 * std::mem::size_of::<Value>() / 2;
    let object = (4 * MEMBER).div_ceil(5);
    if array > object { array } else { object }
};

/// Arguments up to this long stay within [`call_allowance`] whatever they hold, so their size
/// need not be measured before decoding (a call frame is usually far shorter).
pub(super) const ALWAYS_AFFORDABLE: usize =
    (ALLOWANCE_FLOOR - std::mem::size_of::<Value>()) / MOST_PER_BYTE;

/// Whether decoding JSON `text` into a [`Value`] takes at most `bound` bytes of host memory (as
/// [`decoded_size`] counts it); text too short to reach `bound` whatever it holds is not
/// measured. `false` for text that is not JSON.
pub(crate) fn decodes_within(text: &[u8], bound: usize) -> bool {
    text.len() <= bound.saturating_sub(std::mem::size_of::<Value>()) / MOST_PER_BYTE
        || decoded_size(text).is_some_and(|size| size <= bound)
}

/// The most slots a vector (or map) of `n` items grown one push at a time holds: none when
/// empty, at least 4, at most twice `n`.
fn capacity(n: usize) -> usize {
    if n == 0 {
        0
    } else {
        n.saturating_mul(2).max(4)
    }
}

/// Host memory per slot of an object: its entry (hash, key, value) and its index (a `usize` and
/// a control byte).
const MEMBER: usize = 8
    + std::mem::size_of::<String>()
    + std::mem::size_of::<Value>()
    + std::mem::size_of::<usize>()
    + 1;

/// Upper bound of the host memory that decoding `line` into a [`Value`] takes, without
/// building it: per array or object its slots as grown one push at a time ([`capacity`]: at
/// least 4, up to twice its items), plus string bytes. `None` for text that is not JSON.
pub(super) fn decoded_size(line: &[u8]) -> Option<usize> {
    struct Cost(usize);
    impl<'de> serde::de::DeserializeSeed<'de> for &mut Cost {
        type Value = ();
        fn deserialize<D: serde::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
            d.deserialize_any(self)
        }
    }
    impl<'de> serde::de::Visitor<'de> for &mut Cost {
        type Value = ();
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("JSON")
        }
        fn visit_bool<E>(self, _: bool) -> Result<(), E> {
            Ok(())
        }
        fn visit_i64<E>(self, _: i64) -> Result<(), E> {
            Ok(())
        }
        fn visit_u64<E>(self, _: u64) -> Result<(), E> {
            Ok(())
        }
        fn visit_f64<E>(self, _: f64) -> Result<(), E> {
            Ok(())
        }
        fn visit_unit<E>(self) -> Result<(), E> {
            Ok(())
        }
        fn visit_str<E>(self, s: &str) -> Result<(), E> {
            self.0 += s.len();
            Ok(())
        }
        fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
            let mut n = 0;
            while seq.next_element_seed(&mut *self)?.is_some() {
                n += 1;
            }
            self.0 += capacity(n) * std::mem::size_of::<Value>();
            Ok(())
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            let mut n = 0;
            while map.next_key_seed(&mut *self)?.is_some() {
                map.next_value_seed(&mut *self)?;
                n += 1;
            }
            self.0 += capacity(n) * MEMBER;
            Ok(())
        }
    }
    let mut cost = Cost(0);
    let mut de = serde_json::Deserializer::from_slice(line);
    de.disable_recursion_limit();
    serde::de::DeserializeSeed::deserialize(&mut cost, serde_stacker::Deserializer::new(&mut de))
        .ok()?;
    Some(cost.0 + std::mem::size_of::<Value>())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_under_the_affordable_length_cannot_exceed_the_allowance() {
        let fill = |open: &str, item: &str, close: &str| {
            let mut line = String::from(open);
            while line.len() + item.len() + close.len() < ALWAYS_AFFORDABLE {
                line.push_str(item);
            }
            line.pop();
            line.push_str(close);
            line
        };
        for line in [
            fill("[", "0,", "]"),
            fill("[", "[],", "]"),
            fill("{", r#""":0,"#, "}"),
            fill("[", r#""","#, "]"),
        ] {
            assert!(line.len() <= ALWAYS_AFFORDABLE);
            let size = decoded_size(line.as_bytes()).expect("JSON");
            assert!(
                size <= call_allowance(line.len()),
                "{size} bytes for a {}-byte line",
                line.len()
            );
            assert!(
                size > ALLOWANCE_FLOOR / 4,
                "the worst cases come near the allowance"
            );
        }
    }
}
