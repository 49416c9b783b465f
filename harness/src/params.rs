//! Typed kernel parameters and named problem shapes.
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

/// A parameter missing or of the wrong type (a harness bug or a bad request).
///
/// It converts into a [`neuron_sim::SimError`] and into a `String`, so the typed accessors
/// compose with `?` in a kernel body (`SimResult`) and in a validity rule
/// (`Result<(), String>`):
///
/// ```
/// # use neuron_tune_harness::{Params, Shape};
/// fn validate(p: &Params, s: &Shape) -> Result<(), String> {
///     let (block, rows) = (p.uint("block_rows")?, s.get("rows")?);
///     if rows % block != 0 {
///         return Err(format!("block_rows = {block} does not divide rows = {rows}"));
///     }
///     Ok(())
/// }
/// let p = Params::new().with("block_rows", 3);
/// assert!(validate(&p, &Shape::new(&[("rows", 9)])).is_ok());
/// assert_eq!(
///     validate(&Params::new(), &Shape::new(&[("rows", 9)])).unwrap_err(),
///     "parameter `block_rows`: missing"
/// );
/// ```
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("parameter `{name}`: {problem}")]
pub struct ParamError {
    pub name: String,
    pub problem: String,
}

impl From<ParamError> for String {
    fn from(e: ParamError) -> String {
        e.to_string()
    }
}

impl From<ParamError> for neuron_sim::SimError {
    /// A parameter error inside a kernel body, reported at the line of the `?`.
    #[track_caller]
    fn from(e: ParamError) -> neuron_sim::SimError {
        neuron_sim::SimError {
            instruction: "parameter",
            loc: neuron_sim::SourceLoc::from_location(std::panic::Location::caller()),
            kind: neuron_sim::ViolationKind::Invalid(e.to_string()),
        }
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

    /// An integer parameter.
    pub fn int(&self, name: &str) -> Result<i64, ParamError> {
        match self.0.get(name) {
            Some(ParamValue::Int(i)) => Ok(*i),
            Some(v) => Err(ParamError {
                name: name.into(),
                problem: format!("expected an integer, got `{v}`"),
            }),
            None => Err(ParamError { name: name.into(), problem: "missing".into() }),
        }
    }

    /// An integer parameter that must be positive, as a `u64`.
    pub fn uint(&self, name: &str) -> Result<u64, ParamError> {
        let v = self.int(name)?;
        u64::try_from(v).ok().filter(|&v| v > 0).ok_or_else(|| ParamError {
            name: name.into(),
            problem: format!("must be positive, got {v}"),
        })
    }

    /// A boolean parameter.
    pub fn bool(&self, name: &str) -> Result<bool, ParamError> {
        match self.0.get(name) {
            Some(ParamValue::Bool(b)) => Ok(*b),
            Some(v) => Err(ParamError {
                name: name.into(),
                problem: format!("expected true or false, got `{v}`"),
            }),
            None => Err(ParamError { name: name.into(), problem: "missing".into() }),
        }
    }

    /// A choice (string) parameter.
    pub fn str(&self, name: &str) -> Result<&str, ParamError> {
        match self.0.get(name) {
            Some(ParamValue::Str(s)) => Ok(s),
            Some(v) => Err(ParamError {
                name: name.into(),
                problem: format!("expected a string, got `{v}`"),
            }),
            None => Err(ParamError { name: name.into(), problem: "missing".into() }),
        }
    }

    /// Every combination of `space` (a list of values per parameter), in a stable order:
    /// the grid a tuning run enumerates.
    pub fn grid(space: &BTreeMap<String, Vec<ParamValue>>) -> Vec<Params> {
        let mut out = vec![Params::new()];
        for (name, values) in space {
            out = out
                .into_iter()
                .flat_map(|p| values.iter().map(move |v| p.clone().with(name, v.clone())))
                .collect();
        }
        out
    }

    /// Check every value against `specs` (no unknown, no missing, right types).
    pub fn check(&self, specs: &[ParamSpec]) -> Result<(), ParamError> {
        for (k, v) in &self.0 {
            let spec = specs.iter().find(|s| &s.name == k).ok_or_else(|| ParamError {
                name: k.clone(),
                problem: format!(
                    "unknown parameter (known: {})",
                    specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            })?;
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
        for part in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (k, v) = part.split_once('=').ok_or_else(|| ParamError {
                name: part.into(),
                problem: "expected `name=value`".into(),
            })?;
            let (k, v) = (k.trim(), v.trim());
            let spec = specs.iter().find(|s| s.name == k).ok_or_else(|| ParamError {
                name: k.into(),
                problem: format!(
                    "unknown parameter (known: {})",
                    specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            })?;
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

    /// A dim, panicking if absent (for kernels whose shapes were validated already).
    pub fn dim(&self, name: &str) -> u64 {
        self.get(name).unwrap_or_else(|e| panic!("{e}"))
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        write!(f, "{{{}}}", parts.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<ParamSpec> {
        vec![
            ParamSpec::int("bufs", 2, "buffers"),
            ParamSpec::bool("fuse", false, "fuse"),
            ParamSpec::choice("order", &["mn", "nm"], "mn", "loop order"),
        ]
    }

    #[test]
    fn overrides_are_typed_by_spec() {
        let base = Params::defaults(&specs());
        let p = Params::parse_overrides(&base, "bufs=3, order=nm", &specs()).unwrap();
        assert_eq!(p.int("bufs").unwrap(), 3);
        assert_eq!(p.str("order").unwrap(), "nm");
        assert!(!p.bool("fuse").unwrap());
        p.check(&specs()).unwrap();
        let e = Params::parse_overrides(&base, "bufs=x", &specs()).unwrap_err();
        assert_eq!(e.to_string(), "parameter `bufs`: expected an integer, got `x`");
        let e = Params::parse_overrides(&base, "order=km", &specs()).unwrap_err();
        assert!(e.to_string().contains("one of \"mn\", \"nm\""), "{e}");
        let e = Params::parse_overrides(&base, "tile=4", &specs()).unwrap_err();
        assert!(e.to_string().contains("unknown parameter (known: bufs, fuse, order)"), "{e}");
    }

    #[test]
    fn a_parameter_error_in_a_body_names_the_line_of_its_question_mark() {
        fn body(p: &Params) -> neuron_sim::SimResult<i64> {
            Ok(p.int("bufs")?)
        }
        let line = line!() - 2;
        let e = body(&Params::new()).unwrap_err();
        assert_eq!((e.instruction, e.loc.file, e.loc.line), ("parameter", file!(), line));
        assert_eq!(e.kind, neuron_sim::ViolationKind::Invalid("parameter `bufs`: missing".into()));
        assert_eq!(body(&Params::new().with("bufs", 3)).unwrap(), 3);
    }

    #[test]
    fn display_is_stable() {
        let p = Params::defaults(&specs());
        assert_eq!(p.to_string(), "bufs=2,fuse=false,order=mn");
        assert_eq!(Shape::new(&[("n", 2), ("m", 1)]).to_string(), "{m=1, n=2}");
    }
}
