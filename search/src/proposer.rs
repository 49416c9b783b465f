//! The proposer strategy: an external program proposes the configurations.
//!
//! `--proposer CMD` lets a script or an LLM agent drive the search. Each round, when the
//! strategy has no proposal left in hand, it runs `sh -c CMD` once, writes one JSON document to
//! the program's standard input and closes it:
//!
//! ```json
//! {"protocol": 1,
//!  "space": {"dims": [{"name": "tile", "kind": "ordinal", "levels": [1, 2, 4]},
//!                     {"name": "layout", "kind": "categorical", "levels": ["row", "col"]}]},
//!  "history": [{"params": {"tile": 2, "layout": "row"}, "value": 1.5, "invalid": false},
//!              {"params": {"tile": 4, "layout": "col"}, "value": null, "invalid": true}],
//!  "pending": [{"tile": 1, "layout": "row"}],
//!  "last_profile": null,
//!  "want": 1}
//! ```
//!
//! and reads one JSON document from its standard output:
//!
//! ```json
//! {"proposals": [{"tile": 1, "layout": "col"}]}
//! ```
//!
//! * `history` lists every configuration evaluated so far, in order; `value` is the measured
//!   value (lower is better), `null` when `invalid`. Configurations the validity oracle
//!   rejected are in it too (`invalid: true`, never evaluated), so the proposer learns them.
//! * `pending` lists configurations already proposed whose outcome is not known yet (the
//!   caller evaluates a batch before telling); proposing one again is an error.
//! * `last_profile` is whatever the caller attached with [`Proposer::set_last_profile`] (for
//!   example the simulator's profile of the last evaluation), or `null`.
//! * `want` is how many proposals are asked for; fewer are fine, more are used in later asks.
//!   An empty list means the proposer is done (the strategy is exhausted).
//! * Each proposal must name every dimension exactly once with one of its levels (numbers
//!   match numerically: `2` and `2.0` are the same level). A proposal with an unknown
//!   parameter, a missing one, a value outside its levels, or a configuration that was already
//!   proposed is an error naming the proposal. So is a program that exits non-zero or prints
//!   no JSON document (the error carries its standard error).
//!
//! The protocol is also described for proposer authors in `search/PROPOSER.md`.

use std::collections::VecDeque;
use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use crate::space::{Config, Level, Space};
use crate::strategy::{Ctx, Memory, Outcome, Strategy};
use crate::SearchError;

/// The protocol version written as `"protocol"`.
pub const PROTOCOL: u64 = 1;

/// A strategy backed by an external proposer program.
#[derive(Clone, Debug)]
pub struct Proposer {
    command: String,
    /// Proposals asked for per round.
    pub batch: usize,
    /// Rounds in a row that may yield nothing usable (all rejected by the oracle) before
    /// the strategy gives up with an error.
    pub max_empty_rounds: usize,
    queue: VecDeque<Config>,
    memory: Memory,
    /// Every configuration told (or rejected by the oracle), with its value.
    history: Vec<(Config, Option<f64>)>,
    /// Proposed and handed out, not told yet.
    pending: Vec<Config>,
    last_profile: Value,
    done: bool,
}

fn err(msg: impl Into<String>) -> SearchError {
    SearchError::Proposer(msg.into())
}

