//! What a model calls, as the commands on kernels see it: which selected crate's kernel a
//! model's call runs ([`kernel_owner`]: `tune --model`'s targets, and the calls here), and
//! `--shape MODEL@SHAPE` ([`resolve`]): a kernel at the dims model MODEL calls it with at
//! its shape SHAPE — the problems `tune --model` tunes, under that label — for `bench`,
//! `check`, `build` and `profile` (so a `tune --model` reproducer runs as printed).

use crate::cli::Selection;
use crate::exit::{fail, Exit, Failure};
use crate::models::ModelTarget;
use crate::select::glob;
use crate::workspace::Workspace;
use neuron_tune_protocol::{ChipSpec, KernelInfo, ListDoc, Shape};

/// One kernel call that a `--shape MODEL@SHAPE` selects.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelShape {
    /// The `--shape` values it answers, as given (several select one call once).
    pub asked: Vec<String>,
    /// The shape's label: `MODEL@SHAPE` when that is the one dims the model calls the
    /// kernel with there (and none were asked), else with its dims
    /// (`MODEL@SHAPE{cols=1024,rows=256}`, [`dims_label`]), which `--shape` takes back to
    /// select that call alone.
    pub label: String,
    /// The selected crate whose kernel the model runs (index into the workspace's crates).
    pub krate: usize,
    pub kernel: String,
    pub shape: Shape,
}

/// The `--shape` values of a selection that name a model's shape, and the calls they select.
#[derive(Clone, Debug, Default)]
pub struct ModelShapes {
    pub asked: Vec<String>,
    pub calls: Vec<ModelShape>,
}

impl ModelShape {
    /// Whether `other` is the same kernel of the same crate at the same dims.
    fn same_problem(&self, other: &ModelShape) -> bool {
        (self.krate, &self.kernel, &self.shape) == (other.krate, &other.kernel, &other.shape)
    }
}

impl ModelShapes {
    /// The calls whose kernel is crate `krate`'s.
    pub fn of_crate(&self, krate: usize) -> Vec<ModelShape> {
        self.calls.iter().filter(|c| c.krate == krate).cloned().collect()
    }

    /// Whether the `--shape` value `asked` selects a call of crate `krate`'s `kernel`.
    pub fn calls(&self, krate: usize, kernel: &str, asked: &str) -> bool {
        self.calls
            .iter()
            .any(|c| c.krate == krate && c.kernel == kernel && c.asked.iter().any(|a| a == asked))
    }
}

/// Whether a `--shape` value names a model's shape: `MODEL@SHAPE` (or with dims,
/// `MODEL@SHAPE{..}`) that no kernel of the selected crates has as a named shape (a kernel's
/// own shape of that name wins).
pub fn is_model_shape(lists: &[&ListDoc], value: &str) -> bool {
    value.contains('@')
        && !lists.iter().flat_map(|l| &l.kernels).any(|k| k.shapes.iter().any(|(n, _)| n == value))
}

/// The selection of `build`, `check` and `bench`: the calls its `--shape MODEL@SHAPE` values
/// select ([`resolve`]), then the whole selection checked against the selected crates'
/// lists, those values as resolved ([`crate::select::check_patterns`]).
pub fn checked_selection(
    ws: &mut Workspace,
    s: &Selection,
    chip: &ChipSpec,
    out: &crate::output::Reporter,
) -> Result<ModelShapes, Failure> {
    let at_models = resolve(ws, s, chip)?;
    let lists: Vec<&ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    crate::select::check_patterns(&lists, s, Some(&at_models), out)?;
    Ok(at_models)
}

