//! Violations of the hardware's rules, as typed errors.
//!
//! Every error names the instruction, the kernel's own source line (recorded with
//! `#[track_caller]`) and the numbers involved, so a kernel author can act on it without a
//! debugger. The simulator never panics on a bad program.

use crate::Dtype;
use serde::Serialize;
use std::fmt;
use std::panic::Location;

/// Where in the kernel's source an instruction was issued.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct SourceLoc {
    pub file: &'static str,
    pub line: u32,
    pub column: u32,
}

impl SourceLoc {
    pub fn from_location(l: &'static Location<'static>) -> Self {
        SourceLoc { file: l.file(), line: l.line(), column: l.column() }
    }
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file, self.line, self.column)
    }
}

/// One logical tile's share of a pool, for capacity errors.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TileUse {
    /// Tile name: its explicit name, or the allocation site.
    pub tile: String,
    pub bufs: u32,
    /// Largest size per partition this tile has been allocated with.
    pub bytes_per_partition: u64,
}

/// A pool's share of SBUF or PSUM, for capacity errors.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PoolUse {
    pub pool: String,
    pub bufs: u32,
    /// bufs x largest size, summed over the pool's tiles (bytes per partition; banks for PSUM).
    pub total: u64,
    pub tiles: Vec<TileUse>,
}

/// What a view asked of one dim: a range, or one index (`index`, `at`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Extent {
    Range { start: u64, end: u64 },
    Index(u64),
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Range { start, end } => write!(f, "{start}..{end}"),
            Extent::Index(i) => write!(f, "index {i}"),
        }
    }
}

fn hbm_has(tensor: &str, dim: u8, size: u64, tensor_rank: Option<u8>) -> String {
    match tensor_rank {
        Some(1) => format!("{tensor} has {size} elements"),
        Some(_) if dim == 0 => format!("{tensor} has {size} rows"),
        Some(rank) if dim + 1 == rank => format!("{tensor} has {size} columns"),
        Some(_) => format!("{tensor} has {size} in dim {dim}"),
        None => format!("the view being sliced has {size} there"),
    }
}

/// The rule and its source a [`ViolationKind::FreeSizeTooLarge`] breaks: the per-memory
/// limit of a Vector/Scalar instruction, or `bn_stats`' own (neuroncore.md §2.1).
fn free_size_rule(memory: &str) -> &'static str {
    match memory {
        "bn_stats" => {
            "bn_stats takes at most 512 elements per partition, bn_stats_fmax \
                       (nki.isa.bn_stats; neuroncore.md §2.1)"
        }
        _ => {
            "the chip's max_free_elems_sbuf / max_free_elems_psum: 64K and 4K on the built-in \
              chips, the Vector/Scalar instruction limit of neuroncore.md §2.1, applied to \
              every engine's instructions"
        }
    }
}

fn tile_has(dim: Option<u8>, extent: &Extent, size: u64) -> String {
    match dim {
        None => format!("partitions are {extent}, but the view has {size} partitions"),
        Some(d) => format!("free dim {d} is {extent}, but the view has {size} there"),
    }
}