/// The space as protocol JSON.
pub fn space_json(space: &Space) -> Value {
    let dims: Vec<Value> = space
        .dims()
        .iter()
        .map(|d| {
            json!({
                "name": d.name(),
                "kind": if d.is_ordinal() { "ordinal" } else { "categorical" },
                "levels": d.levels().iter().map(Level::to_json).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "dims": dims })
}

/// The configuration a proposal object denotes, or why it is not one.
pub fn parse_proposal(space: &Space, proposal: &Value) -> Result<Config, String> {
    let obj = proposal.as_object().ok_or("a proposal must be a JSON object")?;
    for key in obj.keys() {
        if !space.dims().iter().any(|d| d.name() == key) {
            return Err(format!("unknown parameter `{key}`"));
        }
    }
    let mut levels = Vec::with_capacity(space.dims().len());
    for dim in space.dims() {
        let v = obj.get(dim.name()).ok_or_else(|| format!("missing parameter `{}`", dim.name()))?;
        let level = Level::from_json(v).and_then(|l| dim.find(&l)).ok_or_else(|| {
            let allowed: Vec<String> =
                dim.levels().iter().map(|l| l.to_json().to_string()).collect();
            format!("`{}` = {v} is not one of its levels [{}]", dim.name(), allowed.join(", "))
        })?;
        levels.push(level);
    }
    Ok(Config(levels))
}

impl Proposer {
    /// A proposer running `command` with `sh -c`, one proposal per round.
    pub fn new(command: impl Into<String>) -> Self {
        Proposer {
            command: command.into(),
            batch: 1,
            max_empty_rounds: 3,
            queue: VecDeque::new(),
            memory: Memory::default(),
            history: Vec::new(),
            pending: Vec::new(),
            last_profile: Value::Null,
            done: false,
        }
    }

    /// Attach a profile (any JSON) to send as `last_profile` in the next rounds.
    pub fn set_last_profile(&mut self, profile: Value) {
        self.last_profile = profile;
    }

    /// The request document for a round.
    pub fn request(&self, space: &Space, want: usize) -> Value {
        json!({
            "protocol": PROTOCOL,
            "space": space_json(space),
            "history": self
                .history
                .iter()
                .map(|(c, v)| json!({ "params": space.to_json(c), "value": v, "invalid": v.is_none() }))
                .collect::<Vec<_>>(),
            "pending": self.pending.iter().map(|c| space.to_json(c)).collect::<Vec<_>>(),
            "last_profile": self.last_profile,
            "want": want,
        })
    }

    /// Run the program once and return its proposals, validated against the space and the
    /// configurations proposed so far.
    fn round(&mut self, space: &Space) -> Result<Vec<Config>, SearchError> {
        let request = self.request(space, self.batch.max(1)).to_string();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&self.command)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| err(format!("cannot start `{}`: {e}", self.command)))?;
        {
            let mut stdin = child.stdin.take().expect("piped stdin");
            // A proposer may exit without reading its input; that is its business.
            let _ = stdin.write_all(request.as_bytes());
        }
        let out = child
            .wait_with_output()
            .map_err(|e| err(format!("waiting for `{}`: {e}", self.command)))?;
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !out.status.success() {
            return Err(err(format!(
                "`{}` failed ({}); its stderr:\n{}",
                self.command,
                out.status,
                stderr.trim_end()
            )));
        }
        let reply: Value = serde_json::from_slice(&out.stdout).map_err(|e| {
            err(format!(
                "`{}` printed no JSON document ({e}); its stderr:\n{}",
                self.command,
                stderr.trim_end()
            ))
        })?;
        let proposals = reply["proposals"].as_array().ok_or_else(|| {
            err(format!("`{}` replied without a `proposals` list: {reply}", self.command))
        })?;
        let mut configs: Vec<Config> = Vec::with_capacity(proposals.len());
        for (i, p) in proposals.iter().enumerate() {
            let config = parse_proposal(space, p)
                .map_err(|e| err(format!("proposal {i} ({p}) rejected: {e}")))?;
            if self.memory.seen(&config) || configs.contains(&config) {
                return Err(err(format!(
                    "proposal {i} ({p}) rejected: that configuration was already proposed"
                )));
            }
            configs.push(config);
        }
        Ok(configs)
    }
}

impl Strategy for Proposer {
    fn name(&self) -> &str {
        "proposer"
    }

    fn ask(&mut self, ctx: &mut Ctx<'_>) -> Result<Option<Config>, SearchError> {
        let mut empty_rounds = 0;
        loop {
            while let Some(c) = self.queue.pop_front() {
                if self.memory.seen(&c) {
                    continue;
                }
                self.memory.propose(&c);
                if ctx.valid(&c) {
                    self.pending.push(c.clone());
                    return Ok(Some(c));
                }
                // Rejected by the oracle: never evaluated, but the proposer hears of it.
                self.memory.tell(&c, Outcome::Invalid);
                self.history.push((c, None));
            }
            if self.done {
                return Ok(None);
            }
            if empty_rounds >= self.max_empty_rounds {
                return Err(err(format!(
                    "{empty_rounds} rounds in a row proposed only configurations the \
                     validity oracle rejects"
                )));
            }
            let proposals = self.round(ctx.space)?;
            if proposals.is_empty() {
                self.done = true;
            }
            empty_rounds += 1;
            self.queue.extend(proposals);
        }
    }

    fn tell(&mut self, config: &Config, outcome: Outcome) {
        self.pending.retain(|c| c != config);
        self.memory.tell(config, outcome);
        self.history.push((config.clone(), outcome.value()));
    }
}
