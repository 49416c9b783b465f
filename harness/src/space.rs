//! Search spaces and shapes from TOML, validated against what the kernels declare.
//!
//! A crate configures its kernels in `[package.metadata.neuron-tune]` of its Cargo.toml or
//! in a `neuron-tune.toml` beside it (the same keys without the prefix). Both may exist:
//! they merge key by key, and where both set the same key of one kernel — one parameter's
//! `space.P` or `default.P`, one named shape `shapes.NAME`, `harness` — `neuron-tune.toml`
//! wins for that key alone; every key it does not set keeps the Cargo.toml's value.
//!
//! ```toml
//! [package.metadata.neuron-tune]
//! harness = "neuron-tune-harness"          # the [[bin]] or [[bench]] that serves workers
//! [package.metadata.neuron-tune.kernels.rmsnorm]
//! space = { bufs = [1, 2, 3, 4] }          # values each parameter may take
//! shapes = { qwen3 = { rows = 16384, hidden = 1024 } }   # tuning keys, added to the kernel's
//! default = { bufs = 2 }                   # optional: the variant used when not tuning
//! ```
//!
//! Users widen or narrow a space without recompiling. Anything the kernels do not declare —
//! an unknown kernel or parameter, a value of the wrong type, an empty list, a shape with
//! other dims, or whose dims multiply to more than [`MAX_SHAPE_ELEMENTS`] — is an error
//! naming the file, the key and its line.

use crate::kernel::Kernel;
use crate::params::{ParamValue, Params, Shape};
use neuron_sim::Chip;
use neuron_tune_protocol::{Space, ValidCount};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use toml::Spanned;

/// A configuration error, located.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpaceError {
    pub file: PathBuf,
    pub line: usize,
    pub column: usize,
    pub key: String,
    pub message: String,
}

impl fmt::Display for SpaceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}: {}",
            self.file.display(),
            self.line,
            self.column,
            self.key,
            self.message
        )
    }
}

impl std::error::Error for SpaceError {}

/// Spaces up to this size are counted exactly by [`KernelConfig::count_valid`].
pub const COUNT_LIMIT: u64 = 20_000;

/// The most elements a shape may span: the product of its dims, at most 2⁴⁸.
///
/// Every tensor a kernel makes over some of a shape's dims then has at most 2⁴⁸ elements,
/// so its byte size (at most 8 bytes an element: 2⁵¹), element and byte counts, and their
/// products with the small factors of work and cost formulas (a GEMM's 2·m·k·n FLOPs when
/// its dims are the shape's, ≤ 2⁴⁹) stay exact both in `u64` and in the `f64` (53-bit
/// mantissa) the timing model's cycle arithmetic uses. Larger dims overflowed that
/// arithmetic inside kernel code (a panic reported as the kernel's). 2⁴⁸ elements is
/// 256 Ti, thousands of times any NeuronCore device's HBM, so no real problem is refused.
pub const MAX_SHAPE_ELEMENTS: u64 = 1 << 48;

/// Why `shape` is too large to run (see [`MAX_SHAPE_ELEMENTS`]), if it is.
pub fn check_shape_size(shape: &Shape) -> Result<(), String> {
    let product = shape.0.values().try_fold(1u64, |acc, &d| acc.checked_mul(d));
    if product.is_some_and(|n| n <= MAX_SHAPE_ELEMENTS) {
        return Ok(());
    }
    let dims: Vec<&str> = shape.0.keys().map(String::as_str).collect();
    let size = match product {
        Some(n) => format!("{n}"),
        None => "over 2^64".into(),
    };
    Err(format!(
        "{} = {size} elements; a shape may span at most 2^48 = {MAX_SHAPE_ELEMENTS} (more \
         is beyond any device's memory and the exact arithmetic of sizes and cycles): give \
         smaller dims",
        dims.join(" × ")
    ))
}

/// One kernel's configuration after validation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KernelConfig {
    /// Values per parameter (every declared parameter is present; one not in the TOML
    /// space takes just its default).
    pub space: BTreeMap<String, Vec<ParamValue>>,
    /// Named shapes: the kernel's own, then the Cargo.toml's, then the neuron-tune.toml's
    /// (one named like an earlier shape replaces it, in its place).
    pub shapes: Vec<(String, Shape)>,
    /// The variant used when not tuning.
    pub defaults: Params,
}

impl KernelConfig {
    /// The configuration of a kernel nobody configured.
    pub fn of(kernel: &dyn Kernel) -> KernelConfig {
        let defaults = Params::defaults(&kernel.params());
        KernelConfig {
            space: defaults.0.iter().map(|(k, v)| (k.clone(), vec![v.clone()])).collect(),
            shapes: kernel.shapes(),
            defaults,
        }
    }

    /// The space, indexed lazily (never expanded).
    pub fn space(&self) -> Space {
        Space::new(self.space.clone())
    }

