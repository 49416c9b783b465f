//! `baseline save` and `baseline show`: the committed baseline of model throughput that
//! `gate --baseline` compares against.

use super::open_store;
use crate::baseline::{self, Baseline, BaselineEntry};
use crate::cargo::CargoFlags;
use crate::command_line::{chip_file_hint, CommandLine};
use crate::exit::{fail, Exit, Failure};
use crate::gate::{dims, tokens};
use crate::models;
use crate::output::{Event, Reporter, Table};
use crate::select::chip_spec;
use crate::workspace::{Ctx, Workspace};
use std::path::{Path, PathBuf};

/// The baseline file: `--baseline`, else `neuron-tune.baseline.toml` at the workspace root.
fn path_of(cargo: &CargoFlags, file: Option<&Path>) -> Result<PathBuf, Failure> {
    match file {
        Some(p) => Ok(p.to_path_buf()),
        None => Ok(PathBuf::from(cargo.metadata()?.workspace_root).join(baseline::FILE_NAME)),
    }
}

/// Evaluate the selected models and record them in the baseline file.
pub fn save(
    cargo: &CargoFlags,
    file: Option<&Path>,
    patterns: &[String],
    shapes: &[String],
    chip: &str,
    ctx: &Ctx,
) -> Result<Exit, Failure> {
    let chip = chip_spec(chip)?;
    let mut ws = Workspace::open(cargo, ctx)?;
    let path = file.map_or_else(|| ws.root.join(baseline::FILE_NAME), Path::to_path_buf);
    // The store's lock first: a save running in the same target dir has written the file
    // by the time this one reads it, so neither loses the other's entries.
    let store = open_store(&ws.target_dir, &ctx.out)?;
    let (mut b, damaged) = Baseline::load_for_save(&path)?;
    let lists: Vec<&neuron_tune_protocol::ListDoc> = ws.crates.iter().map(|c| &c.list).collect();
    let targets = models::select_models(&lists, patterns, shapes)?;
    // A damaged entry is replaced by measuring it again; one this save does not measure
    // would be lost, so the save is refused before it simulates anything.
    for d in &damaged {
        let measured = d.chip == chip.name
            && targets.iter().any(|t| t.model == d.model && t.shape_name == d.shape);
        if !measured {
            return Err(fail(Exit::Config, unmeasured_damage(&path, d)));
        }
        ctx.out.note(format!("warning: {}: {}; measured again now", path.display(), d.message));
    }
    // Entries of models or shapes the workspace no longer has (removed or renamed) go: the
    // gate fails on them until they do. With -p or --exclude, only those of a selected
    // package: another package's model (or one of an entry that does not name its
    // package) is not looked at, so it is kept.
    let exists = |e: &BaselineEntry| {
        e.in_selection(cargo) != Some(true)
            || lists
                .iter()
                .flat_map(|l| &l.models)
                .any(|m| m.name == e.model && m.shapes.iter().any(|(s, _)| *s == e.shape))
    };
    for e in b.drop_entries(exists) {
        ctx.out.note(format!(
            "note: {}: dropping {} at {} on {}: no such model or shape in the workspace",
            path.display(),
            e.model,
            e.shape,
            e.chip
        ));
    }
    let set = ws.tuned.get()?;
    let out = &ctx.out;
    let mut failed = Vec::new();
    let (mut calls, mut cached) = (0, 0);
    for t in &targets {
        out.status(format!("   Simulating {} at {} on {}", t.model, t.shape_name, chip.name));
        let c = &mut ws.crates[t.krate];
        let records = set.for_model(&c.krate.manifest_path, &chip.name);
        let tuned = records.tuned();
        let sim_version = c.list.sim_version.clone();
        let package = c.krate.package.clone();
        let env = models::Bench {
            store: &store,
            sim_version: &sim_version,
            chip: &chip,
            records: &records,
            force: false,
            out,
        };
        match models::evaluate(&mut c.pool, &env, t, &tuned)? {
            Ok(run) => {
                for s in run.calls.iter().filter_map(|c| c.stale.as_ref()) {
                    out.note(format!("warning: stale tuned entry: {s}"));
                }
                let (c, n) = run.cached_calls();
                (cached, calls) = (cached + c, calls + n);
                b.record(BaselineEntry::from_run(&run, &package, &sim_version));
            }
            Err(e) => {
                out.note(format!("error: {e}"));
                failed.push(e);
            }
        }
    }
    let summary = Event::Summary(crate::output::Summary {
        command: "baseline save".into(),
        variants: calls,
        simulated: Some(calls - cached),
        cached: Some(cached),
        failed: Some(failed.len()),
        ..Default::default()
    });
    if !failed.is_empty() {
        out.event(&summary);
        // Never a partial baseline: the file is left as it was.
        return Err(fail(
            Exit::Check,
            format!("{} model(s) could not be evaluated; the baseline is unchanged", failed.len()),
        ));
    }
    b.save()?;
    show_entries(out, &b);
    // The summary is the last event (docs/json-events.md).
    out.event(&summary);
    out.status(format!("   Wrote {} ({} entries)", b.path().display(), b.entries().len()));
    Ok(Exit::Ok)
}

