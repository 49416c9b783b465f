//! `analyze`: one bottleneck verdict for a profile measured on a NeuronCore and for one the
//! simulator made, and a field-by-field table of where the two disagree.
//!
//! A user with hardware has `neuron-profile`'s summary JSON of a kernel run; the simulator
//! writes its profile under the same field names (docs/analyze.md lists them with their
//! sources). So one reader takes either file, and one rule judges both: it looks only at what
//! a device summary carries — how busy each engine, the DMA queues and HBM were — because the
//! simulator's own verdict rests on its critical path, which no device summary has. The
//! simulator's critical-path verdict is shown beside it for a simulated file.

use serde::Serialize;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::Path;

/// Where a profile comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// `neuron-profile` on a device.
    Measured,
    /// The simulator (`cargo neuron-tune profile --message-format json`).
    Simulated,
}

impl Origin {
    pub fn as_str(self) -> &'static str {
        match self {
            Origin::Measured => "measured",
            Origin::Simulated => "simulated",
        }
    }
}

/// How a field's value is read and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Seconds in the file, microseconds once read.
    Seconds,
    /// An activity: a fraction 0–1 once read (the file may hold a fraction or a percent).
    Fraction,
    Bytes,
    Count,
    Flops,
}

/// One summary field: its neuron-profile name, what the table calls it, and its unit.
pub struct Field {
    pub key: &'static str,
    pub label: &'static str,
    pub unit: Unit,
}

const fn field(key: &'static str, label: &'static str, unit: Unit) -> Field {
    Field { key, label, unit }
}

/// The fields compared, in table order (neuroncore.md §5 \[SCHEMA\], docs/analyze.md).
pub const FIELDS: &[Field] = &[
    field("total_time", "time", Unit::Seconds),
    field("tensor_engine_active_time_percent", "TensorE active", Unit::Fraction),
    field("vector_engine_active_time_percent", "VectorE active", Unit::Fraction),
    field("scalar_engine_active_time_percent", "ScalarE active", Unit::Fraction),
    field("gpsimd_engine_active_time_percent", "GpSimd active", Unit::Fraction),
    field("dma_active_time_percent", "DMA active", Unit::Fraction),
    field("mbu_estimated_percent", "HBM bandwidth used (MBU)", Unit::Fraction),
    field("hbm_read_bytes", "HBM read", Unit::Bytes),
    field("hbm_write_bytes", "HBM written", Unit::Bytes),
    field("spill_save_bytes", "spilled", Unit::Bytes),
    field("spill_reload_bytes", "reloaded from spill", Unit::Bytes),
    field("dma_transfer_count", "DMA transfers", Unit::Count),
    field("dma_transfer_average_bytes", "bytes per DMA transfer", Unit::Bytes),
    field("mfu_estimated_percent", "MFU", Unit::Fraction),
    field("hfu_estimated_percent", "HFU", Unit::Fraction),
    field("hardware_flops", "hardware FLOPs", Unit::Flops),
    field("transpose_flops", "transpose FLOPs", Unit::Flops),
    field("matmul_instruction_count", "matmul instructions", Unit::Count),
    field("tensor_engine_instruction_count", "TensorE instructions", Unit::Count),
    field("vector_engine_instruction_count", "VectorE instructions", Unit::Count),
    field("scalar_engine_instruction_count", "ScalarE instructions", Unit::Count),
    field("gpsimd_engine_instruction_count", "GpSimd instructions", Unit::Count),
];

/// The engines whose activity the verdict weighs, as (field, name in verdicts).
const ENGINES: [(&str, &str); 4] = [
    ("tensor_engine_active_time_percent", "Tensor"),
    ("vector_engine_active_time_percent", "Vector"),
    ("scalar_engine_active_time_percent", "Scalar"),
    ("gpsimd_engine_active_time_percent", "GpSimd"),
];

/// Below this activity nothing is busy enough to be the limit: the time goes to waiting.
pub const BUSY: f64 = 0.5;

/// A profile summary as read: values by field key, normalised (times in µs, activity as a
/// fraction 0–1); fields the file does not have are absent.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    pub path: String,
    pub origin: Origin,
    pub values: BTreeMap<&'static str, f64>,
    /// A simulated profile's chip.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chip: Option<String>,
    /// A simulated profile's own verdict (from its critical path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulator_verdict: Option<String>,
}

