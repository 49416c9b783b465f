//! Landscapes: recorded tuning results replayed as an evaluator.
//!
//! A [`Landscape`] is loaded from
//! * a **Kernel Tuner cache** (`{"tune_params_keys": [...], "tune_params": {...},
//!   "objective": "time", "cache": {"16,1,...": {"block_size_x": 16, ..., "time": 1.2}}}`),
//!   including the *unterminated* form Kernel Tuner leaves when a run is interrupted (it
//!   appends entries as it goes and closes the `cache` object and the document only at the
//!   end), or
//! * a **T4 results file** (the autotuning-methodology "Open Autotuning Results" format:
//!   `{"schema_version": "1.0.0", "results": [{"configuration": {...}, "invalidity":
//!   "correct", "measurements": [{"name": "time", "value": 1.2, "unit": "ms"}], "objectives":
//!   ["time"], "times": {...}, "correctness": 1}]}`),
//!
//! either plain or gzipped (detected by the gzip magic bytes, not the file name).
//!
//! The space comes from `tune_params` in `tune_params_keys` order (T4 files carry no space:
//! there it is every parameter seen, by name, with every value seen, numbers ascending).
//!
//! **Validity.** A configuration is valid iff the file records a numeric objective for it.
//! Kernel Tuner's failure markers (`"InvalidConfig"`, `"CompilationFailedConfig"`,
//! `"RuntimeFailedConfig"`, or any other non-number) and T4 results whose `invalidity` is not
//! `"correct"` are invalid; so is every configuration *absent* from the file (Kernel Tuner
//! never stores configurations its restrictions rule out, and nothing can be replayed for
//! them). The landscape's [`oracle`](Landscape::oracle) applies exactly this rule, so a
//! valid-only strategy replays only configurations with a recorded time, and the "fraction of
//! the optimum" of a replay is comparable across strategies. [`Landscape::invalid_reason`]
//! tells the recorded failures and the absent configurations apart.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;

use serde_json::Value;

use crate::driver::Evaluator;
use crate::space::{Config, Dim, Level, Space};
use crate::strategy::Outcome;
use crate::SearchError;

/// Recorded results over a space, replayable.
#[derive(Clone, Debug)]
pub struct Landscape {
    name: String,
    space: Space,
    /// Valid results by configuration index.
    values: HashMap<u128, f64>,
    /// Recorded failures by configuration index, with the recorded marker.
    failures: HashMap<u128, String>,
    optimum: (Config, f64),
    /// The objective's unit (`ms` for Kernel Tuner's `time`), or its name when the file
    /// does not say.
    unit: String,
    /// `Some(lines dropped)` for an unterminated Kernel Tuner cache (an interrupted run:
    /// whatever it had not reached is absent, and a last partial entry was dropped).
    unterminated: Option<usize>,
}

fn err(msg: impl Into<String>) -> SearchError {
    SearchError::Landscape(msg.into())
}

/// Parse JSON, accepting a Kernel Tuner cache that was never closed: `(document, None)`,
/// or `(document, Some(lines dropped))` for an unterminated one.
fn parse_lenient(text: &str) -> Result<(Value, Option<usize>), SearchError> {
    let first = match serde_json::from_str(text) {
        Ok(v) => return Ok((v, None)),
        Err(e) => e,
    };
    if !text.contains("\"cache\"") {
        return Err(err(format!("not JSON: {first}")));
    }
    // Kernel Tuner writes `"cache": {` and then one `\n"key": {...},` per result; an
    // interrupted run stops after any of them, possibly partway through the last line.
    // Close the document after the last complete entry (at most two lines dropped).
    let mut body = text;
    for dropped in 0..3 {
        let trimmed = body.trim_end().trim_end_matches(',');
        if let Ok(v) = serde_json::from_str(&format!("{trimmed}}}}}")) {
            return Ok((v, Some(dropped)));
        }
        match trimmed.rfind('\n') {
            Some(i) => body = &trimmed[..i],
            None => break,
        }
    }
    Err(err(format!("not JSON, nor an unterminated Kernel Tuner cache: {first}")))
}

impl Landscape {
    /// Load a landscape file (Kernel Tuner cache or T4 results, gzipped or not).
    pub fn load(path: impl AsRef<Path>) -> Result<Landscape, SearchError> {
        let path = path.as_ref();
        let bytes =
            std::fs::read(path).map_err(|e| err(format!("cannot read {}: {e}", path.display())))?;
        let file = path.file_name().and_then(|n| n.to_str()).unwrap_or("landscape");
        let name = file.trim_end_matches(".gz").trim_end_matches(".json");
        Landscape::parse(&bytes, name).map_err(|e| match e {
            SearchError::Landscape(why) => err(format!("{}: {why}", path.display())),
            other => other,
        })
    }

