//! Which variants a command works on: `--kernel`, `--shape`, `--params`, `--chip`,
//! `--all-variants`, resolved against what the harnesses list.
//!
//! A selection is lazy: `--all-variants` walks each kernel's [`Space`] by index, so a space
//! of 10¹² configurations costs nothing until variants are drawn from it.

use crate::cli::Selection;
use crate::exit::{fail, Exit, Failure};
use crate::model_calls::{ModelShape, ModelShapes};
use crate::tuned::TunedDb;
use neuron_tune_protocol::{ChipSpec, KernelInfo, ListDoc, Params, Shape, Space};
use std::path::Path;

/// More variants than this in one `--all-variants` run is refused: that is a search.
pub const GRID_LIMIT: u64 = 1_000_000;

/// A variant to run.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Variant {
    pub kernel: String,
    /// The Rust crate that defines the kernel, when the name alone may not tell which
    /// kernel the harness runs: a model's call ([`neuron_tune_protocol::PlannedCall`]).
    #[serde(rename = "crate", default, skip_serializing_if = "Option::is_none")]
    pub krate: Option<String>,
    pub shape_name: String,
    pub shape: Shape,
    pub params: Params,
}

/// `*` matches any run of characters. Written here because one wildcard is all the
/// selection syntax needs.
pub fn glob(pat: &str, name: &str) -> bool {
    let parts: Vec<&str> = pat.split('*').collect();
    if parts.len() == 1 {
        return pat == name;
    }
    let mut rest = name;
    for (i, p) in parts.iter().enumerate() {
        if i == 0 {
            let Some(r) = rest.strip_prefix(p) else { return false };
            rest = r;
        } else if i == parts.len() - 1 {
            return rest.ends_with(p);
        } else {
            let Some(pos) = rest.find(p) else { return false };
            rest = &rest[pos + p.len()..];
        }
    }
    true
}

/// The parameters `--params` names that kernel `k` does not declare.
fn lacked_params(k: &KernelInfo, s: &Selection) -> Vec<String> {
    let Some(text) = s.params.as_deref() else { return Vec::new() };
    text.split(',')
        .filter_map(|kv| kv.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !k.params.iter().any(|p| p.name == *name))
        .map(String::from)
        .collect()
}

/// Whether `k` was asked for by its own name (`--kernel gemm`), not only by a pattern or by
/// selecting everything.
fn named(k: &KernelInfo, s: &Selection) -> bool {
    s.kernels.contains(&k.name)
}

/// A kernel selected only by a pattern (or by selecting everything) that lacks a parameter
/// `--params` names is left out (`--kernel '*' --params bufs=3` means the kernels with
/// `bufs`); one named on its own is not, so a misspelt parameter is still an error.
pub(crate) fn left_out_by_params(k: &KernelInfo, s: &Selection) -> bool {
    !named(k, s) && !lacked_params(k, s).is_empty()
}

/// `--params` on top of the kernel's defaults, typed by its declarations.
pub fn parse_params(k: &KernelInfo, text: Option<&str>) -> Result<Params, Failure> {
    match text {
        None => Ok(k.defaults.clone()),
        Some(t) => Params::parse_overrides(&k.defaults, t, &k.params)
            .map_err(|e| fail(Exit::Config, format!("--params for `{}`: {e}", k.name))),
    }
}

/// Which parameter sets of one kernel.
#[derive(Clone, Debug)]
pub enum ParamSets {
    One(Params),
    All(Space),
    /// `--tuned`: one set per selected shape, in the order of [`KernelSelection::shapes`].
    PerShape(Vec<Params>),
}

impl ParamSets {
    /// Distinct parameter sets (saturating).
    pub fn count(&self) -> u64 {
        match self {
            ParamSets::One(_) => 1,
            ParamSets::All(s) => s.len(),
            ParamSets::PerShape(_) => self.iter().count() as u64,
        }
    }