    /// How many configurations of the space the kernel's rule accepts for `shape` on `chip`: counted
    /// when the space has at most [`COUNT_LIMIT`] configurations, else estimated from
    /// [`COUNT_LIMIT`] evenly spread ones (a space of 10¹² is never walked). A validity rule
    /// that panics counts the configuration as invalid.
    pub fn count_valid(&self, kernel: &dyn Kernel, shape: &Shape, chip: &Chip) -> ValidCount {
        let space = self.space();
        let n = space.len();
        let valid = |p: &Params| {
            crate::kernel::catch_panic(|| kernel.validate(p, shape, chip).is_ok()).unwrap_or(false)
        };
        let default_valid = valid(&self.defaults);
        if n <= COUNT_LIMIT {
            let valid = space.iter().filter(|p| valid(p)).count() as u64;
            return ValidCount { valid, exact: true, default_valid };
        }
        // One sample per stride of the index range, each at a different offset within its
        // stride (i·7919 mod step), so the fastest-varying parameters do not sit at one
        // level in every sample. Deterministic: `list` prints the same estimate every time.
        let step = n / COUNT_LIMIT;
        let hits = (0..COUNT_LIMIT)
            .filter(|i| space.get(i * step + (i * 7919) % step).is_some_and(|p| valid(&p)))
            .count() as f64;
        let valid = (hits / COUNT_LIMIT as f64 * n as f64).round() as u64;
        ValidCount { valid, exact: false, default_valid }
    }

    pub fn shape(&self, name: &str) -> Option<&Shape> {
        self.shapes.iter().find(|(n, _)| n == name).map(|(_, s)| s)
    }
}

#[derive(Deserialize, Default)]
struct Manifest {
    #[serde(default)]
    package: Option<Package>,
}

#[derive(Deserialize, Default)]
struct Package {
    #[serde(default)]
    metadata: Option<Metadata>,
}

#[derive(Deserialize, Default)]
struct Metadata {
    #[serde(rename = "neuron-tune", default)]
    neuron_tune: Option<RawConfig>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    harness: Option<String>,
    #[serde(default)]
    kernels: BTreeMap<Spanned<String>, RawKernel>,
    /// Models are configured by their crate's code; accepted here for forward compatibility.
    #[serde(default)]
    models: Option<toml::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RawKernel {
    #[serde(default)]
    space: BTreeMap<Spanned<String>, Spanned<Vec<Spanned<toml::Value>>>>,
    #[serde(default)]
    shapes: BTreeMap<Spanned<String>, Spanned<BTreeMap<String, Spanned<toml::Value>>>>,
    #[serde(default)]
    default: BTreeMap<Spanned<String>, Spanned<toml::Value>>,
}

/// The configuration of every registered kernel, plus the harness target name.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CrateConfig {
    pub harness: Option<String>,
    pub kernels: BTreeMap<String, KernelConfig>,
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.len() - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

struct Ctx<'a> {
    file: &'a Path,
    text: &'a str,
}

impl Ctx<'_> {
    fn err(&self, span: std::ops::Range<usize>, key: &str, message: String) -> SpaceError {
        let (line, column) = line_col(self.text, span.start);
        SpaceError { file: self.file.to_path_buf(), line, column, key: key.to_string(), message }
    }
}

fn to_param(v: &toml::Value) -> Option<ParamValue> {
    match v {
        toml::Value::Integer(i) => Some(ParamValue::Int(*i)),
        toml::Value::Boolean(b) => Some(ParamValue::Bool(*b)),
        toml::Value::String(s) => Some(ParamValue::Str(s.clone())),
        _ => None,
    }
}

