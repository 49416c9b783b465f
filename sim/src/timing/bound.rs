//! A lower bound of the kernel time from the work the program gives each resource that the
//! timing model never lets overlap itself: known when each instruction is issued, so a
//! run with the timing model off (`tune`'s trace) has it too.
//!
//! Three kinds of resource, each with the argument that its work fits inside the kernel
//! time (`Timing::end`, the latest end of any instruction, from time 0; after an SPMD
//! launch, from the launch's bound, below):
//!
//! * **A compute engine.** Every compute instruction, at issue or from the list scheduler of
//!   affine loops, is placed by `Timing::compute_after`: it starts no earlier than its
//!   track's `free`, ends `dur = cycles_to_ps(cycles, ghz)` later, and sets `free` to that
//!   end, which `bump_end` takes into `end`. So one engine's instructions occupy disjoint
//!   intervals of `[0, end]`: `end ≥ Σ dur` over the engine. `dur` is the cost formula plus
//!   the engine's fixed cycles, computed before timing (`Nc::schedule`).
//! * **A shared port** (NeuronCore-v2, neuroncore.md §1.8). An instruction using one starts
//!   no earlier than the port's last user's end and becomes its last user: the users of a
//!   port are serialized the same way, `end ≥ Σ dur` over them.
//! * **A DMA queue of one engine** (docs/dma.md §2–3). Let a chunk cost
//!   `own = round(descriptors × descriptor_ps) + ⌊bytes / rate⌋` (the model charges the same
//!   descriptor time and `⌈bytes / rate⌉` of streaming, `rate` being the chunk's own,
//!   [`DmaChunk::rate`](super::DmaChunk::rate); `⌊⌋` absorbs the HBM timeline's
//!   floating-point sums). For every chunk `c`, placed at `start_c` and ending at `end_c`:
//!   1. `start_c ≥ ready ≥ fixed_ps`: a transfer is ready `fixed_ps` after its dependencies
//!      (`Timing::dma`), and every placement starts at or after `ready`.
//!   2. `end_c ≥ start_c + own`: placed whole, it ends when its data has moved, its
//!      descriptor time after its start, and the HBM timeline never ends a transfer before
//!      `bytes / rate` (its unit test `no_bucket_exceeds_the_cap_and_no_transfer_outruns_its_
//!      engine`); placed shared, its span is `alone + min((k + 1)·rest, block + rest)`
//!      ≥ `alone + rest` = its whole engine time (`Slot::shared_span`).
//!   3. `I_c = [start_c, start_c + own)` lies in its engine's busy time (intervals plus
//!      everything before `floor`, which only grows): a whole chunk's interval is inserted
//!      as it is; a shared one's `[start, block)` is inserted, `[block, block_end)` is the
//!      block, and its charge fills every gap from `block_end` on until `rest` is placed,
//!      past `block_end + rest ≥ start_c + own`.
//!   4. Two chunks of one queue on one engine have disjoint `I_c`: the one placed later
//!      either takes an idle gap whole (disjoint from the busy time, which holds the other's
//!      `I_c` by 3) or shares a block, which it does only when its queue has nothing in flight
//!      there (`queue_free ≤ start`, and `queue_free` is the latest end of the queue's
//!      chunks, each `≥ start_c + own` by 2).
//!
//!   So the chunks of one (engine, queue) occupy disjoint intervals of `[fixed_ps, end]`:
//!   `end ≥ fixed_ps + Σ own`. Different queues of one engine may overlap (round-robin),
//!   and their sum is *not* a bound: a shared chunk's engine time is charged after the
//!   block, where no instruction need end (docs/dma.md §3, "The approximation").
//!
//! The uniform and grouped fast paths give what the general path gives (their tests), so
//! the argument holds for them. The bound is the largest of these sums; `Nc::lower_bound`
//! takes the classic roofline with it.
//!
//! **SPMD launches** (`Nc::spmd`). Each program runs on a fresh core whose clock starts
//! at the caller's end, which is at least the caller's bound; the program's own work
//! then fits after that start, as above, on its own resources. So the caller's bound plus
//! the largest program's bound is below the launch's end, and work issued after the
//! launch (on the caller's core, which continues from the latest end) starts from that
//! sum again: [`SerialWork::after`] carries it as `base_ps`.