/// The calls the selection's `--shape MODEL@SHAPE` values select (none without one).
pub fn resolve(ws: &mut Workspace, s: &Selection, chip: &ChipSpec) -> Result<ModelShapes, Failure> {
    let lists: Vec<&ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    let asked: Vec<String> =
        s.shapes.iter().filter(|v| is_model_shape(&lists, v)).cloned().collect();
    if asked.is_empty() {
        return Ok(ModelShapes::default());
    }
    // What is wrong with the selection's kernels is said first, as without a model's shape.
    crate::select::require_kernels(&lists)?;
    crate::select::check_kernels(&lists, s)?;
    let mut calls: Vec<ModelShape> = Vec::new();
    for value in &asked {
        for call in resolve_one(ws, value, &s.kernels, chip)? {
            // One problem once, as a named shape given twice: a value repeated, or one
            // whose calls another's include (`qwen3@tiny` and `qwen3@tiny{..}`), keeps the
            // first value's label.
            match calls.iter_mut().find(|c| c.same_problem(&call)) {
                Some(first) => first.asked.extend(call.asked),
                None => calls.push(call),
            }
        }
    }
    Ok(ModelShapes { asked, calls })
}

/// The calls of the kernels matching `kernels` (every kernel when empty) that `--shape
/// value` (a model's shape, [`is_model_shape`]) selects, each in the crate the model runs it
/// from ([`kernel_owner`]). An unknown model or model shape, or a model that calls no such
/// kernel there, is a usage error naming what exists.
///
/// A model may call one kernel at several dims at one shape (a decoder's GEMMs). All of them
/// are selected, each labelled with its dims: they are all what the model runs at that shape
/// and what `tune --model` tunes under its label, so "the kernel at qwen3's tiny" means them
/// all, as `--shape small` means the one shape so named; a refusal would leave no way to
/// bench them without spelling out dims. Dims after the shape (`MODEL@SHAPE{a=1,b=2}`, as a
/// label shows them) select that call alone.
pub fn resolve_one(
    ws: &mut Workspace,
    value: &str,
    kernels: &[String],
    chip: &ChipSpec,
) -> Result<Vec<ModelShape>, Failure> {
    let (model, rest) = value.split_once('@').unwrap_or((value, ""));
    let (shape_name, dims) = match rest.find('{') {
        Some(i) => (&rest[..i], Some(parse_dims(value, &rest[i..])?)),
        None => (rest, None),
    };
    let models: Vec<(usize, neuron_tune_protocol::ModelInfo)> = ws
        .crates
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.list.models.iter().filter(|m| m.name == model).map(move |m| (i, m)))
        .map(|(i, m)| (i, m.clone()))
        .collect();
    if models.is_empty() {
        let mut have: Vec<&str> =
            ws.crates.iter().flat_map(|c| &c.list.models).map(|m| m.name.as_str()).collect();
        have.sort_unstable();
        let have = match have.is_empty() {
            true => "the selected packages have no models".to_string(),
            false => format!("have: {}", have.join(", ")),
        };
        return Err(fail(
            Exit::Config,
            format!(
                "--shape {value}: no model `{model}` in the selected packages ({have}); \
                 `--shape MODEL@SHAPE` is a kernel at the dims model MODEL calls it with at its \
                 shape SHAPE (a model's package must be selected: -p it too, or drop -p)"
            ),
        ));
    }
    let mut out = Vec::new();
    for (krate, info) in models {
        let Some((_, model_dims)) = info.shapes.iter().find(|(n, _)| n == shape_name) else {
            let have: Vec<&str> = info.shapes.iter().map(|(n, _)| n.as_str()).collect();
            return Err(fail(
                Exit::Config,
                format!(
                    "--shape {value}: model `{model}` has no shape `{shape_name}` (it has: {})",
                    have.join(", ")
                ),
            ));
        };
        let target = ModelTarget {
            krate,
            model: model.to_string(),
            shape_name: shape_name.to_string(),
            shape: model_dims.clone(),
        };
        // The defaults' plan: which kernels are called at which dims does not depend on
        // their parameters (as `tune --model` finds its targets).
        let plan =
            crate::models::plan(&mut ws.crates[krate].pool, &target, chip, &Default::default())?
                .map_err(|e| fail(Exit::Check, e))?;
        let wanted = |k: &str| kernels.is_empty() || kernels.iter().any(|p| glob(p, k));
        let mut found: Vec<ModelShape> = Vec::new();
        for call in plan.calls.iter().filter(|c| wanted(&c.kernel)) {
            let (owner, _) = kernel_owner(ws, &target, call.krate.as_deref(), &call.kernel)?;
            if found
                .iter()
                .any(|f| (f.krate, &f.kernel, &f.shape) == (owner, &call.kernel, &call.shape))
            {
                continue;
            }
            found.push(ModelShape {
                asked: vec![value.to_string()],
                label: String::new(),
                krate: owner,
                kernel: call.kernel.clone(),
                shape: call.shape.clone(),
            });
        }
        if found.is_empty() {
            let mut called: Vec<&str> = plan.calls.iter().map(|c| c.kernel.as_str()).collect();
            called.sort_unstable();
            called.dedup();
            let which = match kernels {
                [one] if !one.contains('*') => format!("kernel `{one}`"),
                _ => format!("a kernel matching --kernel {}", kernels.join(", ")),
            };
            return Err(fail(
                Exit::Config,
                format!(
                    "--shape {value}: model `{model}` does not call {which} at shape \
                     `{shape_name}` (it calls: {})",
                    called.join(", ")
                ),
            ));
        }
        let labels: Vec<String> = found
            .iter()
            .map(|f| {
                let several = found.iter().filter(|g| g.kernel == f.kernel).count() > 1;
                match several || dims.is_some() {
                    true => format!("{model}@{shape_name}{}", dims_label(&f.shape)),
                    false => format!("{model}@{shape_name}"),
                }
            })
            .collect();
        for (f, label) in found.iter_mut().zip(labels) {
            f.label = label;
        }
        if let Some(dims) = &dims {
            let all: Vec<String> =
                found.iter().map(|f| format!("{} at {}", f.kernel, f.label)).collect();
            found.retain(|f| &f.shape == dims);
            if found.is_empty() {
                return Err(fail(
                    Exit::Config,
                    format!(
                        "--shape {value}: model `{model}` calls no selected kernel at those dims \
                         at shape `{shape_name}` (it calls: {})",
                        all.join(", ")
                    ),
                ));
            }
        }
        out.extend(found);
    }
    Ok(out)
}

