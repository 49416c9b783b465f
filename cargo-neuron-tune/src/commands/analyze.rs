//! `analyze FILE \[FILE2\]`: each file's verdict, and with two files the comparison table and
//! the fields where they disagree most (the logic is [`crate::analyze`]).

use crate::analyze::{self, Origin, Summary};
use crate::exit::{fail, Exit, Failure};
use crate::output::{Event, Reporter, Table};
use std::path::PathBuf;

pub fn run(files: &[PathBuf], out: &Reporter) -> Result<Exit, Failure> {
    let summaries: Vec<Summary> = files
        .iter()
        .map(|f| analyze::read(f).map_err(|e| fail(Exit::Config, e)))
        .collect::<Result<_, _>>()?;
    let verdicts: Vec<analyze::Verdict> = summaries.iter().map(analyze::verdict).collect();
    for (s, v) in summaries.iter().zip(&verdicts) {
        let what = match (s.origin, &s.chip) {
            (Origin::Simulated, Some(chip)) => format!("simulated on {chip}"),
            (Origin::Simulated, None) => "simulated".to_string(),
            (Origin::Measured, _) => "measured (neuron-profile)".to_string(),
        };
        out.result(format!("\n  {} — {what}", s.path));
        out.result(format!("    {}", v.summary));
        for e in &v.evidence {
            out.result(format!("      · {e}"));
        }
        if let Some(sv) = &s.simulator_verdict {
            out.result(format!("      · the simulator's critical-path verdict: {sv}"));
        }
    }
    let (comparison, agree) = match summaries.as_slice() {
        [a, b] => {
            let rows = analyze::compare(a, b);
            let (la, lb) = labels(a, b);
            print_comparison(out, (&la, &lb), &rows);
            let agree = verdicts[0].kind == verdicts[1].kind;
            out.result(if agree {
                format!("\n  The verdicts agree: {}.", verdicts[0].kind)
            } else {
                format!(
                    "\n  The verdicts differ: {la} says {}, {lb} says {}.",
                    verdicts[0].kind, verdicts[1].kind
                )
            });
            (rows, Some(agree))
        }
        _ => (Vec::new(), None),
    };
    out.event(&Event::Analyze {
        files: summaries
            .into_iter()
            .zip(verdicts)
            .map(|(summary, verdict)| analyze::Analyzed { summary, verdict })
            .collect(),
        comparison,
        agree,
    });
    Ok(Exit::Ok)
}

/// The columns' names: what each file is (simulated, measured), or their paths when both
/// are of one kind.
fn labels(a: &Summary, b: &Summary) -> (String, String) {
    if a.origin == b.origin {
        (a.path.clone(), b.path.clone())
    } else {
        (a.origin.as_str().to_string(), b.origin.as_str().to_string())
    }
}

fn print_comparison(out: &Reporter, (la, lb): (&str, &str), rows: &[analyze::Row]) {
    let ratio = format!(">{la} vs {lb}");
    let mut t = Table::new(&["field", &format!(">{la}"), &format!(">{lb}"), &ratio]);
    let cell = |field: &str, v: Option<f64>| v.map_or("—".into(), |v| analyze::show(field, v));
    for r in rows {
        let delta = match (r.delta, r.points) {
            (Some(d), true) => format!("{d:+.1} pts"),
            (Some(d), false) => format!("{d:.2}×"),
            (None, _) => String::new(),
        };
        t.row(vec![r.label.clone(), cell(&r.field, r.a), cell(&r.field, r.b), delta]);
    }
    out.result("");
    out.table(&t, "  ");
    let worst = analyze::disagreements(rows);
    if worst.is_empty() {
        out.result(
            "\n  Time, engine activity and HBM traffic agree within a factor of 1.2 (activities within 10 points).",
        );
    } else {
        out.result("\n  Where they disagree most:");
        for r in worst.iter().take(4) {
            out.result(format!(
                "    · {}: {} {} vs {} {}",
                r.label,
                cell(&r.field, r.a),
                la,
                cell(&r.field, r.b),
                lb
            ));
        }
    }
}