/// Print the baseline file.
pub fn show(cargo: &CargoFlags, file: Option<&Path>, out: &Reporter) -> Result<Exit, Failure> {
    let path = path_of(cargo, file)?;
    let b = Baseline::load(&path)?;
    show_entries(out, &b);
    Ok(Exit::Ok)
}

fn show_entries(out: &Reporter, b: &Baseline) {
    out.event(&Event::Baseline { path: b.path().to_path_buf(), entries: b.entries().to_vec() });
    out.result(format!("\n  {}", b.path().display()));
    let mut t = Table::new(&[
        "model",
        "shape",
        "chip",
        ">tokens/s",
        ">total ms",
        ">calls",
        ">tuned",
        "simulator",
    ]);
    for e in b.entries() {
        t.row(vec![
            e.model.clone(),
            format!("{} {{{}}}", e.shape, dims(&e.dims)),
            e.chip.clone(),
            tokens(e.tokens_per_s),
            format!("{:.3}", e.total_us / 1e3),
            e.calls.len().to_string(),
            e.calls.iter().filter(|c| c.tuned).count().to_string(),
            e.sim_version.clone(),
        ]);
    }
    out.table(&t, "  ");
}

/// A damaged entry that a save would not measure again (so would lose): what is wrong, and
/// the save that does measure it. The entry names its chip as records do (a chip file by
/// its name: [`CommandLine::record_chip`]).
fn unmeasured_damage(path: &Path, d: &baseline::Damaged) -> String {
    let save = CommandLine::new("baseline save")
        .flag("--model", &d.model)
        .flag("--shape", &d.shape)
        .record_chip(&d.chip);
    format!(
        "{}: {}; this save does not measure it again: include it (`{save}`{}), or delete \
         that entry from the file",
        path.display(),
        d.message,
        chip_file_hint(&d.chip)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The advice is a save that measures the entry: a built-in chip by its name, a chip
    /// file by its file name with a word that `--chip` wants its path.
    #[test]
    fn a_damaged_entry_left_out_of_a_save_is_told_with_the_save_that_measures_it() {
        let damaged = |chip: &str| baseline::Damaged {
            model: "qwen3".into(),
            shape: "tiny".into(),
            chip: chip.into(),
            message: "model #1: its checksum does not match".into(),
        };
        let path = Path::new("ws/neuron-tune.baseline.toml");
        let m = unmeasured_damage(path, &damaged("trn1"));
        assert_eq!(
            m,
            "ws/neuron-tune.baseline.toml: model #1: its checksum does not match; this save \
             does not measure it again: include it (`cargo neuron-tune baseline save --model \
             qwen3 --shape tiny --chip trn1`), or delete that entry from the file"
        );
        let m = unmeasured_damage(path, &damaged("my chip"));
        let want = "(`cargo neuron-tune baseline save --model qwen3 --shape tiny --chip 'my \
                    chip.toml'`, `--chip` giving the path of the chip file 'my chip.toml')";
        assert!(m.contains(want), "{m}");
    }
}
