//! Which tuning runs `report` shows: those of the selected packages. The journals are the
//! target directory's, which other packages (and other workspaces) share.
//!
//! A run's meta file names the package of its kernel ([`RunPackage`]: name and manifest
//! path): the run is shown when that package is selected, or, for a model's calls
//! (`model@shape`), when a selected crate lists the model. A run journaled before meta
//! files named the package goes by the kernel's name (or the model's) instead, which a
//! kernel of another package may share: [`pick`] says when one might.

use super::model::TuneRun;
use crate::commands::tune::RunPackage;
use crate::tuned::TunedRecord;

/// A selected kernel crate, as runs are matched against it.
#[derive(Clone, Debug)]
pub struct Selected {
    pub package: RunPackage,
    /// The kernels and models its harness lists.
    pub kernels: Vec<String>,
    pub models: Vec<String>,
}

/// What [`pick`] found.
#[derive(Debug, Default)]
pub struct Picked {
    pub runs: Vec<TuneRun>,
    /// Kernels whose runs name no package and were matched by name, though another
    /// package may have a kernel of that name: two selected crates list it, a kernel crate
    /// left out of the selection configures it, or a run of it names a package left out.
    /// Sorted, each once.
    pub ambiguous: Vec<String>,
}

/// The runs of the `selected` packages. `unselected`: the workspace's kernel crates left out
/// of the selection, each with the kernels its configuration names. A run that names no
/// package and whose kernel exactly one selected crate lists is taken for that package's
/// (so it joins that package's runs of the kernel in the report).
pub fn pick(
    selected: &[Selected],
    unselected: &[(String, Vec<String>)],
    runs: Vec<TuneRun>,
) -> Picked {
    let lists_model = |s: &Selected, r: &TuneRun| {
        r.meta.shape.split_once('@').is_some_and(|(m, _)| s.models.iter().any(|x| x == m))
    };
    // Kernels that packages left out of the selection recorded runs of.
    let elsewhere: Vec<String> = runs
        .iter()
        .filter(|r| {
            r.meta.package.as_ref().is_some_and(|p| !selected.iter().any(|s| s.package == *p))
        })
        .map(|r| r.meta.kernel.clone())
        .collect();
    let mut picked = Picked::default();
    for mut r in runs {
        let ours = match &r.meta.package {
            Some(p) => selected.iter().any(|s| s.package == *p || lists_model(s, &r)),
            None => {
                let by_kernel: Vec<&Selected> =
                    selected.iter().filter(|s| s.kernels.contains(&r.meta.kernel)).collect();
                let by_model = selected.iter().any(|s| lists_model(s, &r));
                if !by_kernel.is_empty() || by_model {
                    // (Matched by the model alone, it is the model's crate's call.)
                    let other = !by_kernel.is_empty()
                        && (by_kernel.len() > 1
                            || elsewhere.contains(&r.meta.kernel)
                            || unselected.iter().any(|(_, ks)| ks.contains(&r.meta.kernel)));
                    if other {
                        picked.ambiguous.push(r.meta.kernel.clone());
                    }
                    if let [one] = by_kernel.as_slice() {
                        r.meta.package = Some(one.package.clone());
                    }
                }
                !by_kernel.is_empty() || by_model
            }
        };
        if ours {
            picked.runs.push(r);
        }
    }
    picked.ambiguous.sort();
    picked.ambiguous.dedup();
    picked
}

/// Whether a record of a database that is not a selected package's is of a call of a
/// selected crate's model, as its runs are (`pick`): its label is `model@shape` of such a
/// model, or one of `runs` (those shown) is of such a call at the record's kernel, chip and
/// dimensions — records are kept by dimensions, so a call may use a record labelled by a
/// named shape of the same dimensions (`small`).
pub fn of_selected_models(record: &TunedRecord, selected: &[Selected], runs: &[TuneRun]) -> bool {
    let model_of = |shape: &str| -> bool {
        shape
            .split_once('@')
            .is_some_and(|(m, _)| selected.iter().any(|s| s.models.iter().any(|x| x == m)))
    };
    model_of(&record.shape)
        || runs.iter().any(|r| {
            model_of(&r.meta.shape)
                && r.meta.kernel == record.kernel
                && r.meta.chip.name == record.chip
                && r.meta.dims == record.dims
        })
}

