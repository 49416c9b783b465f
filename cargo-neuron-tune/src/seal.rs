//! Seals: a checksum over what a file says, so that a file the tool later trusts is never
//! used after it was edited, truncated or damaged.
//!
//! Every file the tool writes and reads back — store entries, journal lines, tuned
//! databases, baselines — carries a schema version and a checksum. The checksum is xxh3-128
//! over a *canonical* JSON text of the sealed value (object keys sorted: `serde_json`'s map
//! is a `BTreeMap` here, and floats print in their shortest round-trip form), so a TOML
//! file re-read and re-serialized gives the same text, and the seal survives reformatting
//! by the TOML writer but not a changed value. A seal detects accidents and hand edits; it
//! is not a signature (anyone can recompute it).

use serde_json::{Map, Value};

/// The name of the checksum field in sealed journal lines and TOML records.
pub const FIELD: &str = "checksum";

/// xxh3-128 of `text`, as 32 hex digits.
pub fn checksum(text: &str) -> String {
    checksum_bytes(text.as_bytes())
}

/// xxh3-128 of `bytes`, as 32 hex digits (a file's content hash: the harness binary's).
pub fn checksum_bytes(bytes: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes))
}

/// The checksum of a JSON object's canonical text, its own `checksum` field left out.
fn checksum_of_object(obj: &Map<String, Value>) -> String {
    let mut obj = obj.clone();
    obj.remove(FIELD);
    checksum(&Value::Object(obj).to_string())
}

/// Seal a JSON object (a journal line): adds its `checksum` field.
pub fn seal_json(value: &mut Value) {
    if let Value::Object(obj) = value {
        let sum = checksum_of_object(obj);
        obj.insert(FIELD.into(), Value::String(sum));
    }
}

/// Check a sealed JSON object and take its seal off, or say why it cannot be trusted.
pub fn unseal_json(value: &mut Value) -> Result<(), String> {
    let Value::Object(obj) = value else { return Err("not a JSON object".into()) };
    let Some(Value::String(sum)) = obj.get(FIELD).cloned() else {
        return Err(format!("it has no `{FIELD}` (not written by this tool)"));
    };
    if checksum_of_object(obj) != sum {
        return Err("its checksum does not match its contents (edited or damaged)".into());
    }
    obj.remove(FIELD);
    Ok(())
}

/// The canonical JSON form of a TOML table.
fn json_of_toml(table: &toml::Table) -> Map<String, Value> {
    match serde_json::to_value(table) {
        Ok(Value::Object(obj)) => obj,
        // A TOML table is always a JSON object (TOML has no NaN keys or non-string keys).
        _ => Map::new(),
    }
}

/// Seal one record of a TOML file: adds its `checksum` key.
pub fn seal_toml(table: &mut toml::Table) {
    let sum = checksum_of_object(&json_of_toml(table));
    table.insert(FIELD.into(), toml::Value::String(sum));
}

/// Check a sealed TOML record and take its seal off, or say why it cannot be trusted.
pub fn unseal_toml(table: &mut toml::Table) -> Result<(), String> {
    let Some(toml::Value::String(sum)) = table.get(FIELD).cloned() else {
        return Err(format!("it has no `{FIELD}` (edited by hand, or written by an older tool)"));
    };
    if checksum_of_object(&json_of_toml(table)) != sum {
        return Err("its checksum does not match its contents (edited by hand or damaged)".into());
    }
    table.remove(FIELD);
    Ok(())
}

/// A TOML file of sealed records: `schema = N`, then an array of tables under `key`, each
/// record sealed on its own (so two branches adding different records merge cleanly).
pub fn write_sealed_toml<T: serde::Serialize>(
    schema: u32,
    key: &str,
    records: &[T],
) -> Result<String, String> {
    let mut array = Vec::with_capacity(records.len());
    for r in records {
        let mut t = toml::Table::try_from(r).map_err(|e| e.to_string())?;
        seal_toml(&mut t);
        array.push(toml::Value::Table(t));
    }
    let mut root = toml::Table::new();
    root.insert("schema".into(), toml::Value::Integer(schema.into()));
    root.insert(key.into(), toml::Value::Array(array));
    toml::to_string(&root).map_err(|e| e.to_string())
}