impl Summary {
    pub fn get(&self, key: &str) -> Option<f64> {
        self.values.get(key).copied()
    }

    /// HBM bytes moved per second of run time, in GB/s.
    pub fn hbm_gbps(&self) -> Option<f64> {
        let bytes = self.get("hbm_read_bytes")? + self.get("hbm_write_bytes").unwrap_or(0.0);
        let us = self.get("total_time").filter(|t| *t > 0.0)?;
        Some(bytes / (us * 1e3))
    }
}

/// Read a profile file: a `neuron-profile` summary JSON (the summary object at the top, in a
/// `"summary"` list as `view --output-format json` writes it, or under one key such as the
/// NEFF's name), or the simulator's profile (a `profile` event line of `--message-format
/// json`, or the profile object itself). The error names the file and what is wrong.
pub fn read(path: &Path) -> Result<Summary, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    parse(&text, &path.display().to_string())
}

/// [`read`] on text already loaded; `name` names it in errors.
pub fn parse(text: &str, name: &str) -> Result<Summary, String> {
    let doc: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        // JSON lines (`--message-format json`): the `profile` event.
        Err(whole) => text
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|v| v.get("event").and_then(Value::as_str) == Some("profile"))
            .ok_or_else(|| {
                format!(
                    "{name}: not JSON ({whole}), and no line of it is a `profile` event of \
                     `cargo neuron-tune profile --message-format json`"
                )
            })?,
    };
    let obj = find_summary(&doc, 0).ok_or_else(|| {
        format!(
            "{name}: no `total_time` field: expected a neuron-profile summary JSON or the \
             simulator's profile (`cargo neuron-tune profile KERNEL --message-format json`)"
        )
    })?;
    let simulated = obj.contains_key("critical_path_us") || obj.contains_key("program_hash");
    let origin = if simulated { Origin::Simulated } else { Origin::Measured };
    let mut values = BTreeMap::new();
    for f in FIELDS {
        if let Some(v) = number(obj, f.key, name)? {
            values.insert(f.key, v);
        }
    }
    // Every share and rate is of the run's time: without one (null counts as absent,
    // docs/analyze.md) or with none (0), nothing in the file can be judged.
    match values.get("total_time") {
        None => {
            return Err(format!(
                "{name}: `total_time` is null: the run's time is what every figure is a share \
                 of"
            ))
        }
        Some(t) if *t <= 0.0 => {
            return Err(format!("{name}: `total_time` is {t}: a run takes some time (> 0)"))
        }
        Some(_) => {}
    }
    // In the file's own unit, which the engine active times below share.
    let total_s = values.get("total_time").copied();
    normalise(&mut values, origin, name)?;
    if simulated {
        // The simulator's activities are shares of the kernel's own span; a device's are
        // shares of `total_time`, launch included: rescale to the device's base.
        if let (Some(kernel), Some(&total)) =
            (number(obj, "kernel_time_us", name)?, values.get("total_time"))
        {
            if total > 0.0 && kernel <= total {
                for f in FIELDS.iter().filter(|f| f.unit == Unit::Fraction) {
                    if let Some(v) = values.get_mut(f.key) {
                        *v *= kernel / total;
                    }
                }
            }
        }
    }
    // An engine's activity given as time only (`<engine>_engine_active_time`, in the unit
    // of `total_time`): its share of the run, a fraction already.
    for (key, _) in ENGINES {
        let time_key = key.trim_end_matches("_percent");
        if values.contains_key(key) {
            continue;
        }
        if let (Some(t), Some(total)) = (number(obj, time_key, name)?, total_s) {
            if total > 0.0 {
                if t > total * (1.0 + 1e-9) {
                    return Err(format!(
                        "{name}: field `{time_key}`: {t} is longer than `total_time` ({total})"
                    ));
                }
                values.insert(key, t / total);
            }
        }
    }
    let text_of = |k: &str| obj.get(k).and_then(Value::as_str).map(str::to_string);
    Ok(Summary {
        path: name.to_string(),
        origin,
        values,
        chip: if simulated { text_of("chip") } else { None },
        simulator_verdict: obj
            .get("bottleneck")
            .and_then(|b| b.get("summary"))
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The object holding `total_time`: this one, or the first found in `profile` (an event),
/// `summary` (a list or an object), or the only value of a one-key object.
fn find_summary(v: &Value, depth: usize) -> Option<&Map<String, Value>> {
    let obj = v.as_object()?;
    if obj.contains_key("total_time") {
        return Some(obj);
    }
    if depth > 4 {
        return None;
    }
    for key in ["profile", "summary", "Summary"] {
        match obj.get(key) {
            Some(Value::Array(items)) => {
                if let Some(s) = items.iter().find_map(|i| find_summary(i, depth + 1)) {
                    return Some(s);
                }
            }
            Some(inner) => {
                if let Some(s) = find_summary(inner, depth + 1) {
                    return Some(s);
                }
            }
            None => {}
        }
    }
    match obj.values().collect::<Vec<_>>().as_slice() {
        [only] => find_summary(only, depth + 1),
        _ => None,
    }
}

/// A numeric field: a JSON number or a number written as a string; `null` counts as absent.
fn number(obj: &Map<String, Value>, key: &str, name: &str) -> Result<Option<f64>, String> {
    let parsed = match obj.get(key) {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        Some(_) => None,
    };
    match parsed {
        Some(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
        _ => Err(format!(
            "{name}: field `{key}`: expected a non-negative number, found {}",
            obj[key]
        )),
    }
}

/// Times to µs; activities to fractions. The simulator writes percents; a neuron-profile
/// summary writes its `*_percent` fields as fractions 0–1 (the published NKIBench captures,
/// docs/calibration.md §1.1), so a measured file whose activities are all ≤ 1 is read as
/// fractions and one with any above 1 as percents.
fn normalise(
    values: &mut BTreeMap<&'static str, f64>,
    origin: Origin,
    name: &str,
) -> Result<(), String> {
    if let Some(t) = values.get_mut("total_time") {
        *t *= 1e6;
    }
    let fractions: Vec<&'static str> = FIELDS
        .iter()
        .filter(|f| f.unit == Unit::Fraction && values.contains_key(f.key))
        .map(|f| f.key)
        .collect();
    let percent = match origin {
        Origin::Simulated => true,
        Origin::Measured => fractions.iter().any(|k| values[k] > 1.0),
    };
    for k in fractions {
        let v = values.get_mut(k).expect("listed above");
        if percent {
            *v /= 100.0;
        }
        if *v > 1.0 + 1e-9 {
            return Err(format!("{name}: field `{k}`: {:.1}% is above 100%", *v * 100.0));
        }
    }
    Ok(())
}

/// What limits the run, judged from its activities alone (the rule of docs/analyze.md).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// `Tensor-bound`, `Vector-bound`, `Scalar-bound`, `GpSimd-bound`, `DMA-bound`,
    /// `Latency-bound` (the simulator's kinds), or `Unknown` when the file has no activity.
    pub kind: String,
    pub summary: String,
    pub evidence: Vec<String>,
}

/// The verdict of a summary: the busiest of the four engines and the DMA side (the higher of
/// DMA queue activity and HBM bandwidth use) is the limit if it is busy at least [`BUSY`] of
/// the time; if nothing is, the run is waiting on dependencies and latencies.
pub fn verdict(s: &Summary) -> Verdict {
    let mut candidates: Vec<(String, String, f64)> = ENGINES
        .iter()
        .filter_map(|(k, e)| s.get(k).map(|v| (e.to_string(), engine_label(e), v)))
        .collect();
    let dma = match (s.get("dma_active_time_percent"), s.get("mbu_estimated_percent")) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    };
    if let Some(d) = dma {
        candidates.push(("DMA".into(), "DMA/HBM".into(), d));
    }
    let listed = candidates
        .iter()
        .map(|(_, n, v)| format!("{n} {:.0}%", v * 100.0))
        .collect::<Vec<_>>()
        .join(", ");
    let mut evidence = Vec::new();
    if !listed.is_empty() {
        evidence.push(format!("active: {listed}"));
    }
    if let Some(g) = s.hbm_gbps() {
        evidence.push(format!("HBM {g:.0} GB/s over {:.1} µs", s.get("total_time").unwrap_or(0.0)));
    }
    let Some((kind, name, top)) =
        candidates.iter().cloned().reduce(|best, c| if c.2 > best.2 { c } else { best })
    else {
        return Verdict {
            kind: "Unknown".into(),
            summary: "Unknown: the file has no engine, DMA or HBM activity".into(),
            evidence,
        };
    };
    if top < BUSY {
        return Verdict {
            kind: "Latency-bound".into(),
            summary: format!(
                "Latency-bound: nothing is busy half the time (the busiest, {name}, {:.0}%): \
                 the run waits on dependencies and latencies",
                top * 100.0
            ),
            evidence,
        };
    }
    Verdict {
        kind: format!("{kind}-bound"),
        summary: format!(
            "{kind}-bound: {name} active {:.0}% of the time, the busiest",
            top * 100.0
        ),
        evidence,
    }
}

/// A file with its verdict, as the `analyze` event carries it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Analyzed {
    #[serde(flatten)]
    pub summary: Summary,
    pub verdict: Verdict,
}