/// Whether the journal at `journal` may be a run of the `selected` packages, told by its
/// name alone: named by one of them (`tune-<package>.`), of a kernel one of them lists
/// (`tune-<kernel>-`, as journals were named before they named their package), or of a call
/// of a model one of them lists (`…-<model>-<shape>-…`). For a journal whose meta file does
/// not read, so whose run cannot be told: the report says so when the run may be one of
/// the selected packages', not for another package's (the target dir is shared).
pub fn may_be_selected(journal: &std::path::Path, selected: &[Selected]) -> bool {
    use crate::commands::tune::sanitize;
    let name = journal.file_name().and_then(|n| n.to_str()).unwrap_or_default();
    let Some(rest) = name.strip_prefix("tune-") else { return false };
    selected.iter().any(|s| {
        rest.starts_with(&format!("{}.", sanitize(&s.package.name)))
            || s.kernels.iter().any(|k| rest.starts_with(&format!("{k}-")))
            || s.models.iter().any(|m| rest.contains(&format!("-{}-", sanitize(m))))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn pkg(name: &str) -> RunPackage {
        RunPackage { name: name.into(), manifest: format!("{name}/Cargo.toml") }
    }

    fn run(kernel: &str, shape: &str, package: Option<RunPackage>, seed: u64) -> TuneRun {
        let mut meta: crate::commands::tune::JournalMeta =
            serde_json::from_value(serde_json::json!({
                "kernel": kernel, "shape": shape, "dims": {"n": 4}, "chip": {"name": "trn2"},
                "strategy": "grid", "seed": seed, "budget": 2, "objective": "time",
                "sim_version": "v", "default": null
            }))
            .unwrap();
        meta.package = package;
        TuneRun {
            journal: PathBuf::from("j"),
            meta,
            entries: vec![],
            rounds: vec![],
            unread: Default::default(),
        }
    }

    fn selected(name: &str, kernels: &[&str], models: &[&str]) -> Selected {
        Selected {
            package: pkg(name),
            kernels: kernels.iter().map(|k| k.to_string()).collect(),
            models: models.iter().map(|m| m.to_string()).collect(),
        }
    }

    fn seeds(p: &Picked) -> Vec<u64> {
        p.runs.iter().map(|r| r.meta.seed).collect()
    }

    #[test]
    fn a_run_goes_by_its_package_and_an_older_one_by_its_kernels_name() {
        let a = selected("a", &["double"], &[]);
        let runs = || {
            vec![
                run("double", "small", Some(pkg("a")), 1),
                run("double", "small", Some(pkg("b")), 2),
                // Same name, same package name, another workspace's manifest: not a's.
                run(
                    "double",
                    "small",
                    Some(RunPackage { name: "a".into(), manifest: "x/Cargo.toml".into() }),
                    3,
                ),
                run("double", "small", None, 4),
                run("other", "small", None, 5),
            ]
        };
        let p = pick(std::slice::from_ref(&a), &[], runs());
        assert_eq!(seeds(&p), [1, 4]);
        // The older run is taken for a's (the one selected crate that lists `double`), but
        // b recorded a `double` too: it may be b's, and the report says so.
        assert_eq!(p.runs[1].meta.package, Some(pkg("a")));
        assert_eq!(p.ambiguous, ["double"]);
        // Without the other packages' runs, and no other crate configuring `double`:
        // nothing to say.
        let alone: Vec<TuneRun> =
            runs().into_iter().filter(|r| [1, 4, 5].contains(&r.meta.seed)).collect();
        assert!(pick(std::slice::from_ref(&a), &[], alone.clone()).ambiguous.is_empty());
        // A kernel crate left out of the selection that configures `double`: ambiguous.
        let b = [("b".to_string(), vec!["double".to_string()])];
        assert_eq!(pick(std::slice::from_ref(&a), &b, alone.clone()).ambiguous, ["double"]);
        // Two selected crates list it: shown, ambiguous, and left without a package.
        let both = [a.clone(), selected("b", &["double"], &[])];
        let p = pick(&both, &[], alone);
        assert_eq!(seeds(&p), [1, 4]);
        assert_eq!(
            (p.ambiguous.as_slice(), &p.runs[1].meta.package),
            (&["double".to_string()][..], &None)
        );
    }

    #[test]
    fn a_models_calls_are_its_crates_too() {
        let models = selected("models", &[], &["net"]);
        let runs = vec![
            run("double", "net@tiny", Some(pkg("kernels")), 1),
            run("double", "net@tiny", None, 2),
            run("double", "small", Some(pkg("kernels")), 3),
        ];
        let p = pick(&[models], &[], runs);
        assert_eq!(seeds(&p), [1, 2]);
        assert!(p.ambiguous.is_empty());
        // Matched by the model, not by a kernel the models crate lists: no package given.
        assert_eq!(p.runs[1].meta.package, None);
    }

    #[test]
    fn a_journal_is_told_by_its_name_to_be_of_the_selected_packages_or_not() {
        let sel = [selected("kernels-a", &["double"], &[]), selected("models", &[], &["net"])];
        let of = |name: &str| may_be_selected(std::path::Path::new(name), &sel);
        // Named by a selected package (sanitized: `-` stays), or by none and of its kernel.
        assert!(of("tune-kernels-a.double-small-n4-trn2-grid-1.jsonl"));
        assert!(of("tune-double-small-n4-trn2-grid-1.jsonl"));
        // A call of a selected crate's model, whichever package's kernel it is.
        assert!(of("tune-kernels-b.rmsnorm-net-tiny-rows4-trn2-grid-1.jsonl"));
        // Another package's run of a kernel of the same name, another kernel, a kernel whose
        // name only starts like a selected one's.
        assert!(!of("tune-kernels-b.double-small-n4-trn2-grid-1.jsonl"));
        assert!(!of("tune-triple-small-n4-trn2-grid-1.jsonl"));
        assert!(!of("tune-double_x-small-n4-trn2-grid-1.jsonl"));
    }

    #[test]
    fn a_record_of_a_selected_models_call_is_the_models_crates_too() {
        let models = [selected("models", &[], &["net"])];
        let record = |shape: &str, n: i64| TunedRecord {
            kernel: "double".into(),
            chip: "trn2".into(),
            shape: shape.into(),
            dims: serde_json::from_value(serde_json::json!({"n": n})).unwrap(),
            params: Default::default(),
            time_us: 1.0,
            program_hash: "h".into(),
            tool_version: "t".into(),
            sim_version: "v".into(),
            validated_shapes: Vec::new(),
            validated_models: Vec::new(),
        };
        let call = run("double", "net@tiny", Some(pkg("kernels")), 1);
        // Labelled by the model's call, with or without a run shown.
        assert!(of_selected_models(&record("net@tiny", 8), &models, &[]));
        // Labelled by a named shape of the call's dimensions ({n: 4}): the call uses it.
        assert!(of_selected_models(&record("small", 4), &models, std::slice::from_ref(&call)));
        // A named shape's record at other dimensions, or with no call of the model shown;
        // another model's call.
        assert!(!of_selected_models(&record("small", 8), &models, std::slice::from_ref(&call)));
        assert!(!of_selected_models(&record("small", 4), &models, &[]));
        assert!(!of_selected_models(&record("other@tiny", 4), &models, &[]));
        let other = run("double", "other@tiny", Some(pkg("kernels")), 2);
        assert!(!of_selected_models(&record("small", 4), &models, &[other]));
    }
}