/// Why a sealed file cannot be used.
#[derive(Clone, Debug, PartialEq)]
pub enum Unreadable {
    /// Written by a newer cargo-neuron-tune: a schema above the one this tool reads. Nothing
    /// is known to be wrong with it, so it is neither used nor to be deleted or replaced:
    /// a newer tool reads it.
    Newer { schema: i64, reads: u32 },
    /// Not TOML (a merge conflict, a truncated file): what the parser says, on one line,
    /// and where (line and column, from 1) when it says.
    NotToml { at: Option<(usize, usize)>, message: String },
    /// TOML, but not a file of this kind: of an older or no schema, or of another layout.
    Damaged(String),
    /// One record cannot be trusted (its seal does not hold, its fields do not read): the
    /// file as a whole is fine, and the record is named.
    Record(Damaged),
}

impl Unreadable {
    /// `path:line:column: what` (`path:line: what` for a record, `path: what` when the
    /// place is not known): the first line of a message, as compilers write it. The advice,
    /// which differs by file, is the caller's.
    pub fn located(&self, path: &std::path::Path) -> String {
        let path = path.display();
        match self {
            Unreadable::NotToml { at: Some((line, col)), message } => {
                format!("{path}:{line}:{col}: {message}")
            }
            Unreadable::Record(Damaged { line: Some(line), message, .. }) => {
                format!("{path}:{line}: {message}")
            }
            other => format!("{path}: {other}"),
        }
    }
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Newer { schema, reads } => write!(
                f,
                "written by a newer cargo-neuron-tune (schema {schema}; this tool reads \
                 {reads}): upgrade cargo-neuron-tune"
            ),
            Unreadable::NotToml { message, .. } => write!(f, "not TOML: {message}"),
            Unreadable::Damaged(why) => f.write_str(why),
            Unreadable::Record(d) => f.write_str(&d.message),
        }
    }
}

/// The parser's error as [`Unreadable::NotToml`]: its message on one line (the parser's
/// own rendering quotes the source over several, which the `path:line:column` replaces) and
/// its place in `text`.
fn not_toml(text: &str, e: &toml::de::Error) -> Unreadable {
    let message = e.message().lines().map(str::trim).filter(|l| !l.is_empty());
    let message = message.collect::<Vec<_>>().join("; ");
    let at = e.span().map(|span| {
        // (A byte offset; one inside a character, which a parser should not give, is
        // taken back to the character's start rather than panic.)
        let mut start = span.start.min(text.len());
        while !text.is_char_boundary(start) {
            start -= 1;
        }
        let before = &text[..start];
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
        (line, col)
    });
    Unreadable::NotToml { at, message }
}

/// Read a file written by [`write_sealed_toml`]: its schema must be `schema` and every
/// record's seal must hold. The error names the record (by `describe`) and says what is
/// wrong; the caller adds the path and what to do (which differs for a newer file).
pub fn read_sealed_toml<T: serde::de::DeserializeOwned>(
    text: &str,
    schema: u32,
    key: &str,
    describe: impl Fn(&toml::Table) -> String,
) -> Result<Vec<T>, Unreadable> {
    let (records, damaged) = read_sealed_toml_records(text, schema, key, describe)?;
    match damaged.into_iter().next() {
        Some(d) => Err(Unreadable::Record(d)),
        None => Ok(records),
    }
}

/// A record of a sealed file that cannot be trusted: what is wrong (naming it), its fields
/// as written (to tell which record it was) and the line of its header (`[[key]]`) when
/// the file has one per record, as the tool writes it.
#[derive(Clone, Debug, PartialEq)]
pub struct Damaged {
    pub message: String,
    pub fields: toml::Table,
    pub line: Option<usize>,
}