/// What went wrong.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum ViolationKind {
    #[error("{operand} spans {partitions} partitions, more than the {max} a NeuronCore has")]
    PartitionOverflow { operand: &'static str, partitions: u64, max: u64 },
    #[error(
        "{operand} starts at partition {start} with {partitions} partitions; an access of \
         >64 partitions must start at 0, of 33-64 at 0 or 64, of <=32 at 0, 32, 64 or 96"
    )]
    BadStartPartition { operand: &'static str, start: u64, partitions: u64 },
    #[error("matmul moving free size is {n}, more than the {max} one instruction takes")]
    MovingFreeTooLarge { n: u64, max: u64 },
    #[error("matmul stationary free size is {m}, more than the {max} one instruction takes")]
    StationaryFreeTooLarge { m: u64, max: u64 },
    #[error(
        "PSUM bank overflow: {operand} needs {bytes} bytes per partition from byte {offset} of \
         its bank, but a PSUM bank holds {bank_bytes} bytes per partition"
    )]
    PsumBankOverflow { operand: &'static str, offset: u64, bytes: u64, bank_bytes: u64 },
    #[error("{}", sbuf_capacity_message(.memory, *.needed, *.capacity, .pools))]
    OverCapacity { memory: &'static str, needed: u64, capacity: u64, pools: Vec<PoolUse> },
    /// A range or index of an HBM view's dim `dim` past the size the view it restricts has
    /// there. `tensor_rank`: the rank of the tensor when the dim was the tensor's own
    /// (neither sliced nor moved before), which the message then names as rows or columns.
    #[error(
        "{operand} {tensor} dim {dim} is {extent}, but {}",
        hbm_has(tensor, *dim, *size, *tensor_rank)
    )]
    HbmOutOfBounds {
        operand: &'static str,
        tensor: String,
        dim: u8,
        extent: Extent,
        size: u64,
        tensor_rank: Option<u8>,
    },
    /// A range or index of a tile view past the size of the view it restricts: its
    /// partitions (`dim` None) or free dim `dim` (NKI: an index out of bounds), even where
    /// the tile's memory goes on (the next block of a `[P, blocks, n]` tile).
    #[error("{operand} (tile `{tile}`) {}", tile_has(*dim, extent, *size))]
    TileOutOfBounds {
        operand: &'static str,
        tile: String,
        dim: Option<u8>,
        extent: Extent,
        size: u64,
    },
    /// A view helper that could not apply (a dim the view lacks, a split that does not divide,
    /// a reversed range, one dim too many): `of` is the HBM tensor's name or `(tile `t`)`,
    /// `problem` the call and why.
    #[error("{operand} {of}: {problem}")]
    BadView { operand: &'static str, of: String, problem: String },
    #[error(
        "{operand} reads {what} at partition {partition}, element {element} before anything \
         wrote it (fresh memory is NaN, as in nki.simulate)"
    )]
    UnwrittenRead { operand: &'static str, what: String, partition: u64, element: u64 },
    #[error("{engine} does not accept {dtype} for {operand}: {rule}")]
    DtypeNotAllowed {
        engine: &'static str,
        operand: &'static str,
        dtype: Dtype,
        rule: &'static str,
    },
    #[error("{operand} is in {memory}, but {rule}")]
    MemoryNotAllowed { operand: &'static str, memory: &'static str, rule: &'static str },
    #[error("shape mismatch: {0}")]
    ShapeMismatch(String),
    /// An operand covering more free elements per partition than one instruction may:
    /// `memory` is `SBUF` or `PSUM` for the Vector/Scalar limit (64K and 4K), or the
    /// instruction with a limit of its own (`bn_stats`, 512).
    #[error(
        "{operand} has free size {elems} elements in {memory}, more than the {max} allowed \
         ({})",
        free_size_rule(memory)
    )]
    FreeSizeTooLarge { operand: &'static str, elems: u64, memory: &'static str, max: u64 },
    /// An operand whose elements per partition an instruction does not take (e.g. `max8`
    /// reads 8 to 16,384).
    #[error(
        "{operand} has {elems} elements per partition, but {instruction} takes {min} to {max} \
         (neuroncore.md §2.3)"
    )]
    FreeSizeOutOfRange {
        instruction: &'static str,
        operand: &'static str,
        elems: u64,
        min: u64,
        max: u64,
    },
    #[error("{}", stale_message(.tile, .pool, *.bufs, *.released))]
    StaleTile {
        tile: String,
        pool: String,
        bufs: u32,
        /// The pool was released ([`Nc::release_pool`](crate::Nc::release_pool)): its
        /// memory may hold another phase's tiles, rather than a later buffer of the ring.
        released: bool,
    },
    /// A reduction an instruction's engine cannot do (e.g. `activation` reduces with add only).
    #[error("{engine} cannot reduce with {op:?} in {instruction}: {rule}")]
    ReduceOpNotAllowed {
        instruction: &'static str,
        engine: &'static str,
        op: crate::Alu,
        rule: &'static str,
    },
    #[error("bad access pattern: {0}")]
    BadAccessPattern(String),
    /// An access in one iteration of an `affine_range` loop conflicts with an access of an
    /// earlier iteration (docs/scheduling.md §2); boxed, as it names two instructions.
    #[error("{0}")]
    LoopCarriedDependency(Box<LoopCarried>),
    /// An [`Nc::spmd`](crate::Nc::spmd) launch of more programs than the chip has physical
    /// NeuronCores per logical core (neuroncore.md §2.1: LNC=2 on trn2/trn3, 1 on trn1).
    #[error(
        "{programs} programs launched on {chip}, which runs at most {max} per logical \
         NeuronCore: a kernel runs on the physical cores of one logical core, {max} on this \
         chip (LNC=1 on trn1, LNC=2 on trn2 and trn3; neuroncore.md §2.1 [LNC, LNCK])"
    )]
    TooManyPrograms { programs: u32, max: u32, chip: String },
    /// Two programs of one [`Nc::spmd`](crate::Nc::spmd) launch access the same element of an
    /// HBM tensor, one of them writing it (boxed, as it names two instructions).
    #[error("{0}")]
    SpmdConflict(Box<SpmdConflict>),
    #[error("{0}")]
    Invalid(String),
}