    /// The distinct parameter sets.
    pub fn iter(&self) -> Box<dyn Iterator<Item = Params> + '_> {
        match self {
            ParamSets::One(p) => Box::new(std::iter::once(p.clone())),
            ParamSets::All(s) => Box::new(s.iter()),
            ParamSets::PerShape(sets) => {
                let mut distinct: Vec<&Params> = Vec::new();
                for p in sets {
                    if !distinct.contains(&p) {
                        distinct.push(p);
                    }
                }
                Box::new(distinct.into_iter().cloned())
            }
        }
    }
}

/// One kernel's part of a selection.
#[derive(Clone, Debug)]
pub struct KernelSelection {
    pub kernel: KernelInfo,
    pub shapes: Vec<(String, Shape)>,
    pub params: ParamSets,
    /// `--tuned`: the selected shapes the tuned database has no record for (they run the
    /// default).
    pub untuned: Vec<String>,
}

impl KernelSelection {
    /// Variants selected (saturating).
    pub fn count(&self) -> u64 {
        match &self.params {
            ParamSets::PerShape(_) => self.shapes.len() as u64,
            p => p.count().saturating_mul(self.shapes.len() as u64),
        }
    }

    /// Shape-major: every parameter set at the first shape, then the next shape.
    pub fn variants(&self) -> impl Iterator<Item = Variant> + '_ {
        self.shapes.iter().enumerate().flat_map(move |(i, (sn, sh))| {
            let sets = match &self.params {
                ParamSets::PerShape(sets) => Box::new(std::iter::once(sets[i].clone())),
                p => p.iter(),
            };
            sets.map(move |p| Variant {
                krate: None,
                kernel: self.kernel.name.clone(),
                shape_name: sn.clone(),
                shape: sh.clone(),
                params: p,
            })
        })
    }

    /// Shapes retained by `keep` (a partition), their `--tuned` parameters with them.
    pub fn retain_shapes(&mut self, mut keep: impl FnMut(&str, &Shape) -> bool) {
        let kept: Vec<bool> = self.shapes.iter().map(|(n, s)| keep(n, s)).collect();
        let mut each = kept.iter();
        self.shapes.retain(|_| *each.next().expect("one per shape"));
        if let ParamSets::PerShape(sets) = &mut self.params {
            let mut each = kept.iter();
            sets.retain(|_| *each.next().expect("one per shape"));
        }
        self.untuned.retain(|name| self.shapes.iter().any(|(n, _)| n == name));
    }
}

/// `--tuned`: a note naming each kernel's selected shapes that have no tuned record (they
/// run the default), so a CI step that checks "what the models run" says what it checked.
pub fn note_untuned(selected: &[KernelSelection], chip: &str, out: &crate::output::Reporter) {
    for k in selected.iter().filter(|k| !k.untuned.is_empty()) {
        let all = k.untuned.len() == k.shapes.len();
        out.note(format!(
            "note: `{}` has no tuned record on {chip} at {} {}: {} its default ({})",
            k.kernel.name,
            if k.untuned.len() == 1 { "shape" } else { "shapes" },
            k.untuned.join(", "),
            if all { "it runs" } else { "they run" },
            k.kernel.defaults
        ));
    }
}

/// The selection of a command that runs kernels (`build`, `check`, `bench`, `tune`): the
/// selected crates must have a kernel between them — selected packages with none (a models
/// crate, a crate `init` made before `new`) would pass with "0 variants", and a CI step
/// with the wrong `-p` would pass forever — then [`check_names`].
pub fn check_patterns(
    lists: &[&ListDoc],
    s: &Selection,
    models: Option<&ModelShapes>,
    out: &crate::output::Reporter,
) -> Result<(), Failure> {
    require_kernels(lists)?;
    check_names(lists, s, models, out)
}

