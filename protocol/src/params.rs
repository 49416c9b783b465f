//! Typed kernel parameters and named problem shapes, as both sides of the protocol see them.
//!
//! A kernel declares its parameters ([`ParamSpec`]); a variant carries concrete values
//! ([`Params`]); a problem size is a [`Shape`] (named dims, e.g. `m`, `k`, `n`). Both are
//! ordered maps so they print, hash and serialize the same way every time.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// A parameter value.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ParamValue {
    Bool(bool),
    Int(i64),
    Str(String),
}

macro_rules! int_param_value {
    ($($t:ty),*) => {$(
        impl From<$t> for ParamValue {
            fn from(v: $t) -> Self {
                ParamValue::Int(v.into())
            }
        }
    )*};
}
int_param_value!(i64, i32, u32);

impl From<bool> for ParamValue {
    fn from(v: bool) -> Self {
        ParamValue::Bool(v)
    }
}
impl From<&str> for ParamValue {
    fn from(v: &str) -> Self {
        ParamValue::Str(v.to_string())
    }
}
impl From<String> for ParamValue {
    fn from(v: String) -> Self {
        ParamValue::Str(v)
    }
}

impl fmt::Display for ParamValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamValue::Bool(b) => write!(f, "{b}"),
            ParamValue::Int(i) => write!(f, "{i}"),
            ParamValue::Str(s) => write!(f, "{s}"),
        }
    }
}

/// The type of a parameter.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "type", content = "choices")]
pub enum ParamKind {
    Int,
    Bool,
    /// One of these strings.
    Choice(Vec<String>),
}

impl ParamKind {
    /// Whether `v` is a value of this kind.
    pub fn accepts(&self, v: &ParamValue) -> bool {
        match (self, v) {
            (ParamKind::Int, ParamValue::Int(_)) | (ParamKind::Bool, ParamValue::Bool(_)) => true,
            (ParamKind::Choice(c), ParamValue::Str(s)) => c.contains(s),
            _ => false,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            ParamKind::Int => "an integer".into(),
            ParamKind::Bool => "true or false".into(),
            ParamKind::Choice(c) => format!(
                "one of {}",
                c.iter().map(|s| format!("\"{s}\"")).collect::<Vec<_>>().join(", ")
            ),
        }
    }
}

/// A declared parameter.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamSpec {
    pub name: String,
    #[serde(flatten)]
    pub kind: ParamKind,
    pub default: ParamValue,
    pub doc: String,
}

impl ParamSpec {
    pub fn int(name: &str, default: i64, doc: &str) -> Self {
        ParamSpec {
            name: name.into(),
            kind: ParamKind::Int,
            default: ParamValue::Int(default),
            doc: doc.into(),
        }
    }
    pub fn bool(name: &str, default: bool, doc: &str) -> Self {
        ParamSpec {
            name: name.into(),
            kind: ParamKind::Bool,
            default: ParamValue::Bool(default),
            doc: doc.into(),
        }
    }
    pub fn choice(name: &str, choices: &[&str], default: &str, doc: &str) -> Self {
        ParamSpec {
            name: name.into(),
            kind: ParamKind::Choice(choices.iter().map(|s| s.to_string()).collect()),
            default: ParamValue::Str(default.into()),
            doc: doc.into(),
        }
    }
}

/// Concrete parameter values of a variant.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Params(pub BTreeMap<String, ParamValue>);

/// A parameter missing, unknown or of the wrong type (a bad request or a bad `--params`).
#[derive(Clone, Debug, PartialEq)]
pub struct ParamError {
    pub name: String,
    pub problem: String,
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "parameter `{}`: {}", self.name, self.problem)
    }
}

impl std::error::Error for ParamError {}

impl From<ParamError> for String {
    fn from(e: ParamError) -> String {
        e.to_string()
    }
}

impl Params {
    /// No values; add them with [`Params::with`].
    pub fn new() -> Params {
        Params::default()
    }

    /// These values plus `name = value` (e.g. `Params::new().with("bufs", 2).with("order", "mn")`).
    pub fn with(mut self, name: &str, value: impl Into<ParamValue>) -> Params {
        self.0.insert(name.to_string(), value.into());
        self
    }

    /// The value of `name`, if set.
    pub fn get(&self, name: &str) -> Option<&ParamValue> {
        self.0.get(name)
    }

    /// The defaults of `specs`.
    pub fn defaults(specs: &[ParamSpec]) -> Params {
        Params(specs.iter().map(|s| (s.name.clone(), s.default.clone())).collect())
    }

    // The typed accessors answer `String` errors, so they compose with `?` both in a
    // validity rule (`Result<(), String>`) and in a kernel body (the simulator's error
    // converts from a `String` at the line of the `?`).

    /// An integer parameter.
    pub fn int(&self, name: &str) -> Result<i64, String> {
        match self.0.get(name) {
            Some(ParamValue::Int(i)) => Ok(*i),
            Some(v) => Err(ParamError {
                name: name.into(),
                problem: format!("expected an integer, got `{v}`"),
            }
            .into()),
            None => Err(ParamError { name: name.into(), problem: "missing".into() }.into()),
        }
    }