/// [`read_sealed_toml`], keeping what can be trusted: the intact records, and each
/// damaged one apart. An error only when the file as a whole cannot be read (not TOML,
/// another schema, another layout): then no record can be told from another. A schema
/// above `schema` is [`Unreadable::Newer`], before anything else of the file is judged (a
/// newer tool may have changed its layout too).
pub fn read_sealed_toml_records<T: serde::de::DeserializeOwned>(
    text: &str,
    schema: u32,
    key: &str,
    describe: impl Fn(&toml::Table) -> String,
) -> Result<(Vec<T>, Vec<Damaged>), Unreadable> {
    let mut root: toml::Table = toml::from_str(text).map_err(|e| not_toml(text, &e))?;
    let refuse = |why: String| Err(Unreadable::Damaged(why));
    match root.remove("schema") {
        Some(toml::Value::Integer(n)) if n == i64::from(schema) => {}
        Some(toml::Value::Integer(n)) if n > i64::from(schema) => {
            return Err(Unreadable::Newer { schema: n, reads: schema })
        }
        Some(v) => return refuse(format!("schema {v} (this tool reads schema {schema})")),
        None => return refuse(format!("no `schema` (this tool reads schema {schema})")),
    }
    let records = match root.remove(key) {
        None => Vec::new(),
        Some(toml::Value::Array(a)) => a,
        Some(_) => return refuse(format!("`{key}` is not an array of tables")),
    };
    if let Some(other) = root.keys().next() {
        return refuse(format!("unknown key `{other}`"));
    }
    // The line of each `[[key]]` header: the records' own lines, in order, when every
    // record has one (not when some are written inline).
    let header = format!("[[{key}]]");
    let headers: Vec<usize> = (text.lines().enumerate())
        .filter(|(_, l)| l.trim() == header)
        .map(|(i, _)| i + 1)
        .collect();
    let lines = (headers.len() == records.len()).then_some(headers);
    let (mut intact, mut damaged) = (Vec::new(), Vec::new());
    for (i, r) in records.into_iter().enumerate() {
        let toml::Value::Table(mut t) = r else {
            return refuse(format!("{key} #{} is not a table", i + 1));
        };
        let what = format!("{key} #{} ({})", i + 1, describe(&t));
        let fields = t.clone();
        let read = unseal_toml(&mut t).map_err(|why| format!("{what}: {why}")).and_then(|()| {
            T::deserialize(toml::Value::Table(t)).map_err(|e| format!("{what}: {e}"))
        });
        match read {
            Ok(record) => intact.push(record),
            Err(message) => {
                let line = lines.as_ref().map(|l| l[i]);
                damaged.push(Damaged { message, fields, line })
            }
        }
    }
    Ok((intact, damaged))
}