/// An engine as profiles name it: `TensorE`, `VectorE`, `ScalarE`, `GpSimd`.
fn engine_label(e: &str) -> String {
    if e == "GpSimd" {
        e.to_string()
    } else {
        format!("{e}E")
    }
}

/// One row of the comparison: a field's value in each file, shown, and how they compare.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    pub field: String,
    pub label: String,
    pub a: Option<f64>,
    pub b: Option<f64>,
    /// `a / b` for amounts; `a − b` in percentage points for activities.
    pub delta: Option<f64>,
    /// Whether `delta` is a difference in points (activities) rather than a ratio.
    pub points: bool,
}

/// Every field either file has, plus the derived HBM bandwidth, in table order.
pub fn compare(a: &Summary, b: &Summary) -> Vec<Row> {
    let mut rows = Vec::new();
    // The derived bandwidth follows the written bytes, or the read ones when neither file
    // has written bytes.
    let no_writes = a.get("hbm_write_bytes").is_none() && b.get("hbm_write_bytes").is_none();
    for f in FIELDS {
        let (x, y) = (a.get(f.key), b.get(f.key));
        if x.is_none() && y.is_none() {
            continue;
        }
        let points = f.unit == Unit::Fraction;
        rows.push(Row {
            field: f.key.into(),
            label: f.label.into(),
            a: x,
            b: y,
            delta: delta(x, y, points),
            points,
        });
        if f.key == "hbm_write_bytes" || (f.key == "hbm_read_bytes" && no_writes) {
            let (x, y) = (a.hbm_gbps(), b.hbm_gbps());
            rows.push(Row {
                field: "hbm_bandwidth_gbps".into(),
                label: "HBM bandwidth".into(),
                a: x,
                b: y,
                delta: delta(x, y, false),
                points: false,
            });
        }
    }
    rows
}

