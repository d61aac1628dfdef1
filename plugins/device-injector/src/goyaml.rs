//! YAML decoding with the rules of the Go plugin (`sigs.k8s.io/yaml`: YAML turned
//! into JSON, then decoded by `encoding/json` into a typed value):
//!
//! * struct field names match case-insensitively when no exact match exists
//!   (`Name:` fills `name`), unknown fields are ignored;
//! * a number or boolean given where a string is expected becomes its text
//!   (`net.core.somaxconn: 256` is the string `"256"`);
//! * `null` leaves a value at its zero value; an empty document decodes to the zero value;
//! * plain scalars follow YAML 1.1 (`0644` is octal, `1_000` is 1000, `yes` is
//!   true) and quoted ones are strings, which a numeric field refuses: the
//!   document is read by [`nri_plugin_util::go_yaml_load`].
//!
//! A [`Shape`] describes the target type for these rules; serde then decodes the
//! normalized JSON value.

use nri_plugin_util::{go_integral, go_yaml_load};
use serde::de::DeserializeOwned;
use serde_json::{Map, Number, Value};
use serde_norway::Value as Yaml;

/// The shape of a decoding target.
#[derive(Debug)]
pub enum Shape {
    /// A string: scalars are turned into their text.
    Str,
    /// A number or boolean.
    Scalar,
    /// A struct with these (JSON) field names.
    Struct(&'static [(&'static str, Shape)]),
    /// A list of elements of a shape.
    List(&'static Shape),
    /// A map from strings to values of a shape.
    Map(&'static Shape),
}

/// Decodes `text` as YAML into `T`, with the Go rules for `shape`.
///
/// ```
/// use nri_plugin_device_injector::goyaml::{decode, Shape};
/// use std::collections::BTreeMap;
///
/// static SYSCTL: Shape = Shape::Map(&Shape::Str);
/// let m: BTreeMap<String, String> = decode("net.core.somaxconn: 256", &SYSCTL).unwrap();
/// assert_eq!(m["net.core.somaxconn"], "256");
/// ```
pub fn decode<T: DeserializeOwned + Default>(text: &str, shape: &Shape) -> Result<T, String> {
    let yaml: Yaml = go_yaml_load(text).map_err(|e| e.to_string())?;
    if yaml.is_null() {
        return Ok(T::default());
    }
    let json = normalize(yaml, Some(shape))?;
    serde_json::from_value(json).map_err(|e| e.to_string())
}

fn normalize(yaml: Yaml, shape: Option<&Shape>) -> Result<Value, String> {
    Ok(match yaml {
        Yaml::Null => zero(shape),
        Yaml::Bool(b) => match shape {
            Some(Shape::Str) => Value::String(b.to_string()),
            _ => Value::Bool(b),
        },
        Yaml::Number(n) => number(&n, shape),
        // Quoted text, or plain text that is no number: a JSON string, which Go
        // refuses for a number.
        Yaml::String(s) => Value::String(s),
        Yaml::Sequence(items) => {
            let elem = match shape {
                Some(Shape::List(elem)) => Some(*elem),
                _ => None,
            };
            let list = items
                .into_iter()
                .map(|item| normalize(item, elem))
                .collect::<Result<Vec<_>, _>>()?;
            Value::Array(list)
        }
        Yaml::Mapping(mapping) => {
            let mut out = Map::new();
            for (key, value) in mapping {
                let key = key_text(&key)?;
                match shape {
                    Some(Shape::Struct(fields)) => {
                        let Some((name, field)) = find_field(fields, &key) else {
                            continue; // unknown fields are ignored
                        };
                        if value.is_null() {
                            continue; // null leaves the field alone
                        }
                        let value = normalize(value, Some(field))?;
                        if let (Shape::Scalar, Value::String(text)) = (field, &value) {
                            // Go: "cannot unmarshal string into Go struct field".
                            return Err(format!(
                                "field {name}: invalid type: string {text:?}, expected a number"
                            ));
                        }
                        out.insert(name.to_string(), value);
                    }
                    Some(Shape::Map(elem)) => {
                        out.insert(key, normalize(value, Some(elem))?);
                    }
                    _ => {
                        out.insert(key, normalize(value, None)?);
                    }
                }
            }
            Value::Object(out)
        }
        Yaml::Tagged(tagged) => normalize(tagged.value, shape)?,
    })
}

/// The zero value of a shape (what Go leaves in place for `null`).
fn zero(shape: Option<&Shape>) -> Value {
    match shape {
        Some(Shape::Str) => Value::String(String::new()),
        Some(Shape::Struct(_)) | Some(Shape::Map(_)) => Value::Object(Map::new()),
        Some(Shape::List(_)) => Value::Array(Vec::new()),
        Some(Shape::Scalar) => Value::Number(Number::from(0)),
        None => Value::Null,
    }
}

fn number(n: &serde_norway::Number, shape: Option<&Shape>) -> Value {
    let text = || {
        if let Some(i) = n.as_i64() {
            i.to_string()
        } else if let Some(u) = n.as_u64() {
            u.to_string()
        } else {
            n.as_f64().map(go_float32_text).unwrap_or_default()
        }
    };
    if let Some(Shape::Str) = shape {
        return Value::String(text());
    }
    if let Some(i) = n.as_i64() {
        Value::Number(i.into())
    } else if let Some(u) = n.as_u64() {
        Value::Number(u.into())
    } else if let Some(i) = n
        .as_f64()
        .and_then(go_integral)
        .filter(|_| matches!(shape, Some(Shape::Scalar)))
        .and_then(|i| i64::try_from(i).ok())
    {
        // `1e3` for an integer: JSON `1000`, which Go's decoding accepts.
        Value::Number(i.into())
    } else {
        n.as_f64()
            .and_then(Number::from_f64)
            .map(Value::Number)
            .unwrap_or(Value::Null)
    }
}

/// A float as `strconv.FormatFloat(f, 'g', -1, 32)` writes it, for the common cases.
fn go_float32_text(f: f64) -> String {
    if f.is_nan() {
        return "NaN".into();
    }
    if f.is_infinite() {
        return if f > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        };
    }
    format!("{}", f as f32)
}