    /// Parse landscape bytes (gzip detected by its magic number).
    pub fn parse(bytes: &[u8], name: &str) -> Result<Landscape, SearchError> {
        let text = if bytes.starts_with(&[0x1f, 0x8b]) {
            let mut s = String::new();
            flate2::read::MultiGzDecoder::new(bytes)
                .read_to_string(&mut s)
                .map_err(|e| err(format!("bad gzip data: {e}")))?;
            s
        } else {
            String::from_utf8(bytes.to_vec()).map_err(|_| err("not UTF-8 text"))?
        };
        let (doc, unterminated) = parse_lenient(&text)?;
        let landscape = if doc.get("cache").is_some() {
            Landscape::from_kernel_tuner(&doc, name)
        } else if doc.get("results").is_some() {
            Landscape::from_t4(&doc, name)
        } else {
            Err(err("neither a Kernel Tuner cache (no `cache`) nor T4 results (no `results`)"))
        };
        landscape.map(|l| Landscape { unterminated, ..l })
    }

    /// A landscape from a parsed Kernel Tuner cache document.
    pub fn from_kernel_tuner(doc: &Value, name: &str) -> Result<Landscape, SearchError> {
        let params =
            doc["tune_params"].as_object().ok_or_else(|| err("no `tune_params` object"))?;
        let keys: Vec<String> = match doc["tune_params_keys"].as_array() {
            Some(k) => k
                .iter()
                .map(|k| k.as_str().map(str::to_owned).ok_or_else(|| err("bad tune_params_keys")))
                .collect::<Result<_, _>>()?,
            None => params.keys().cloned().collect(),
        };
        let mut dims = Vec::new();
        for key in &keys {
            let values = params
                .get(key)
                .and_then(Value::as_array)
                .ok_or_else(|| err(format!("tune_params.{key} is missing or not a list")))?;
            let levels = values
                .iter()
                .map(|v| Level::from_json(v).ok_or_else(|| err(format!("tune_params.{key}: {v}"))))
                .collect::<Result<_, _>>()?;
            dims.push(Dim::new(key.clone(), levels)?);
        }
        let space = Space::new(dims)?;
        let objective = doc["objective"].as_str().unwrap_or("time");
        let cache = doc["cache"].as_object().ok_or_else(|| err("`cache` is not an object"))?;
        let mut records = Vec::with_capacity(cache.len());
        for (key, entry) in cache {
            let config = config_of(&space, |name| entry.get(name))
                .map_err(|e| err(format!("cache entry {key}: {e}")))?;
            records.push((config, entry.get(objective).cloned().unwrap_or(Value::Null)));
        }
        // Kernel Tuner records `time` in milliseconds; a cache this project exports from the
        // simulator (`cargo xtask tune-gemm`) says its own unit in `time_unit`, an extra key
        // Kernel Tuner's readers ignore.
        let unit = match (objective, doc.get("time_unit")) {
            ("time", None) => "ms",
            ("time", Some(Value::String(unit))) => unit.as_str(),
            ("time", Some(other)) => {
                return Err(err(format!(
                    "`time_unit` must be a string such as \"µs\", not {other}"
                )))
            }
            (objective, _) => objective,
        };
        Landscape::build(name, space, records, unit)
    }

    /// A landscape from a parsed T4 results document.
    pub fn from_t4(doc: &Value, name: &str) -> Result<Landscape, SearchError> {
        let results = doc["results"].as_array().ok_or_else(|| err("`results` is not a list"))?;
        // Every parameter and value seen, in a deterministic order.
        let mut names: Vec<String> = Vec::new();
        let mut levels: HashMap<String, Vec<Level>> = HashMap::new();
        for (i, r) in results.iter().enumerate() {
            let conf = r["configuration"]
                .as_object()
                .ok_or_else(|| err(format!("result {i} has no `configuration` object")))?;
            for (k, v) in conf {
                let level =
                    Level::from_json(v).ok_or_else(|| err(format!("result {i}: {k} = {v}")))?;
                let seen = levels.entry(k.clone()).or_insert_with(|| {
                    names.push(k.clone());
                    Vec::new()
                });
                if !seen.iter().any(|l| l.same(&level)) {
                    seen.push(level);
                }
            }
        }
        names.sort();
        let dims = names
            .iter()
            .map(|n| {
                let mut l = levels.remove(n).expect("collected");
                if l.iter().all(|x| x.as_f64().is_some()) {
                    l.sort_by(|a, b| a.as_f64().partial_cmp(&b.as_f64()).expect("finite"));
                }
                Dim::new(n.clone(), l)
            })
            .collect::<Result<_, _>>()?;
        let space = Space::new(dims)?;
        let mut records = Vec::with_capacity(results.len());
        // The unit of the first measurement of the objective (T4 states one per value).
        let mut unit: Option<String> = None;
        for (i, r) in results.iter().enumerate() {
            let config = config_of(&space, |name| r["configuration"].get(name))
                .map_err(|e| err(format!("result {i}: {e}")))?;
            let objective = r["objectives"][0].as_str().unwrap_or("time");
            let value = match r["invalidity"].as_str() {
                None | Some("correct") => {
                    let m = r["measurements"]
                        .as_array()
                        .and_then(|ms| ms.iter().find(|m| m["name"] == objective));
                    if unit.is_none() {
                        unit = m.and_then(|m| m["unit"].as_str()).map(str::to_owned);
                    }
                    m.map_or(Value::Null, |m| m["value"].clone())
                }
                Some(reason) => Value::String(reason.to_owned()),
            };
            records.push((config, value));
        }
        let objective = results.first().and_then(|r| r["objectives"][0].as_str());
        let unit = unit.unwrap_or_else(|| objective.unwrap_or("time").to_owned());
        Landscape::build(name, space, records, &unit)
    }

