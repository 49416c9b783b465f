//! Chrome / Perfetto JSON trace of a run.
//!
//! One process per run; one track (thread) per engine and per DMA queue, slices for
//! instructions with their operands and source line in `args`, and counters for SBUF use and
//! HBM bandwidth. Opens in ui.perfetto.dev or chrome://tracing. Timestamps are microseconds
//! with picosecond resolution, as the format wants.

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
        for i in 0..4 + queues {
            let name = if i < 4 {
                format!("{}E", Engine::ALL[i].name())
            } else {
                format!("DMA queue {}", i - 4)
            };
            ev.push(json!({"ph": "M", "pid": 1, "tid": i, "name": "thread_name", "args": {"name": name}}));
            ev.push(json!({"ph": "M", "pid": 1, "tid": i, "name": "thread_sort_index", "args": {"sort_index": i}}));
        }
        for s in slices {
            let mut args = json!({
                "operands": s.args,
                "nki_source_location": format!("{}:{}", s.loc.file, s.loc.line),
            });
            if s.bytes > 0 {
                args["bytes"] = json!(s.bytes);
            }
            ev.push(json!({
                "ph": "X", "pid": 1, "tid": s.track, "name": s.name,
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