/// A shape's dims as a label's suffix and as `--shape MODEL@SHAPE{..}` takes them:
/// `{cols=1024,rows=256}` (dims by name, no spaces).
pub fn dims_label(shape: &Shape) -> String {
    let dims: Vec<String> = shape.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{{{}}}", dims.join(","))
}

/// `{a=1,b=2}` (spaces allowed, any order) of the `--shape` value `value`.
fn parse_dims(value: &str, text: &str) -> Result<Shape, Failure> {
    let bad = || {
        fail(
            Exit::Config,
            format!(
                "--shape {value}: `{text}` is not dims such as {{cols=1024,rows=256}} (after \
                 `MODEL@SHAPE`, dims select the one call at those dims)"
            ),
        )
    };
    let inner = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')).ok_or_else(bad)?;
    let mut shape = Shape::default();
    for part in inner.split(',') {
        let (name, n) = part.split_once('=').ok_or_else(bad)?;
        let n: u64 = n.trim().parse().map_err(|_| bad())?;
        let name = name.trim();
        if name.is_empty() || shape.0.insert(name.to_string(), n).is_some() {
            return Err(bad());
        }
    }
    Ok(shape)
}

/// The selected crate whose `kernel` (of Rust crate `krate`, as the model's plan says) the
/// model `m` calls: the linked package that crate is (`ModelLinks::identified_manifest`);
/// when the crate does not tell (none said, or a crate that is no linked package's), among
/// the crates `m`'s crate links, the one that defines a kernel of that name. Two linked
/// crates defining it are then an error: which one the model calls cannot be told.
///
/// Found from the link graph (cargo metadata) and what each package is known to define,
/// never requiring the tuned records: a damaged database does not stop `bench`, `check`,
/// `build` or `profile` at a model's shape, any more than at a named one (`tune --model`,
/// which writes records, refuses it before looking for targets).
pub fn kernel_owner(
    ws: &Workspace,
    m: &ModelTarget,
    krate: Option<&str>,
    kernel: &str,
) -> Result<(usize, KernelInfo), Failure> {
    let view = ws.tuned.links_of(&ws.crates[m.krate].krate.manifest_path);
    let named = |names: Vec<&str>| names.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>();
    // The package the call's crate is, when it tells.
    let identified = view.identified_manifest(krate, kernel);
    // Else the packages known to define it: configured, listed by the harnesses built,
    // recorded (in a database that reads).
    let defining = view.defining_packages(kernel);
    if identified.is_none() && defining.len() > 1 {
        return Err(fail(
            Exit::Config,
            format!(
                "model `{}` calls kernel `{kernel}`, and its crate links {} packages that define \
                 one ({}): {}, so which one it calls cannot be told; override \
                 `Kernel::rust_crate` to name the crate the kernel belongs to, rename one of \
                 the kernels, or drop the dependency the model does not call",
                m.model,
                defining.len(),
                named(defining).join(", "),
                match krate {
                    Some(c) => format!("the call's kernel is of Rust crate `{c}`, none of theirs"),
                    None => "its harness does not say the call's crate".to_string(),
                }
            ),
        ));
    }
    let lists = |c: &crate::workspace::Crate| c.list.kernels.iter().any(|k| k.name == kernel);
    let owner = ws.crates.iter().enumerate().find_map(|(i, c)| {
        let k = c.list.kernels.iter().find(|k| k.name == kernel)?;
        let manifest = c.krate.manifest_path.as_path();
        let theirs = identified.map_or(view.links_manifest(manifest), |o| o == manifest);
        theirs.then(|| (i, k.clone()))
    });
    owner.ok_or_else(|| {
        // Selected crates outside the model's dependencies with a kernel of that name are not
        // what it runs: named, so that the refusal is no puzzle.
        let others: Vec<&str> =
            ws.crates.iter().filter(|c| lists(c)).map(|c| c.krate.package.as_str()).collect();
        let not_theirs = match others.len() {
            0 => String::new(),
            n => format!(
                " ({} {} one, but `{}` does not depend on {})",
                named(others).join(", "),
                if n == 1 { "has" } else { "have" },
                ws.crates[m.krate].krate.package,
                if n == 1 { "it" } else { "them" }
            ),
        };
        fail(
            Exit::Config,
            format!(
                "model `{}` calls kernel `{kernel}`, which no selected crate it depends on lists{not_theirs} \
                 (select the crate that defines it with -p, or drop -p)",
                m.model
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::{dims_label, parse_dims};
    use neuron_tune_protocol::Shape;

    #[test]
    fn a_labels_dims_read_back_as_the_same_shape() {
        let shape = Shape::new(&[("rows", 256), ("cols", 1024)]);
        assert_eq!(dims_label(&shape), "{cols=1024,rows=256}");
        assert_eq!(parse_dims("m@s", &dims_label(&shape)).unwrap(), shape);
        // As a person may type them: any order, spaces.
        assert_eq!(parse_dims("m@s", "{ rows = 256, cols=1024 }").unwrap(), shape);
        for bad in ["{rows=256", "{rows}", "{rows=x}", "{rows=1,rows=2}", "{=1}", "{}"] {
            let e = parse_dims("m@s", bad).unwrap_err();
            assert_eq!(e.exit, crate::exit::Exit::Config, "{bad}");
            assert!(e.message.contains(bad), "{}", e.message);
        }
    }
}