    /// An integer parameter that must be positive (1 or more), as a `u64`: for a count a
    /// kernel divides by or loops on (buffers, tile sizes, passes), so that 0 is refused
    /// with the parameter's name rather than reaching a division or an empty ring. A
    /// parameter for which 0 is a level (none of something) reads [`Params::int`] and
    /// refuses what is below 0 itself.
    pub fn uint(&self, name: &str) -> Result<u64, String> {
        let v = self.int(name)?;
        u64::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| {
            ParamError { name: name.into(), problem: format!("must be positive, got {v}") }.into()
        })
    }

    /// A boolean parameter.
    pub fn bool(&self, name: &str) -> Result<bool, String> {
        match self.0.get(name) {
            Some(ParamValue::Bool(b)) => Ok(*b),
            Some(v) => Err(ParamError {
                name: name.into(),
                problem: format!("expected true or false, got `{v}`"),
            }
            .into()),
            None => Err(ParamError { name: name.into(), problem: "missing".into() }.into()),
        }
    }

    /// A choice (string) parameter.
    pub fn str(&self, name: &str) -> Result<&str, String> {
        match self.0.get(name) {
            Some(ParamValue::Str(s)) => Ok(s),
            Some(v) => Err(ParamError {
                name: name.into(),
                problem: format!("expected a string, got `{v}`"),
            }
            .into()),
            None => Err(ParamError { name: name.into(), problem: "missing".into() }.into()),
        }
    }

    /// Check every value against `specs` (no unknown, no missing, right types).
    pub fn check(&self, specs: &[ParamSpec]) -> Result<(), ParamError> {
        for (k, v) in &self.0 {
            let spec = specs
                .iter()
                .find(|s| &s.name == k)
                .ok_or_else(|| ParamError { name: k.clone(), problem: unknown_parameter(specs) })?;
            if !spec.kind.accepts(v) {
                return Err(ParamError {
                    name: k.clone(),
                    problem: format!("expected {}, got `{v}`", spec.kind.describe()),
                });
            }
        }
        for s in specs {
            if !self.0.contains_key(&s.name) {
                return Err(ParamError { name: s.name.clone(), problem: "missing".into() });
            }
        }
        Ok(())
    }

    /// Parse `k=v,k=v` on top of `base`, typing each value by its spec.
    pub fn parse_overrides(
        base: &Params,
        text: &str,
        specs: &[ParamSpec],
    ) -> Result<Params, ParamError> {
        let mut out = base.clone();
        let mut given: Vec<&str> = Vec::new();
        for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| ParamError {
                name: part.into(),
                problem: "expected `name=value`".into(),
            })?;
            let (k, v) = (k.trim(), v.trim());
            // The second value would win silently: say which one was meant instead.
            if given.contains(&k) {
                return Err(ParamError {
                    name: k.into(),
                    problem: "given twice: give each parameter once".into(),
                });
            }
            given.push(k);
            let spec = specs
                .iter()
                .find(|s| s.name == k)
                .ok_or_else(|| ParamError { name: k.into(), problem: unknown_parameter(specs) })?;
            let value = match &spec.kind {
                ParamKind::Int => ParamValue::Int(v.parse().map_err(|_| ParamError {
                    name: k.into(),
                    problem: format!("expected an integer, got `{v}`"),
                })?),
                ParamKind::Bool => ParamValue::Bool(v.parse().map_err(|_| ParamError {
                    name: k.into(),
                    problem: format!("expected true or false, got `{v}`"),
                })?),
                ParamKind::Choice(_) => ParamValue::Str(v.to_string()),
            };
            if !spec.kind.accepts(&value) {
                return Err(ParamError {
                    name: k.into(),
                    problem: format!("expected {}, got `{v}`", spec.kind.describe()),
                });
            }
            out.0.insert(k.to_string(), value);
        }
        Ok(out)
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&parts.join(","))
    }
}

/// A problem size: named dims.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Shape(pub BTreeMap<String, u64>);

impl Shape {
    /// A shape from `(dim, size)` pairs (stored sorted by dim name).
    pub fn new(dims: &[(&str, u64)]) -> Shape {
        Shape(dims.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    /// A dim the kernel needs; a missing one is a bug in the shape set, reported by name.
    pub fn get(&self, name: &str) -> Result<u64, String> {
        self.0.get(name).copied().ok_or_else(|| format!("shape {self} has no dim `{name}`"))
    }

    /// A dim, panicking if absent (for kernels whose shapes were validated already). The
    /// panic names the caller's line (a misspelt dim is a bug there, not here).
    #[track_caller]
    pub fn dim(&self, name: &str) -> u64 {
        match self.get(name) {
            Ok(n) => n,
            Err(e) => panic!("{e}"),
        }
    }
}

/// The problem of a parameter name `specs` does not declare, naming those it does.
fn unknown_parameter(specs: &[ParamSpec]) -> String {
    if specs.is_empty() {
        return "unknown parameter (this kernel has no parameters)".into();
    }
    let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    format!("unknown parameter (known: {})", names.join(", "))
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}