/// A usage error (exit 2) when no selected crate has a kernel, naming each package and
/// what it has instead: its models, or nothing yet (`cargo neuron-tune new` adds a kernel).
pub fn require_kernels(lists: &[&ListDoc]) -> Result<(), Failure> {
    if lists.iter().any(|l| !l.kernels.is_empty()) {
        return Ok(());
    }
    let what = |l: &ListDoc| match l.models.len() {
        0 => format!("{} has no kernels yet (`cargo neuron-tune new NAME` adds one)", l.crate_name),
        _ => {
            let mut models: Vec<&str> = l.models.iter().map(|m| m.name.as_str()).collect();
            models.sort_unstable();
            format!(
                "{} has no kernels (it has models: {} — `bench --model` and `gate` use them)",
                l.crate_name,
                models.join(", ")
            )
        }
    };
    let each: Vec<String> = lists.iter().map(|l| what(l)).collect();
    Err(fail(
        Exit::Config,
        match each.len() {
            1 => each.into_iter().next().expect("one"),
            _ => format!("no selected package has a kernel: {}", each.join("; ")),
        },
    ))
}

/// Every `--kernel` pattern must match a kernel of some selected crate, and every `--shape`
/// a shape of some selected kernel (else a usage error naming what exists) or a model's
/// shape `models` resolved (`lists` in the workspace's crate order, as `models` numbers
/// them). `models` is `None` for a command that takes no `--shape MODEL@SHAPE` (`tune`,
/// whose `--model` tunes a model's calls: its refusal says so). A selected kernel without a
/// requested shape is skipped with a note, as is a crate with kernels none of which
/// matches. (`list` checks only this: it lists models too.)
pub fn check_names(
    lists: &[&ListDoc],
    s: &Selection,
    models: Option<&ModelShapes>,
    out: &crate::output::Reporter,
) -> Result<(), Failure> {
    check_kernels(lists, s)?;
    let takes_model_shapes = models.is_some();
    let no_models = ModelShapes::default();
    let models = models.unwrap_or(&no_models);
    let all = || lists.iter().flat_map(|l| &l.kernels);
    let matches =
        |k: &KernelInfo| s.kernels.is_empty() || s.kernels.iter().any(|p| glob(p, &k.name));
    for shape in s.shapes.iter().filter(|v| !models.asked.contains(v)) {
        if !all().filter(|k| matches(k)).any(|k| k.shapes.iter().any(|(n, _)| n == shape)) {
            let have: Vec<String> = all()
                .filter(|k| matches(k))
                .map(|k| {
                    let names: Vec<&str> = k.shapes.iter().map(|(n, _)| n.as_str()).collect();
                    format!("{}: {}", k.name, names.join(", "))
                })
                .collect();
            // `tune`, which takes no `MODEL@SHAPE`: its `--model` names models. (The
            // commands that take it resolved every such value, or refused it, already.)
            let model = match shape.split_once('@').filter(|_| !takes_model_shapes) {
                Some((m, sh)) => format!(
                    "; `tune --model {m} --shape {}` tunes the kernels at the dims a model \
                     calls them with",
                    sh.split('{').next().unwrap_or(sh)
                ),
                None => String::new(),
            };
            return Err(fail(
                Exit::Config,
                format!(
                    "--shape {shape}: no selected kernel has this shape ({}){model}",
                    have.join("; ")
                ),
            ));
        }
    }
    if let Some(text) = s.params.as_deref() {
        let selected: Vec<&KernelInfo> = all().filter(|k| matches(k)).collect();
        if !selected.is_empty() && selected.iter().all(|k| left_out_by_params(k, s)) {
            let lacks = lacked_params(selected[0], s);
            return Err(fail(
                Exit::Config,
                format!(
                    "--params {text}: no selected kernel has the parameter{} {} ({})",
                    if lacks.len() == 1 { "" } else { "s" },
                    lacks.iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", "),
                    selected
                        .iter()
                        .map(|k| format!("{}: {}", k.name, param_names(k)))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            ));
        }
        for k in selected.into_iter().filter(|k| left_out_by_params(k, s)) {
            out.note(format!(
                "note: skipping `{}`: it has no parameter {} (--params {text})",
                k.name,
                lacked_params(k, s).iter().map(|p| format!("`{p}`")).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    for (i, l) in lists.iter().enumerate() {
        if !l.kernels.is_empty() && !l.kernels.iter().any(&matches) {
            out.status(format!("   Skipping {}: no kernel matches --kernel", l.crate_name));
        }
        for k in l.kernels.iter().filter(|k| matches(k)) {
            let (at_model, named): (Vec<&String>, Vec<&String>) =
                s.shapes.iter().partition(|v| models.asked.contains(v));
            let missing: Vec<&String> =
                named.into_iter().filter(|n| !k.shapes.iter().any(|(m, _)| m == *n)).collect();
            let uncalled: Vec<&String> =
                at_model.into_iter().filter(|v| !models.calls(i, &k.name, v)).collect();
            if !s.shapes.is_empty() && missing.len() + uncalled.len() == s.shapes.len() {
                let have: Vec<&str> = k.shapes.iter().map(|(n, _)| n.as_str()).collect();
                let mut why = Vec::new();
                if !missing.is_empty() {
                    why.push(format!(
                        "it has no shape {} (it has: {})",
                        missing.iter().map(|m| format!("`{m}`")).collect::<Vec<_>>().join(", "),
                        have.join(", ")
                    ));
                }
                for v in uncalled {
                    let (model, shape) = v.split_once('@').unwrap_or((v, ""));
                    why.push(format!("model `{model}` does not call it at `{shape}`"));
                }
                out.note(format!("note: skipping `{}`: {}", k.name, why.join("; ")));
            }
        }
    }
    Ok(())
}

/// Every `--kernel` pattern must match a kernel of some selected crate (else a usage error
/// naming what exists).
pub fn check_kernels(lists: &[&ListDoc], s: &Selection) -> Result<(), Failure> {
    let all = || lists.iter().flat_map(|l| &l.kernels);
    for pat in &s.kernels {
        if !all().any(|k| glob(pat, &k.name)) {
            let have: Vec<&str> = all().map(|k| k.name.as_str()).collect();
            return Err(fail(
                Exit::Config,
                format!("--kernel {pat}: no such kernel (have: {})", have.join(", ")),
            ));
        }
    }
    Ok(())
}

/// The kernel's space with the parameters named in `--params` pinned to their given values
/// (`--all-variants --params bufs=2` walks every variant with two buffers; `tune --params
/// bufs=2` searches them).
pub fn pinned_space(k: &KernelInfo, text: Option<&str>) -> Result<Space, Failure> {
    let mut space = k.space.clone();
    let Some(text) = text else { return Ok(space) };
    let given = parse_params(k, Some(text))?;
    for name in text.split(',').filter_map(|kv| kv.split('=').next()).map(str::trim) {
        if let Some(v) = given.get(name) {
            space.0.insert(name.to_string(), vec![v.clone()]);
        }
    }
    Ok(space)
}

/// A kernel's parameter names, for messages.
fn param_names(k: &KernelInfo) -> String {
    if k.params.is_empty() {
        return "no parameters".into();
    }
    k.params.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
}

/// The selected kernels of one crate's list (lazily: nothing is enumerated). `tuned`: for
/// `--tuned`, the crate's tuned database (none: every shape runs the default) and the
/// chip's name, which records go by (a chip file's stem: [`chip_spec`]). `at_models`: the
/// crate's kernel calls that `--shape MODEL@SHAPE` selects ([`ModelShapes::of_crate`]),
/// after the selected named shapes, each under its label.
pub fn select(
    list: &ListDoc,
    s: &Selection,
    tuned: Option<(&TunedDb, &str)>,
    at_models: &[ModelShape],
) -> Result<Vec<KernelSelection>, Failure> {
    let mut out = Vec::new();
    for k in &list.kernels {
        if !s.kernels.is_empty() && !s.kernels.iter().any(|p| glob(p, &k.name)) {
            continue;
        }
        if left_out_by_params(k, s) {
            continue;
        }
        let shapes: Vec<(String, Shape)> = k
            .shapes
            .iter()
            .filter(|(sn, _)| s.shapes.is_empty() || s.shapes.contains(sn))
            .cloned()
            .chain(
                at_models
                    .iter()
                    .filter(|c| c.kernel == k.name)
                    .map(|c| (c.label.clone(), c.shape.clone())),
            )
            .collect();
        let mut untuned = Vec::new();
        let params = if s.all_variants {
            ParamSets::All(pinned_space(k, s.params.as_deref())?)
        } else if s.tuned {
            let record = |dims: &Shape| tuned.and_then(|(db, chip)| db.find(&k.name, chip, dims));
            ParamSets::PerShape(
                shapes
                    .iter()
                    .map(|(name, dims)| match record(dims) {
                        Some(r) => r.params.clone(),
                        None => {
                            untuned.push(name.clone());
                            k.defaults.clone()
                        }
                    })
                    .collect(),
            )
        } else {
            ParamSets::One(parse_params(k, s.params.as_deref())?)
        };
        let sel = KernelSelection { kernel: k.clone(), shapes, params, untuned };
        if s.all_variants && sel.count() > GRID_LIMIT {
            return Err(fail(
                Exit::Config,
                format!(
                    "--all-variants: kernel `{}` has {} variants in its space (limit {GRID_LIMIT}); \
                     search it with `{}` or narrow the space",
                    k.name,
                    sel.count(),
                    crate::command_line::CommandLine::new("tune").flag("--kernel", &k.name)
                ),
            ));
        }
        out.push(sel);
    }
    Ok(out)
}

/// The simulator's chip of a spec (a built-in, or a chip file's text that `chip_spec`
/// validated); `None` for one that no longer parses.
pub fn chip_of(spec: &ChipSpec) -> Option<neuron_sim::Chip> {
    match &spec.toml {
        Some(t) => neuron_sim::Chip::from_toml(t).ok(),
        None => neuron_sim::Chip::builtin(&spec.name),
    }
}

/// `--chip`: a built-in name or a chip TOML file.
pub fn chip_spec(chip: &str) -> Result<ChipSpec, Failure> {
    let path = Path::new(chip);
    if neuron_sim::Chip::builtin(chip).is_some() {
        return Ok(ChipSpec::builtin(chip));
    }
    if path.exists() {
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail(Exit::Config, format!("{}: {e}", path.display())))?;
        let parsed = neuron_sim::Chip::from_toml(&text)
            .map_err(|e| fail(Exit::Config, format!("{}: {e}", path.display())))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| chip.into());
        // Records, journals and stored results of a chip file go by its name: one named
        // like a built-in chip would replace that chip's (and resume its journals).
        if neuron_sim::Chip::builtin(&name).is_some() {
            return Err(fail(
                Exit::Config,
                format!(
                    "{}: a chip file may not be named like the built-in chip `{name}`: its \
                     results would replace the built-in chip's in tuned records, journals and \
                     baselines; rename the file and its `name` (e.g. `{name}-what-if`)",
                    path.display()
                ),
            ));
        }
        // The tool names a chip file by its stem (tuned records, journals, baselines); the
        // simulator by its `name` (profiles, traces). A copy of `chip trn2` that still says
        // `name = "trn2"` would label another chip's traces as trn2's: they must agree.
        if parsed.name != name {
            return Err(fail(
                Exit::Config,
                format!(
                    "{}: name = \"{}\" but the file is named `{name}`: a chip file's `name` \
                     must be its file name without .toml (set name = \"{name}\")",
                    path.display(),
                    parsed.name
                ),
            ));
        }
        return Ok(ChipSpec { name, toml: Some(text) });
    }
    // Spelled as a path: the file is what is missing.
    let what = if chip.ends_with(".toml") || chip.contains(std::path::MAIN_SEPARATOR) {
        format!("no such file (a chip is a built-in name, {}, or a chip TOML file)", builtins())
    } else {
        format!("not a built-in chip ({}) nor a chip TOML file", builtins())
    };
    Err(fail(Exit::Config, format!("--chip {chip}: {what}")))
}

fn builtins() -> String {
    neuron_sim::Chip::BUILTIN.join(", ")
}

#[cfg(test)]
mod tests {
    use super::{glob, KernelSelection, ParamSets};
    use neuron_tune_protocol::{KernelInfo, Params, Shape};

    #[test]
    fn tuned_parameters_stay_with_their_shape_through_a_partition() {
        let shape = |n: u64| Shape([("n".to_string(), n)].into_iter().collect());
        let p = |b: i64| Params::new().with("bufs", b);
        let mut k = KernelSelection {
            kernel: KernelInfo {
                name: "k".into(),
                doc: String::new(),
                params: Vec::new(),
                space: Default::default(),
                defaults: p(1),
                shapes: Vec::new(),
                valid_variants: Default::default(),
            },
            shapes: vec![("a".into(), shape(1)), ("b".into(), shape(2)), ("c".into(), shape(3))],
            params: ParamSets::PerShape(vec![p(2), p(3), p(2)]),
            untuned: vec!["a".into(), "c".into()],
        };
        // One variant per shape, each with its own parameters; two distinct sets.
        let pairs = |k: &KernelSelection| -> Vec<(String, Params)> {
            k.variants().map(|v| (v.shape_name, v.params)).collect()
        };
        assert_eq!(pairs(&k), [("a".into(), p(2)), ("b".into(), p(3)), ("c".into(), p(2))]);
        assert_eq!((k.count(), k.params.count()), (3, 2));
        k.retain_shapes(|name, _| name != "a");
        assert_eq!(pairs(&k), [("b".into(), p(3)), ("c".into(), p(2))]);
        // Another partition's shape is not named as running its default here.
        assert_eq!(k.untuned, ["c"]);
    }

    /// An unmatched `--shape` with an `@` gets the `tune --model` hint in `tune` (no
    /// `models`: it takes no `MODEL@SHAPE`) only; the commands that take the form do not
    /// send people to `tune`.
    #[test]
    fn the_tune_model_hint_is_for_tune_alone() {
        let list = neuron_tune_protocol::ListDoc {
            protocol: 1,
            harness_version: String::new(),
            sim_version: String::new(),
            crate_name: "c".into(),
            kernels: vec![KernelInfo {
                name: "k".into(),
                doc: String::new(),
                params: Vec::new(),
                space: Default::default(),
                defaults: Params::new(),
                shapes: vec![("small".into(), Shape::new(&[("n", 1)]))],
                valid_variants: Default::default(),
            }],
            models: Vec::new(),
        };
        let s = crate::cli::Selection { shapes: vec!["m@tiny".into()], ..Default::default() };
        let out = crate::output::Reporter::new(true);
        let hint = "`tune --model m --shape tiny` tunes";
        let tune = super::check_names(&[&list], &s, None, &out).unwrap_err();
        assert!(tune.message.contains(hint), "{}", tune.message);
        let models = crate::model_calls::ModelShapes::default();
        let bench = super::check_names(&[&list], &s, Some(&models), &out).unwrap_err();
        assert!(
            bench.message.starts_with("--shape m@tiny: no selected kernel"),
            "{}",
            bench.message
        );
        assert!(!bench.message.contains("tune"), "{}", bench.message);
    }

    #[test]
    fn globs_match_like_a_shell() {
        assert!(glob("gemm", "gemm") && !glob("gemm", "gemm2"));
        assert!(glob("attention_*", "attention_flash") && !glob("attention_*", "flash_attention"));
        assert!(
            glob("*norm", "rmsnorm")
                && glob("*", "x")
                && glob("a*c*e", "abcde")
                && !glob("a*c*e", "abcd")
        );
    }
}