/// Two programs of one `spmd` launch touching the same HBM element, at least one writing:
/// the later access (in the simulator's order, program by program) is the [`SimError`]'s
/// own instruction; this names the earlier one. The programs run at the same time on their
/// own physical cores with no barrier between them, so the outcome would be a race.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "cross-program {hazard} conflict on HBM tensor `{tensor}` at row {row}, element {element}: \
     program {program} {} it, which `{earlier_instruction}` at {earlier_loc} {} in program \
     {earlier_program}; the programs of an spmd launch run at the same time on their own \
     NeuronCores with no barrier between them: give each program its own rows (split by \
     program_id)",
    hazard.later_verb(),
    hazard.earlier_verb(false)
)]
pub struct SpmdConflict {
    pub hazard: Hazard,
    pub tensor: String,
    /// The first conflicting element: its row (index in dim 0) and offset in the row.
    pub row: u64,
    pub element: u64,
    /// The program issuing the later access.
    pub program: u32,
    /// The earlier access: its program, instruction and source line.
    pub earlier_program: u32,
    pub earlier_instruction: &'static str,
    pub earlier_loc: SourceLoc,
}

/// A dependency carried across the iterations of an `affine_range` loop: the later
/// instruction is the [`SimError`]'s own; this names the earlier one and the loop.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error(
    "loop-carried {hazard} dependency in the affine_range loop at {loop_loc}: in the iteration \
     with index {index} this instruction {} {what}, which `{earlier_instruction}` at \
     {earlier_loc} {} in {}; iterations of an affine loop must be independent (only matmuls \
     accumulating into the same PSUM tile may share it): use a sequential loop, or allocate \
     the tile inside the loop so that each iteration has its own",
    hazard.later_verb(),
    hazard.earlier_verb(*.earlier_accumulated),
    iterations(*.earlier_first_index, *.earlier_last_index)
)]
pub struct LoopCarried {
    pub hazard: Hazard,
    /// The tile or HBM tensor both instructions access (`tile `name`` or `HBM tensor
    /// `name``).
    pub what: String,
    /// Loop index of the iteration that issued the later instruction.
    pub index: u64,
    /// The earlier instruction and its source line.
    pub earlier_instruction: &'static str,
    pub earlier_loc: SourceLoc,
    /// Whether the earlier access was a matmul accumulating into PSUM.
    pub earlier_accumulated: bool,
    /// Loop indices of the earlier iterations whose accesses (merged when they touch
    /// adjacent elements from the same source line, or, strided, repeat one pattern shifted)
    /// conflict: first and last.
    pub earlier_first_index: u64,
    pub earlier_last_index: u64,
    /// The `affine_range` call whose iterations the dependency crosses.
    pub loop_loc: SourceLoc,
}

/// The kind of a loop-carried dependency: which access came first (in program order) and
/// which after it, in another iteration of the same `affine_range` loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Hazard {
    /// Read after write: an iteration reads what an earlier one wrote.
    Raw,
    /// Write after read: an iteration overwrites what an earlier one read.
    War,
    /// Write after write: two iterations write the same elements (outside PSUM
    /// accumulation by matmuls).
    Waw,
}

impl Hazard {
    fn later_verb(&self) -> &'static str {
        match self {
            Hazard::Raw => "reads",
            Hazard::War | Hazard::Waw => "writes",
        }
    }

    fn earlier_verb(&self, accumulated: bool) -> &'static str {
        match (self, accumulated) {
            (Hazard::War, _) => "read",
            (_, true) => "accumulated into",
            (_, false) => "wrote",
        }
    }
}

impl fmt::Display for Hazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hazard::Raw => "RAW (read after write)",
            Hazard::War => "WAR (write after read)",
            Hazard::Waw => "WAW (write after write)",
        })
    }
}

