//! Chrome / Perfetto JSON trace of a run.
//!
//! One process per physical core (one per run without an `Nc::spmd` launch); one track (thread) per engine and per DMA queue, slices for
//! instructions with their operands and source line in `args`, and counters for SBUF use and
//! HBM bandwidth. Opens in ui.perfetto.dev or chrome://tracing. Timestamps are microseconds
//! with picosecond resolution, as the format wants.

use crate::isa::Engine;
use crate::nc::{CoreTrace, Nc};
use crate::timing::Slice;
use serde_json::{json, Value};
use std::collections::BTreeMap;

impl Nc {
    /// The trace of everything issued so far, or `None` unless the run was made with
    /// `ExecMode { trace: true, timing: true, .. }`. After an [`Nc::spmd`] launch of more
    /// than one program, each physical core is its own process (`pid` 1 + core), core 0
    /// holding the caller's instructions and program 0's.
    pub fn trace_json(&self) -> Option<Value> {
        let timing = self.timing.as_ref()?;
        let slices = timing.trace.as_ref()?;
        let mut ev = Vec::with_capacity(slices.len() + 64);
        let cores = self.spmd.cores.max(self.spmd.traces.len() as u32) as usize;
        let none = CoreTrace::default();
        for core in 0..cores {
            let programs = self.spmd.traces.get(core).unwrap_or(&none);
            let name = if cores == 1 {
                format!("NeuronCore ({})", self.chip.name)
            } else {
                format!("NeuronCore {core} ({})", self.chip.name)
            };
            let mut hbm = BTreeMap::new();
            let mut mine: Vec<&Slice> = programs.slices.iter().collect();
            let mut sbuf: Vec<(u64, u64)> = programs.sbuf_counter.clone();
            if core == 0 {
                mine = slices.iter().chain(&programs.slices).collect();
                sbuf = self.sbuf_counter.iter().chain(&programs.sbuf_counter).copied().collect();
                hbm = timing.hbm_counter.clone().unwrap_or_default();
            }
            for (&w, &b) in &programs.hbm_counter {
                *hbm.entry(w).or_default() += b;
            }
            self.core_events(&mut ev, 1 + core as u64, &name, &mine, &sbuf, &hbm);
        }
        Some(json!({"traceEvents": ev, "displayTimeUnit": "ns"}))
    }

    /// The events of one physical core's process: its tracks, slices and counters.
    fn core_events(
        &self,
        ev: &mut Vec<Value>,
        pid: u64,
        name: &str,
        slices: &[&Slice],
        sbuf_counter: &[(u64, u64)],
        hbm_counter: &BTreeMap<u64, u64>,
    ) {
        let us = |ps: u64| ps as f64 / 1e6;
        ev.push(json!({"ph": "M", "pid": pid, "name": "process_name", "args": {"name": name}}));
        let queues = self.chip.dma.engines as usize;
        let track_name = |i: usize| {
            if i < 4 {
                format!("{}E", Engine::ALL[i].name())
            } else {
                format!("DMA queue {}", i - 4)
            }
        };
        let lanes = lanes(slices.iter().map(|s| (s.track as usize, s.start, s.dur)), 4 + queues);
        for (tid, &(track, lane)) in lanes.tracks.iter().enumerate() {
            let name = match lane {
                0 => track_name(track),
                _ => format!("{} (overlap {lane})", track_name(track)),
            };
            ev.push(json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_name", "args": {"name": name}}));
            // Each lane right below its track.
            let sort_index = track * LANE_SORT_STRIDE + lane;
            ev.push(json!({"ph": "M", "pid": pid, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": sort_index}}));
        }
        for (s, &tid) in slices.iter().zip(&lanes.of_slice) {
            let mut args = json!({
                "operands": s.args,
                "nki_source_location": format!("{}:{}", s.loc.file, s.loc.line),
            });
            if s.bytes > 0 {
                args["bytes"] = json!(s.bytes);
            }
            // Which DMA engine served a transfer, whichever lane of its track it is drawn in.
            if let Some(engine) = (s.track as usize).checked_sub(4) {
                args["dma_engine"] = json!(engine);
            }
            ev.push(json!({
                "ph": "X", "pid": pid, "tid": tid, "name": s.name,
                "ts": us(s.start), "dur": us(s.dur), "args": args,
            }));
        }
        for &(t, bytes) in sbuf_counter {
            ev.push(json!({"ph": "C", "pid": pid, "name": "SBUF use", "ts": us(t), "args": {"bytes_per_partition": bytes}}));
        }
        // Bytes per 1 µs window = GB/s / 1000 … bytes/µs ÷ 1000 = GB/s.
        let mut last = None;
        for (&window, &bytes) in hbm_counter {
            if let Some(prev) = last {
                if window > prev + 1 {
                    ev.push(json!({"ph": "C", "pid": pid, "name": "HBM bandwidth", "ts": (prev + 1) as f64, "args": {"GB/s": 0.0}}));
                }
            }
            ev.push(json!({"ph": "C", "pid": pid, "name": "HBM bandwidth", "ts": window as f64, "args": {"GB/s": bytes as f64 / 1000.0}}));
            last = Some(window);
        }
    }
}

/// Sort indices of a track's lanes follow the track's own: track × this + lane.
const LANE_SORT_STRIDE: usize = 1000;

/// Where each slice goes: the trace format wants the complete ("X") slices of one thread to
/// nest, and Perfetto drops those that overlap without nesting. A compute engine's slices
/// never overlap, but a DMA engine serves its queues round-robin (docs/dma.md §3), so a
/// transfer on one queue starts before another's has ended. Each slice goes to the first
/// lane of its track whose last slice has ended by its start (slices taken by start, then
/// in program order); lane 0 is the track itself (`tid` = track, so a trace without
/// overlaps is laid out as before), and further lanes get the next free `tid`s.
struct Lanes {
    /// Per `tid`: (track, lane).
    tracks: Vec<(usize, usize)>,
    /// Per slice, in the given order: its `tid`.
    of_slice: Vec<usize>,
}

fn lanes(slices: impl Iterator<Item = (usize, u64, u64)>, tracks: usize) -> Lanes {
    let slices: Vec<(usize, u64, u64)> = slices.collect();
    // Every slice's track is below `tracks` (engines, then DMA queues); a larger one would
    // still get a track of its own.
    let tracks = slices.iter().map(|s| s.0 + 1).max().unwrap_or(0).max(tracks);
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by_key(|&i| (slices[i].0, slices[i].1, i));
    let mut out =
        Lanes { tracks: (0..tracks).map(|t| (t, 0)).collect(), of_slice: vec![0; slices.len()] };
    // Per track: each lane's tid and the end of its last slice.
    let mut open: Vec<Vec<(usize, u64)>> = vec![Vec::new(); tracks];
    for i in order {
        let (track, start, dur) = slices[i];
        let lanes = &mut open[track];
        let slot = match lanes.iter().position(|&(_, end)| end <= start) {
            Some(l) => l,
            None => {
                let tid = if lanes.is_empty() {
                    track
                } else {
                    out.tracks.push((track, lanes.len()));
                    out.tracks.len() - 1
                };
                lanes.push((tid, 0));
                lanes.len() - 1
            }
        };
        lanes[slot].1 = start + dur;
        out.of_slice[i] = lanes[slot].0;
    }
    out
}