fn delta(x: Option<f64>, y: Option<f64>, points: bool) -> Option<f64> {
    let (x, y) = (x?, y?);
    if points {
        Some((x - y) * 100.0)
    } else if y > 0.0 {
        Some(x / y)
    } else {
        None
    }
}

/// The rows where the files disagree most, worst first: time, activities and HBM traffic
/// (not counts, whose definitions differ, docs/analyze.md) where one side is more than 1.2×
/// the other (or zero against non-zero), or activities more than 10 points apart.
pub fn disagreements(rows: &[Row]) -> Vec<&Row> {
    const JUDGED: [&str; 10] = [
        "total_time",
        "tensor_engine_active_time_percent",
        "vector_engine_active_time_percent",
        "scalar_engine_active_time_percent",
        "gpsimd_engine_active_time_percent",
        "dma_active_time_percent",
        "mbu_estimated_percent",
        "hbm_read_bytes",
        "hbm_write_bytes",
        "hbm_bandwidth_gbps",
    ];
    // On one scale: points / 10 and |ln ratio| / ln 1.2 both reach 1 at the threshold; a
    // zero against a non-zero amount is the largest disagreement there is.
    let score = |r: &Row| match (r.delta, r.points, r.a, r.b) {
        (Some(d), true, _, _) => d.abs() / 10.0,
        (Some(d), false, _, _) if d > 0.0 => d.ln().abs() / 1.2f64.ln(),
        (_, false, Some(x), Some(y)) if (x == 0.0) != (y == 0.0) => f64::MAX,
        _ => 0.0,
    };
    let mut out: Vec<&Row> =
        rows.iter().filter(|r| JUDGED.contains(&r.field.as_str()) && score(r) > 1.0).collect();
    out.sort_by(|x, y| score(y).total_cmp(&score(x)));
    out
}