fn iterations(first: u64, last: u64) -> String {
    if first == last {
        format!("the iteration with index {first}")
    } else {
        format!("the iterations with indices {first} to {last}")
    }
}

fn stale_message(tile: &str, pool: &str, bufs: u32, released: bool) -> String {
    if released {
        format!(
            "tile `{tile}` was used after its pool `{pool}` was released (its memory belongs to \
             the next phase's pools); finish using it before release_pool"
        )
    } else {
        format!(
            "tile `{tile}` was used after its buffer was reused by a later allocation of the \
             same tile (pool `{pool}` has bufs = {bufs}); raise bufs or finish using it before \
             allocating the next one"
        )
    }
}

fn sbuf_capacity_message(memory: &str, needed: u64, capacity: u64, pools: &[PoolUse]) -> String {
    let unit = if memory == "PSUM" { "banks" } else { "bytes per partition" };
    let mut s = format!("{memory} over capacity: needs {needed} {unit}, has {capacity}");
    for p in pools {
        s.push_str(&format!("\n  pool `{}` (bufs={}): {} {unit}", p.pool, p.bufs, p.total));
        for t in &p.tiles {
            s.push_str(&format!(
                "\n    tile `{}`: {} x {} = {}",
                t.tile,
                t.bufs,
                t.bytes_per_partition,
                t.bufs as u64 * t.bytes_per_partition
            ));
        }
    }
    s
}

impl ViolationKind {
    /// A stable snake_case name of the rule that was broken (`over_capacity`, …), for
    /// machine-readable reports.
    pub fn name(&self) -> &'static str {
        match self {
            ViolationKind::PartitionOverflow { .. } => "partition_overflow",
            ViolationKind::BadStartPartition { .. } => "bad_start_partition",
            ViolationKind::MovingFreeTooLarge { .. } => "moving_free_too_large",
            ViolationKind::StationaryFreeTooLarge { .. } => "stationary_free_too_large",
            ViolationKind::PsumBankOverflow { .. } => "psum_bank_overflow",
            ViolationKind::OverCapacity { .. } => "over_capacity",
            ViolationKind::HbmOutOfBounds { .. } => "hbm_out_of_bounds",
            ViolationKind::TileOutOfBounds { .. } => "tile_out_of_bounds",
            ViolationKind::BadView { .. } => "bad_view",
            ViolationKind::UnwrittenRead { .. } => "unwritten_read",
            ViolationKind::DtypeNotAllowed { .. } => "dtype_not_allowed",
            ViolationKind::MemoryNotAllowed { .. } => "memory_not_allowed",
            ViolationKind::ShapeMismatch { .. } => "shape_mismatch",
            ViolationKind::FreeSizeTooLarge { .. } => "free_size_too_large",
            ViolationKind::FreeSizeOutOfRange { .. } => "free_size_out_of_range",
            ViolationKind::StaleTile { .. } => "stale_tile",
            ViolationKind::ReduceOpNotAllowed { .. } => "reduce_op_not_allowed",
            ViolationKind::BadAccessPattern { .. } => "bad_access_pattern",
            ViolationKind::LoopCarriedDependency { .. } => "loop_carried_dependency",
            ViolationKind::TooManyPrograms { .. } => "too_many_programs",
            ViolationKind::SpmdConflict { .. } => "spmd_conflict",
            ViolationKind::Invalid(_) => "invalid",
        }
    }
}

/// A rule of the hardware broken by an instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct SimError {
    /// The instruction (NKI-style name, e.g. `nc_matmul`, `dma_copy`).
    pub instruction: &'static str,
    /// The kernel's source line that issued it.
    pub loc: SourceLoc,
    pub kind: ViolationKind,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.loc, self.instruction, self.kind)
    }
}

impl std::error::Error for SimError {}

/// Result of a builder call.
pub type SimResult<T> = Result<T, SimError>;

impl From<String> for SimError {
    /// A kernel body's own error (a bad parameter, a shape it cannot handle), reported at
    /// the line of its `?`: `let bufs = params.uint("bufs")?;` in a `SimResult` function.
    #[track_caller]
    fn from(message: String) -> SimError {
        SimError {
            instruction: "kernel",
            loc: SourceLoc::from_location(Location::caller()),
            kind: ViolationKind::Invalid(message),
        }
    }
}