    fn build(
        name: &str,
        space: Space,
        records: Vec<(Config, Value)>,
        unit: &str,
    ) -> Result<Landscape, SearchError> {
        let mut values = HashMap::new();
        let mut failures = HashMap::new();
        for (config, value) in records {
            let index = space.index(&config);
            if values.contains_key(&index) || failures.contains_key(&index) {
                continue; // the first record of a configuration wins
            }
            match value.as_f64().filter(|v| v.is_finite()) {
                Some(v) => {
                    values.insert(index, v);
                }
                None => {
                    let marker = value.as_str().map_or_else(|| value.to_string(), str::to_owned);
                    failures.insert(index, marker);
                }
            }
        }
        let optimum = values
            .iter()
            .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(b.0)))
            .map(|(&i, &v)| (space.config(i), v))
            .ok_or_else(|| err("no configuration has a numeric objective"))?;
        Ok(Landscape {
            name: name.to_owned(),
            space,
            values,
            failures,
            optimum,
            unit: unit.to_owned(),
            unterminated: None,
        })
    }

    /// The landscape's name (its file name without `.json`/`.gz`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The objective's unit (`ms` for a Kernel Tuner `time`, a T4 file's own unit), or the
    /// objective's name when the file does not give one.
    pub fn unit(&self) -> &str {
        &self.unit
    }

    /// `Some(lines dropped)` when the file was an unterminated Kernel Tuner cache: a run
    /// interrupted before it reached every configuration, so the landscape (and its
    /// optimum) holds only what it had recorded.
    pub fn unterminated(&self) -> Option<usize> {
        self.unterminated
    }

    /// The space.
    pub fn space(&self) -> &Space {
        &self.space
    }

    /// The recorded value of `config`, if it is valid.
    pub fn value(&self, config: &Config) -> Option<f64> {
        self.values.get(&self.space.index(config)).copied()
    }

    /// Whether `config` has a recorded numeric objective.
    pub fn is_valid(&self, config: &Config) -> bool {
        self.value(config).is_some()
    }

    /// Why `config` is invalid: the recorded marker (e.g. `"RuntimeFailedConfig"`, or the T4
    /// invalidity), `"absent"` when the file has no record of it, `None` when it is valid.
    pub fn invalid_reason(&self, config: &Config) -> Option<&str> {
        let index = self.space.index(config);
        if self.values.contains_key(&index) {
            None
        } else {
            Some(self.failures.get(&index).map_or("absent", String::as_str))
        }
    }

    /// The validity oracle: valid iff recorded with a numeric objective.
    pub fn oracle(&self) -> impl FnMut(&Config) -> bool + '_ {
        |c: &Config| self.is_valid(c)
    }

    /// The replayed outcome of `config`.
    pub fn outcome(&self, config: &Config) -> Outcome {
        self.value(config).map_or(Outcome::Invalid, Outcome::Value)
    }

    /// The best configuration and its value (ties: lowest index).
    pub fn optimum(&self) -> (&Config, f64) {
        (&self.optimum.0, self.optimum.1)
    }

    /// Every valid value, ascending.
    pub fn valid_values(&self) -> Vec<f64> {
        let mut v: Vec<f64> = self.values.values().copied().collect();
        v.sort_by(f64::total_cmp);
        v
    }

    /// How many configurations are recorded as failures.
    pub fn failure_count(&self) -> usize {
        self.failures.len()
    }
}

impl Evaluator for Landscape {
    fn evaluate(&mut self, config: &Config) -> Outcome {
        self.outcome(config)
    }
}

impl Evaluator for &Landscape {
    fn evaluate(&mut self, config: &Config) -> Outcome {
        self.outcome(config)
    }
}

/// The configuration whose parameter values `get` returns, matched against the levels.
fn config_of<'a>(space: &Space, get: impl Fn(&str) -> Option<&'a Value>) -> Result<Config, String> {
    space
        .dims()
        .iter()
        .map(|dim| {
            let v = get(dim.name()).ok_or_else(|| format!("no value for `{}`", dim.name()))?;
            Level::from_json(v)
                .and_then(|l| dim.find(&l))
                .ok_or_else(|| format!("`{}` = {v} is not one of its levels", dim.name()))
        })
        .collect::<Result<_, _>>()
        .map(Config)
}