/// `a/b/c` from the string values of `keys` in a record, for naming it in a message.
pub fn describe_keys(t: &toml::Table, keys: &[&str]) -> String {
    keys.iter()
        .map(|k| t.get(*k).and_then(|v| v.as_str()).unwrap_or("?"))
        .collect::<Vec<_>>()
        .join("/")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_json_seal_catches_any_changed_value_and_survives_key_order() {
        let mut v = serde_json::json!({"n": 3, "time_us": 12.25, "status": "measured"});
        seal_json(&mut v);
        let text = v.to_string();
        let mut back: Value = serde_json::from_str(&text).unwrap();
        unseal_json(&mut back).unwrap();
        assert_eq!(back, serde_json::json!({"n": 3, "time_us": 12.25, "status": "measured"}));
        // Another key order in the text is the same object.
        let reordered =
            format!(r#"{{"status":"measured","time_us":12.25,"{FIELD}":{},"n":3}}"#, v[FIELD]);
        unseal_json(&mut serde_json::from_str(&reordered).unwrap()).unwrap();
        let mut edited: Value = serde_json::from_str(&text.replace("12.25", "1.25")).unwrap();
        assert!(unseal_json(&mut edited).unwrap_err().contains("does not match"));
        let mut bare = serde_json::json!({"n": 3});
        assert!(unseal_json(&mut bare).unwrap_err().contains("no `checksum`"));
    }

    #[test]
    fn a_toml_seal_survives_the_toml_writer_and_catches_an_edit() {
        let mut t: toml::Table =
            toml::from_str("kernel = \"gemm\"\ntime_us = 6147.1\n[params]\ntile = 512\n").unwrap();
        seal_toml(&mut t);
        let text = toml::to_string(&t).unwrap();
        let mut back: toml::Table = toml::from_str(&text).unwrap();
        unseal_toml(&mut back).unwrap();
        assert_eq!(back["params"]["tile"].as_integer(), Some(512));
        let mut edited: toml::Table =
            toml::from_str(&text.replace("tile = 512", "tile = 256")).unwrap();
        assert!(unseal_toml(&mut edited).is_err());
    }

    /// A schema above the tool's is a newer tool's file, told apart from a damaged one (whose
    /// callers advise deleting or replacing it); an older or odd one is not.
    #[test]
    fn a_newer_schema_is_told_apart_from_damage() {
        let read = |text: &str| read_sealed_toml::<toml::Table>(text, 1, "tuned", |_| "?".into());
        let newer = read("schema = 99\n[[tuned]]\nwhatever = 1\n").unwrap_err();
        assert_eq!(newer, Unreadable::Newer { schema: 99, reads: 1 });
        assert_eq!(
            newer.to_string(),
            "written by a newer cargo-neuron-tune (schema 99; this tool reads 1): upgrade \
             cargo-neuron-tune"
        );
        for (text, why) in [
            ("schema = 0\n", "schema 0 (this tool reads schema 1)"),
            ("schema = \"2\"\n", "schema \"2\" (this tool reads schema 1)"),
            ("tuned = 1\n", "no `schema`"),
            ("schema = 1\nother = 2\n", "unknown key `other`"),
        ] {
            match read(text).unwrap_err() {
                Unreadable::Damaged(m) => assert!(m.contains(why), "{text:?}: {m}"),
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    /// What the parser says goes on the first line as `path:line:column: message`, on one
    /// line (the parser's own rendering quotes the source over several); a damaged record
    /// is named with the line of its header.
    #[test]
    fn a_file_that_is_not_toml_or_a_damaged_record_is_located() {
        let read = |text: &str| {
            read_sealed_toml::<toml::Table>(text, 1, "tuned", |t| describe_keys(t, &["kernel"]))
        };
        let path = std::path::Path::new("crate/neuron-tune.tuned.toml");
        let e = read("schema = 1\n\ngarbage [[[\n").unwrap_err();
        let Unreadable::NotToml { at, .. } = &e else { panic!("{e:?}") };
        assert_eq!(*at, Some((3, 9)), "{e:?}");
        let first = e.located(path);
        assert!(first.starts_with("crate/neuron-tune.tuned.toml:3:9: "), "{first}");
        assert!(!first.contains('\n') && !first.contains('|'), "{first}");
        let mut good = toml::Table::new();
        good.insert("kernel".into(), toml::Value::String("add".into()));
        seal_toml(&mut good);
        let text = write_sealed_toml(1, "tuned", &[good.clone(), good.clone()]).unwrap();
        let sum = good["checksum"].as_str().unwrap().to_string();
        let (first_sum, second) = text.split_once(&sum).unwrap();
        let text = format!("{first_sum}{sum}{}", second.replacen(&sum, "0", 1));
        let e = read(&text).unwrap_err();
        assert!(matches!(e, Unreadable::Record(_)), "{e:?}");
        let header = text.lines().enumerate().filter(|(_, l)| *l == "[[tuned]]").nth(1);
        let want =
            format!("crate/neuron-tune.tuned.toml:{}: tuned #2 (add): ", header.unwrap().0 + 1);
        assert!(e.located(path).starts_with(&want), "{}\n{text}", e.located(path));
    }

    proptest! {
        /// Whatever the values, a sealed record written as TOML and read back unseals to
        /// exactly what was sealed (floats included: the seal must not reject its own files).
        #[test]
        fn sealed_toml_round_trips(
            time in proptest::num::f64::NORMAL | proptest::num::f64::ZERO,
            n in any::<i64>(),
            name in "k_[a-z]{1,10}",
        ) {
            let mut t = toml::Table::new();
            t.insert("time_us".into(), toml::Value::Float(time));
            t.insert("n".into(), toml::Value::Integer(n));
            t.insert(name.clone(), toml::Value::String(name.clone()));
            let original = t.clone();
            seal_toml(&mut t);
            let mut back: toml::Table = toml::from_str(&toml::to_string(&t).unwrap()).unwrap();
            prop_assert_eq!(unseal_toml(&mut back), Ok(()));
            prop_assert_eq!(back, original);
        }
    }
}