use super::{cycles_to_ps, round_u64, DmaChunk};

/// Queues of each DMA engine the builder uses (docs/dma.md §2: loads, stores, SBUF copies,
/// HBM copies).
const DIRECTIONS: usize = 4;

/// The work per serial resource so far (picoseconds).
#[derive(Clone, Debug, Default)]
pub(crate) struct SerialWork {
    /// Per compute engine (tracks 0–3).
    engine_ps: [u64; 4],
    /// Per NeuronCore-v2 shared port (bit 0: SBUF, bit 1: PSUM).
    port_ps: [u64; 2],
    /// Per DMA engine and queue (`engine × 4 + queue`): the least engine time of its chunks.
    dma_ps: Vec<u64>,
    /// The fixed DMA latency once a transfer was issued (0 before).
    dma_fixed_ps: u64,
    /// A bound of everything before the last `Nc::spmd` launch ended (0 without one): every
    /// instruction issued after it starts no earlier than that launch's end (`nc/spmd.rs`),
    /// so this phase's work adds to it.
    base_ps: u64,
}

impl SerialWork {
    /// A compute instruction of `cycles` (fixed cycles included) at `ghz` on `track`, using
    /// the shared `ports` (a bit set).
    #[inline]
    pub(crate) fn compute(&mut self, track: usize, cycles: u64, ghz: f64, ports: u8) {
        let dur = cycles_to_ps(cycles, ghz);
        self.engine_ps[track] += dur;
        for (bit, p) in self.port_ps.iter_mut().enumerate() {
            if ports & (1 << bit) != 0 {
                *p += dur;
            }
        }
    }

    /// A DMA transfer's chunks on `chip`.
    pub(crate) fn dma(&mut self, chip: &crate::Chip, chunks: &[DmaChunk]) {
        self.dma_fixed_ps = super::ns_to_ps(chip.dma.fixed_ns);
        let (desc_ps, rate) = (chip.dma.descriptor_ns * 1000.0, chip.dma.engine_gbps / 1000.0);
        for c in chunks {
            let i = (c.queue - 4) * DIRECTIONS + c.engine_queue as usize;
            if self.dma_ps.len() <= i {
                self.dma_ps.resize(i + 1, 0);
            }
            // As `Timing::place_chunks` charges it, but the streaming time rounded down.
            // (A slower transfer, a DMA transpose, streams at its share of the rate.)
            self.dma_ps[i] +=
                round_u64(c.descriptors as f64 * desc_ps) + (c.bytes as f64 / c.rate(rate)) as u64;
        }
    }

    /// The work of a phase that starts behind a bound of `base_ps` (after an `Nc::spmd`
    /// launch): nothing counted yet.
    pub(crate) fn after(base_ps: u64) -> Self {
        SerialWork { base_ps, ..Default::default() }
    }

    /// The longest work of one compute engine or one shared port (ps), after the base.
    pub(crate) fn compute_ps(&self) -> u64 {
        self.base_ps + self.engine_ps.iter().chain(&self.port_ps).copied().max().unwrap_or(0)
    }

    /// The fixed DMA latency plus the longest work of one queue of one DMA engine (ps; 0
    /// without DMA), after the base.
    pub(crate) fn dma_ps(&self) -> u64 {
        self.base_ps
            + match self.dma_ps.iter().max() {
                Some(&w) => self.dma_fixed_ps + w,
                None => 0,
            }
    }

    /// The larger of the two bounds: no run of the work counted here ends sooner.
    pub(crate) fn bound_ps(&self) -> u64 {
        self.compute_ps().max(self.dma_ps())
    }
}