/// A value for people, in the field's unit.
pub fn show(field: &str, v: f64) -> String {
    let unit = FIELDS.iter().find(|f| f.key == field).map(|f| f.unit);
    match (field, unit) {
        ("hbm_bandwidth_gbps", _) => format!("{v:.0} GB/s"),
        (_, Some(Unit::Seconds)) => format!("{v:.1} µs"),
        (_, Some(Unit::Fraction)) => format!("{:.1}%", v * 100.0),
        (_, Some(Unit::Bytes)) => human_bytes(v),
        (_, Some(Unit::Flops)) => format!("{:.3e}", v),
        _ => format!("{v:.0}"),
    }
}

fn human_bytes(v: f64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut x = v;
    let mut i = 0;
    while x >= 1024.0 && i + 1 < UNITS.len() {
        x /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{x:.0} B")
    } else {
        format!("{x:.1} {}", UNITS[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn measured(fields: &str) -> Summary {
        parse(&format!("{{\"summary\": [{{{fields}}}]}}"), "m.json").unwrap()
    }

    #[test]
    fn reads_each_layout_and_tells_measured_from_simulated() {
        let flat = parse(r#"{"total_time": 0.002, "vector_engine_active_time_percent": 0.7}"#, "a")
            .unwrap();
        assert_eq!(flat.origin, Origin::Measured);
        assert_eq!(flat.get("total_time"), Some(2000.0));
        assert_eq!(flat.get("vector_engine_active_time_percent"), Some(0.7));
        let keyed = parse(r#"{"file.neff": {"total_time": "0.002"}}"#, "b").unwrap();
        assert_eq!(keyed.get("total_time"), Some(2000.0));
        // The simulator's event line among others; its activities are percents.
        let lines = concat!(
            "{\"event\":\"status\"}\n",
            "{\"event\":\"profile\",\"profile\":{\"total_time\":1e-5,\"chip\":\"trn2\",",
            "\"program_hash\":\"ab\",\"tensor_engine_active_time_percent\":96.5,",
            "\"bottleneck\":{\"summary\":\"Tensor-bound: …\"}}}\n"
        );
        let sim = parse(lines, "c").unwrap();
        assert_eq!(sim.origin, Origin::Simulated);
        assert_eq!(sim.chip.as_deref(), Some("trn2"));
        assert!((sim.get("tensor_engine_active_time_percent").unwrap() - 0.965).abs() < 1e-12);
        assert_eq!(sim.simulator_verdict.as_deref(), Some("Tensor-bound: …"));
    }

    #[test]
    fn a_measured_file_in_percents_is_read_as_percents() {
        let s = measured(
            r#""total_time": 1, "vector_engine_active_time_percent": 74, "scalar_engine_active_time_percent": 0.5"#,
        );
        assert_eq!(s.get("vector_engine_active_time_percent"), Some(0.74));
        assert_eq!(s.get("scalar_engine_active_time_percent"), Some(0.005));
    }

    /// A run's time that is null or 0 leaves nothing to judge: refused, not "Unknown".
    #[test]
    fn a_null_or_zero_total_time_is_refused() {
        let e = parse(r#"{"total_time": null}"#, "n.json").unwrap_err();
        assert!(e.contains("n.json: `total_time` is null"), "{e}");
        let e = parse(r#"{"total_time": 0, "hbm_read_bytes": 1000}"#, "z.json").unwrap_err();
        assert!(e.contains("z.json: `total_time` is 0"), "{e}");
    }

    #[test]
    fn engine_time_without_its_percent_is_its_share_of_the_run() {
        let s = measured(r#""total_time": 0.004, "vector_engine_active_time": 0.003"#);
        assert_eq!(s.get("vector_engine_active_time_percent"), Some(0.75));
        // Not divided again when the file's other activities are percents.
        let s = measured(
            r#""total_time": 0.004, "vector_engine_active_time": 0.003, "scalar_engine_active_time_percent": 20"#,
        );
        assert_eq!(s.get("vector_engine_active_time_percent"), Some(0.75));
        assert_eq!(s.get("scalar_engine_active_time_percent"), Some(0.2));
        let e = parse(r#"{"total_time": 1, "tensor_engine_active_time": 2}"#, "t").unwrap_err();
        assert!(e.contains("`tensor_engine_active_time`: 2 is longer than `total_time`"), "{e}");
    }

    #[test]
    fn simulated_activities_are_shares_of_the_whole_run_launch_included() {
        // 90 µs of kernel in a 100 µs run: VectorE busy 80 % of the kernel is 72 % of the run.
        let s = parse(
            r#"{"total_time": 1e-4, "kernel_time_us": 90, "program_hash": "x", "vector_engine_active_time_percent": 80}"#,
            "s",
        )
        .unwrap();
        assert!((s.get("vector_engine_active_time_percent").unwrap() - 0.72).abs() < 1e-12);
    }

    #[test]
    fn bad_files_are_named_with_what_is_wrong() {
        let e = parse("{\"total_time\": \"soon\"}", "x.json").unwrap_err();
        assert!(e.contains("x.json") && e.contains("`total_time`") && e.contains("soon"), "{e}");
        let e = parse("{\"time\": 1}", "y.json").unwrap_err();
        assert!(e.contains("y.json: no `total_time` field"), "{e}");
        let e = parse("not json", "z.json").unwrap_err();
        assert!(e.contains("z.json: not JSON"), "{e}");
        let e = parse(r#"{"total_time": 1, "dma_active_time_percent": 130}"#, "w").unwrap_err();
        assert!(e.contains("above 100%"), "{e}");
    }

    #[test]
    fn the_busiest_resource_is_the_limit_unless_nothing_is_busy() {
        let v = verdict(&measured(
            r#""total_time": 1, "vector_engine_active_time_percent": 0.74, "scalar_engine_active_time_percent": 0.31"#,
        ));
        assert_eq!(v.kind, "Vector-bound");
        assert!(v.summary.contains("VectorE active 74%"), "{}", v.summary);
        // The DMA side is the higher of queue activity and HBM bandwidth use.
        let v = verdict(&measured(
            r#""total_time": 1, "tensor_engine_active_time_percent": 0.55, "dma_active_time_percent": 0.4, "mbu_estimated_percent": 0.6"#,
        ));
        assert_eq!(v.kind, "DMA-bound");
        let v = verdict(&measured(
            r#""total_time": 1, "tensor_engine_active_time_percent": 0.49, "mbu_estimated_percent": 0.2"#,
        ));
        assert_eq!(v.kind, "Latency-bound");
        assert!(v.summary.contains("TensorE, 49%"), "{}", v.summary);
        assert_eq!(verdict(&measured(r#""total_time": 1"#)).kind, "Unknown");
    }

    #[test]
    fn the_comparison_takes_ratios_of_amounts_and_differences_of_activities() {
        let a = measured(
            r#""total_time": 0.002, "vector_engine_active_time_percent": 0.9, "hbm_read_bytes": 4000, "hbm_write_bytes": 0"#,
        );
        let b = measured(
            r#""total_time": 0.001, "vector_engine_active_time_percent": 0.5, "hbm_read_bytes": 4000"#,
        );
        let rows = compare(&a, &b);
        let row = |f: &str| rows.iter().find(|r| r.field == f).unwrap();
        assert_eq!(row("total_time").delta, Some(2.0));
        assert!((row("vector_engine_active_time_percent").delta.unwrap() - 40.0).abs() < 1e-9);
        // 4000 B in 2000 µs vs in 1000 µs.
        assert_eq!(row("hbm_bandwidth_gbps").a, Some(4000.0 / 2e6));
        assert_eq!(row("hbm_bandwidth_gbps").delta, Some(0.5));
        let worst: Vec<&str> = disagreements(&rows).iter().map(|r| r.field.as_str()).collect();
        // 40 points (score 4) before a 2× time (ln 2 / ln 1.2 = 3.8) and half the bandwidth.
        assert_eq!(
            worst,
            ["vector_engine_active_time_percent", "total_time", "hbm_bandwidth_gbps"]
        );
    }
}