/// A mapping key as text: strings, numbers and booleans are accepted.
fn key_text(key: &Yaml) -> Result<String, String> {
    match key {
        Yaml::String(s) => Ok(s.clone()),
        Yaml::Bool(b) => Ok(b.to_string()),
        Yaml::Number(n) => match number(n, Some(&Shape::Str)) {
            Value::String(s) => Ok(s),
            _ => Err(format!("unsupported map key {n}")),
        },
        other => Err(format!("unsupported map key {other:?}")),
    }
}

/// The field `key` names: an exact match, else a case-insensitive one.
fn find_field<'a>(
    fields: &'a [(&'static str, Shape)],
    key: &str,
) -> Option<(&'static str, &'a Shape)> {
    fields
        .iter()
        .find(|(name, _)| *name == key)
        .or_else(|| {
            fields
                .iter()
                .find(|(name, _)| name.eq_ignore_ascii_case(key))
        })
        .map(|(name, shape)| (*name, shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use std::collections::BTreeMap;

    #[derive(Debug, Default, Deserialize, PartialEq)]
    #[serde(default)]
    struct Item {
        name: String,
        count: i64,
        tags: Vec<String>,
    }

    static ITEM: Shape = Shape::Struct(&[
        ("name", Shape::Str),
        ("count", Shape::Scalar),
        ("tags", Shape::List(&Shape::Str)),
    ]);
    static ITEMS: Shape = Shape::List(&ITEM);

    #[test]
    fn field_names_fold_case_and_unknown_fields_are_ignored() {
        let items: Vec<Item> = decode(
            "- Name: a\n  COUNT: 2\n  extra: x\n- name: b\n  tags: [1, true]",
            &ITEMS,
        )
        .unwrap();
        assert_eq!(
            items,
            vec![
                Item {
                    name: "a".into(),
                    count: 2,
                    tags: vec![]
                },
                Item {
                    name: "b".into(),
                    count: 0,
                    tags: vec!["1".into(), "true".into()]
                },
            ]
        );
    }

    #[test]
    fn exact_field_name_wins() {
        let item: Item = decode("NAME: upper\nname: exact", &ITEM).unwrap();
        assert_eq!(item.name, "exact");
    }

    #[test]
    fn null_and_empty_give_zero_values() {
        let items: Vec<Item> = decode("", &ITEMS).unwrap();
        assert!(items.is_empty());
        let item: Item = decode("name: ~\ncount: 3", &ITEM).unwrap();
        assert_eq!(
            item,
            Item {
                count: 3,
                ..Item::default()
            }
        );
        let items: Vec<Item> = decode("- ~", &ITEMS).unwrap();
        assert_eq!(items, vec![Item::default()]);
    }

    #[test]
    fn scalars_become_strings_for_string_targets() {
        static MAP: Shape = Shape::Map(&Shape::Str);
        let m: BTreeMap<String, String> = decode("a: 256\nb: 1.5\nc: false\nd: ~", &MAP).unwrap();
        assert_eq!(m["a"], "256");
        assert_eq!(m["b"], "1.5");
        assert_eq!(m["c"], "false");
        assert_eq!(m["d"], "");
    }

    #[test]
    fn yaml11_integers_for_numeric_targets() {
        let item: Item = decode("count: 0640", &ITEM).unwrap();
        assert_eq!(item.count, 0o640);
        let item: Item = decode("count: 1_000", &ITEM).unwrap();
        assert_eq!(item.count, 1000);
        // A plain YAML 1.1 number given for a string is its decimal text, as
        // `sigs.k8s.io/yaml` writes it; quoted, it is the text as written.
        let item: Item = decode("name: 0640", &ITEM).unwrap();
        assert_eq!(item.name, "416");
        let item: Item = decode("name: '0640'\ntags: [yes, 1_0, \"0x1\"]", &ITEM).unwrap();
        assert_eq!(item.name, "0640");
        assert_eq!(item.tags, ["true", "10", "0x1"]);
        let item: Item = decode("count: 1e3", &ITEM).unwrap();
        assert_eq!(item.count, 1000);
        assert!(decode::<Item>("count: 1.5", &ITEM).is_err());
    }

    #[test]
    fn quoted_numbers_are_refused_for_numeric_targets_as_in_go() {
        for text in [
            r#"count: "1""#,
            "count: '5'",
            r#"count: "1e3""#,
            r#"count: "0640""#,
            "count: '1_000'",
            r#"count: "0b101""#,
        ] {
            let err = decode::<Item>(text, &ITEM).unwrap_err();
            assert!(err.contains("invalid type: string"), "{text}: {err}");
        }
        // For a string target, quoted or not, a number is its text.
        let item: Item = decode(r#"name: "1""#, &ITEM).unwrap();
        assert_eq!(item.name, "1");
    }

    #[test]
    fn type_errors_are_reported() {
        let err = decode::<Item>("count: many", &ITEM).unwrap_err();
        assert!(err.contains("invalid type"), "{err}");
        let err = decode::<Vec<Item>>("name: not-a-list", &ITEMS).unwrap_err();
        assert!(err.contains("invalid type"), "{err}");
        assert!(decode::<Item>("[unclosed", &ITEM).is_err());
    }
}