/// Parse `text` (a Cargo.toml when `in_manifest`, else a neuron-tune.toml) and validate it
/// against `kernels`, on top of `base`.
pub fn parse_config(
    file: &Path,
    text: &str,
    in_manifest: bool,
    kernels: &[&dyn Kernel],
    base: CrateConfig,
) -> Result<CrateConfig, SpaceError> {
    let ctx = Ctx { file, text };
    let parse_err = |e: toml::de::Error| {
        let (line, column) = e.span().map_or((1, 1), |s| line_col(text, s.start));
        SpaceError {
            file: file.to_path_buf(),
            line,
            column,
            key: "(toml)".into(),
            message: e.message().to_string(),
        }
    };
    let raw: RawConfig = if in_manifest {
        let m: Manifest = toml::from_str(text).map_err(parse_err)?;
        match m.package.and_then(|p| p.metadata).and_then(|m| m.neuron_tune) {
            Some(c) => c,
            None => return Ok(base),
        }
    } else {
        toml::from_str(text).map_err(parse_err)?
    };
    let prefix = if in_manifest { "package.metadata.neuron-tune." } else { "" };
    let mut out = base;
    if raw.harness.is_some() {
        out.harness = raw.harness;
    }
    let _ = raw.models;
    for (name, rk) in &raw.kernels {
        let key = format!("{prefix}kernels.{}", name.get_ref());
        let kernel = kernels.iter().find(|k| k.name() == name.get_ref()).ok_or_else(|| {
            ctx.err(
                name.span(),
                &key,
                format!(
                    "no kernel `{}` is registered (known: {})",
                    name.get_ref(),
                    kernels.iter().map(|k| k.name()).collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        let specs = kernel.params();
        // On top of what `base` holds for this kernel (the Cargo.toml's, under a
        // neuron-tune.toml): each key below replaces only itself.
        let mut cfg =
            out.kernels.remove(kernel.name()).unwrap_or_else(|| KernelConfig::of(*kernel));
        let rk = &rk;
        for (pname, values) in &rk.space {
            let pkey = format!("{key}.space.{}", pname.get_ref());
            let spec = specs.iter().find(|s| &s.name == pname.get_ref()).ok_or_else(|| {
                ctx.err(
                    pname.span(),
                    &pkey,
                    format!(
                        "kernel `{}` has no parameter `{}` (it has: {})",
                        kernel.name(),
                        pname.get_ref(),
                        specs.iter().map(|s| s.name.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                )
            })?;
            if values.get_ref().is_empty() {
                return Err(ctx.err(
                    values.span(),
                    &pkey,
                    "the list of values is empty: give at least one".into(),
                ));
            }
            let mut vals = Vec::new();
            for v in values.get_ref() {
                let pv =
                    to_param(v.get_ref()).filter(|pv| spec.kind.accepts(pv)).ok_or_else(|| {
                        ctx.err(
                            v.span(),
                            &pkey,
                            format!("`{}` is not {}", v.get_ref(), spec.kind.describe()),
                        )
                    })?;
                if !vals.contains(&pv) {
                    vals.push(pv);
                }
            }
            cfg.space.insert(spec.name.clone(), vals);
        }
        for (pname, value) in &rk.default {
            let pkey = format!("{key}.default.{}", pname.get_ref());
            let spec = specs.iter().find(|s| &s.name == pname.get_ref()).ok_or_else(|| {
                ctx.err(
                    pname.span(),
                    &pkey,
                    format!("kernel `{}` has no parameter `{}`", kernel.name(), pname.get_ref()),
                )
            })?;
            let pv =
                to_param(value.get_ref()).filter(|pv| spec.kind.accepts(pv)).ok_or_else(|| {
                    ctx.err(
                        value.span(),
                        &pkey,
                        format!("`{}` is not {}", value.get_ref(), spec.kind.describe()),
                    )
                })?;
            cfg.defaults.0.insert(spec.name.clone(), pv);
        }
        if !rk.shapes.is_empty() {
            let dims: Vec<String> = kernel
                .shapes()
                .first()
                .map(|(_, s)| s.0.keys().cloned().collect())
                .unwrap_or_default();
            // The TOML's shapes are added to the kernel's own (and, in neuron-tune.toml, to
            // the Cargo.toml's); one with the name of an earlier shape replaces it, in its
            // place.
            let shapes = &mut cfg.shapes;
            for (sname, sdims) in &rk.shapes {
                let skey = format!("{key}.shapes.{}", sname.get_ref());
                let mut shape = Shape::default();
                for (d, v) in sdims.get_ref() {
                    let n = v.get_ref().as_integer().filter(|&n| n > 0).ok_or_else(|| {
                        ctx.err(
                            v.span(),
                            &format!("{skey}.{d}"),
                            format!("`{}` is not a positive integer", v.get_ref()),
                        )
                    })?;
                    shape.0.insert(d.clone(), n as u64);
                }
                check_shape_size(&shape).map_err(|why| ctx.err(sdims.span(), &skey, why))?;
                let have: Vec<String> = shape.0.keys().cloned().collect();
                if !dims.is_empty() && have != dims {
                    return Err(ctx.err(
                        sdims.span(),
                        &skey,
                        format!(
                            "kernel `{}` takes shapes with dims {{{}}}, this one has {{{}}}",
                            kernel.name(),
                            dims.join(", "),
                            have.join(", ")
                        ),
                    ));
                }
                match shapes.iter_mut().find(|(n, _)| n == sname.get_ref()) {
                    Some(same_name) => same_name.1 = shape,
                    None => shapes.push((sname.get_ref().clone(), shape)),
                }
            }
        }
        out.kernels.insert(kernel.name().to_string(), cfg);
    }
    Ok(out)
}

/// The configuration of a crate: its Cargo.toml metadata, then `neuron-tune.toml` beside it,
/// each optional, merged key by key (the second wins a key both set). Kernels not
/// configured get [`KernelConfig::of`].
pub fn load_crate_config(
    manifest_dir: &Path,
    kernels: &[&dyn Kernel],
) -> Result<CrateConfig, SpaceError> {
    let mut cfg = CrateConfig::default();
    for k in kernels {
        cfg.kernels.insert(k.name().to_string(), KernelConfig::of(*k));
    }
    let manifest = manifest_dir.join("Cargo.toml");
    if let Ok(text) = std::fs::read_to_string(&manifest) {
        cfg = parse_config(&manifest, &text, true, kernels, cfg)?;
    }
    let side = manifest_dir.join("neuron-tune.toml");
    if let Ok(text) = std::fs::read_to_string(&side) {
        cfg = parse_config(&side, &text, false, kernels, cfg)?;
    }
    Ok(cfg)
}
