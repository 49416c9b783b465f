//! Chrome / Perfetto JSON trace of a run.
//!
//! One process per run; one track (thread) per engine and per DMA queue, slices for
//! instructions with their operands and source line in `args`, and counters for SBUF use and
//! HBM bandwidth. Opens in ui.perfetto.dev or chrome://tracing. Timestamps are microseconds
//! with picosecond resolution, as the format wants.
//!
//! Slices of one thread must not partly overlap (the viewers draw only nested ones), but a
//! DMA engine shares its time round-robin between its queues' transfers (docs/dma.md), so
//! its slices can: a slice that overlaps an earlier one of its track goes to the first
//! *lane* of that track it fits, a thread of its own named after the track and shown
//! right below it.

use crate::isa::Engine;
use crate::nc::Nc;
use serde_json::{json, Value};

impl Nc {
    /// The trace of everything issued so far, or `None` unless the run was made with
    /// `ExecMode { trace: true, timing: true, .. }`.
    pub fn trace_json(&self) -> Option<Value> {
        let timing = self.timing.as_ref()?;
        let slices = timing.trace.as_ref()?;
        let us = |ps: u64| ps as f64 / 1e6;
        let mut ev = Vec::with_capacity(slices.len() + 64);
        ev.push(json!({"ph": "M", "pid": 1, "name": "process_name", "args": {"name": format!("NeuronCore ({})", self.chip.name)}}));
        let queues = self.chip.dma.engines as usize;
        let track_name = |i: usize| {
            if i < 4 {
                format!("{}E", Engine::ALL[i].name())
            } else {
                format!("DMA queue {}", i - 4)
            }
        };
        for i in 0..4 + queues {
            ev.push(json!({"ph": "M", "pid": 1, "tid": i, "name": "thread_name", "args": {"name": track_name(i)}}));
            ev.push(json!({"ph": "M", "pid": 1, "tid": i, "name": "thread_sort_index", "args": {"sort_index": i * LANES}}));
        }
        let lanes = lanes(slices.iter().map(|s| (s.track as usize, s.start, s.dur)));
        let mut named = std::collections::BTreeSet::new();
        for (s, &lane) in slices.iter().zip(&lanes) {
            let track = s.track as usize;
            let tid = if lane == 0 { track } else { LANE_TIDS + track * LANES + lane };
            if lane > 0 && named.insert(tid) {
                let name = format!("{} (sharing {lane})", track_name(track));
                ev.push(json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_name", "args": {"name": name}}));
                ev.push(json!({"ph": "M", "pid": 1, "tid": tid, "name": "thread_sort_index", "args": {"sort_index": track * LANES + lane}}));
            }
            let mut args = json!({
                "operands": s.args,
                "nki_source_location": format!("{}:{}", s.loc.file, s.loc.line),
            });
            if s.bytes > 0 {
                args["bytes"] = json!(s.bytes);
            }
            ev.push(json!({
                "ph": "X", "pid": 1, "tid": tid, "name": s.name,
                "ts": us(s.start), "dur": us(s.dur), "args": args,
            }));
        }
        for &(t, bytes) in &self.sbuf_counter {
            ev.push(json!({"ph": "C", "pid": 1, "name": "SBUF use", "ts": us(t), "args": {"bytes_per_partition": bytes}}));
        }
        if let Some(counter) = &timing.hbm_counter {
            // Bytes per 1 µs window = GB/s / 1000 … bytes/µs ÷ 1000 = GB/s.
            let mut last = None;
            for (&window, &bytes) in counter {
                if let Some(prev) = last {
                    if window > prev + 1 {
                        ev.push(json!({"ph": "C", "pid": 1, "name": "HBM bandwidth", "ts": (prev + 1) as f64, "args": {"GB/s": 0.0}}));
                    }
                }
                ev.push(json!({"ph": "C", "pid": 1, "name": "HBM bandwidth", "ts": window as f64, "args": {"GB/s": bytes as f64 / 1000.0}}));
                last = Some(window);
            }
        }
        Some(json!({"traceEvents": ev, "displayTimeUnit": "ns"}))
    }
}

/// Lanes per track (the track itself is lane 0; more overlapping slices than this share the
/// last lane, which cannot happen with 16 queues per engine and 4 in use).
const LANES: usize = 16;
/// Lane threads are numbered from here, clear of the tracks'.
const LANE_TIDS: usize = 1000;

/// Each slice's lane: the first lane of its track whose last slice ends by its start, in
/// order of start (ties: issue order), so no lane holds two slices that partly overlap.
fn lanes(slices: impl Iterator<Item = (usize, u64, u64)>) -> Vec<usize> {
    let slices: Vec<(usize, u64, u64)> = slices.collect();
    let mut order: Vec<usize> = (0..slices.len()).collect();
    order.sort_by_key(|&i| (slices[i].1, i));
    let mut ends: std::collections::HashMap<usize, Vec<u64>> = Default::default();
    let mut lane = vec![0; slices.len()];
    for i in order {
        let (track, start, dur) = slices[i];
        let track_ends = ends.entry(track).or_default();
        let l = match track_ends.iter().position(|&e| e <= start) {
            Some(l) => l,
            None if track_ends.len() < LANES => {
                track_ends.push(0);
                track_ends.len() - 1
            }
            None => LANES - 1,
        };
        track_ends[l] = start + dur;
        lane[i] = l;
    }
    lane
}

#[cfg(test)]
mod tests {
    #[test]
    fn overlapping_slices_of_a_track_go_to_lanes() {
        // Track 5: [0, 10), [4, 8) overlaps it, [10, 12) follows the first; track 6 is apart.
        let l = super::lanes([(5, 0, 10), (5, 4, 4), (5, 10, 2), (6, 4, 4), (5, 5, 1)].into_iter());
        // [5, 6) overlaps lane 0's [0, 10) and lane 1's [4, 8): a third lane.
        assert_eq!(l, [0, 1, 0, 0, 2]);
    }
}
