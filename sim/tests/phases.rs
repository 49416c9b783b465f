//! Freeing a pool between the phases of one kernel (`Nc::release_pool`): the memory is
//! reclaimed, handles to the released tiles are errors, and the order between the old and the
//! new buffers of that memory is kept (neuroncore.md §1.6; docs/neuroncore.md's pool note).

use neuron_sim::{Act, ActArgs, Chip, Dtype, ExecMode, Nc, Pool, ViolationKind as V};
use serde_json::Value;

/// `[start, end)` in µs of every trace slice issued from source `line` of this file.
fn slices_of(trace: &Value, line: u32) -> Vec<(f64, f64)> {
    let want = format!("{}:{line}", file!());
    trace["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["ph"] == "X" && e["args"]["nki_source_location"] == want.as_str())
        .map(|e| {
            let ts = e["ts"].as_f64().unwrap();
            (ts, ts + e["dur"].as_f64().unwrap())
        })
        .collect()
}

/// Phase 1 reads a tile of pool `one` for a long time (an activation over 16 K elements per
/// partition); phase 2 loads a tile of pool `two` from HBM. Returns the lines of the phase-1
/// activation and of the phase-2 load, and the trace.
fn two_phases(release: bool) -> (u32, u32, Value) {
    let mut nc = Nc::new(Chip::trn1(), ExecMode::TRACE);
    let n = 16 * 1024;
    let x = nc.hbm_input("x", Dtype::F32, &[128, n], &[]).unwrap();
    let y = nc.hbm_input("y", Dtype::F32, &[128, n / 2], &[]).unwrap();
    let one = nc.sbuf_pool("phase1", 1);
    let a = nc.tile(one, Dtype::F32, &[128, n]).unwrap();
    nc.dma(a, x).unwrap();
    let b = nc.tile(one, Dtype::Bf16, &[128, n]).unwrap();
    let act_line = line!() + 1;
    nc.activation(b, a, Act::Exp, ActArgs::default()).unwrap();
    if release {
        nc.release_pool(one).unwrap();
    }
    let two = nc.sbuf_pool("phase2", 1);
    let c = nc.tile(two, Dtype::F32, &[128, n / 2]).unwrap();
    let load_line = line!() + 1;
    nc.dma(c, y).unwrap();
    (act_line, load_line, nc.trace_json().unwrap())
}

#[test]
fn a_later_phase_write_waits_for_the_released_phase_reads() {
    // The phase-2 load writes memory that may be phase 1's `a`, which the activation is
    // still reading: with the release, every chunk of the load starts after the activation
    // ends (write after read across the free).
    let (act, load, trace) = two_phases(true);
    let act_end = slices_of(&trace, act).iter().map(|s| s.1).fold(0.0, f64::max);
    let loads = slices_of(&trace, load);
    assert!(!loads.is_empty() && act_end > 0.0);
    for (start, _) in &loads {
        assert!(*start >= act_end, "phase-2 load starts at {start} µs, before {act_end} µs");
    }
    // Without the release the two pools are different memory, and the load overlaps the
    // activation: the order above comes from the release, not from the program's shape.
    let (act, load, trace) = two_phases(false);
    let act_end = slices_of(&trace, act).iter().map(|s| s.1).fold(0.0, f64::max);
    let first = slices_of(&trace, load).iter().map(|s| s.0).fold(f64::INFINITY, f64::min);
    assert!(first < act_end, "unreleased: load at {first} µs, activation ends {act_end} µs");
}

/// A phase that fills `kib` KiB per partition of SBUF with one f32 tile of `pool` and
/// writes it.
fn fill(nc: &mut Nc, pool: Pool, kib: u64) -> Result<(), neuron_sim::SimError> {
    let t = nc.tile(pool, Dtype::F32, &[128, kib * 1024 / 4])?;
    nc.memset(t, 1.0)
}

#[test]
fn a_released_pool_gives_its_capacity_to_the_next_phase() {
    // trn1 SBUF: 192 KiB per partition (neuroncore.md §1.6). Two phases of 128 KiB each fit
    // only if the first is released.
    let mut nc = Nc::new(Chip::trn1(), ExecMode::BOTH);
    let one = nc.sbuf_pool("one", 1);
    fill(&mut nc, one, 128).unwrap();
    nc.release_pool(one).unwrap();
    let two = nc.sbuf_pool("two", 1);
    fill(&mut nc, two, 128).unwrap();
    // The profile's peak is the larger phase, not their sum.
    assert_eq!(nc.profile().sbuf_peak_bytes_per_partition, 128 * 1024);

    let mut nc = Nc::new(Chip::trn1(), ExecMode::BOTH);
    let one = nc.sbuf_pool("one", 1);
    fill(&mut nc, one, 128).unwrap();
    let two = nc.sbuf_pool("two", 1);
    let e = fill(&mut nc, two, 128).unwrap_err();
    match e.kind {
        V::OverCapacity { needed, capacity, .. } => {
            assert_eq!((needed, capacity), (256 * 1024, 192 * 1024))
        }
        k => panic!("expected over_capacity, got {k}"),
    }
}

#[test]
fn a_released_pool_gives_its_psum_banks_to_the_next_phase() {
    // PSUM: 8 banks of 2 KiB per partition (§1.6); a [128, 4 x 512] f32 tile takes 4 banks.
    let mut nc = Nc::new(Chip::trn1(), ExecMode::TIMING);
    let one = nc.psum_pool("one", 2);
    nc.tile(one, Dtype::F32, &[128, 2048]).unwrap();
    nc.release_pool(one).unwrap();
    let two = nc.psum_pool("two", 2);
    nc.tile(two, Dtype::F32, &[128, 2048]).unwrap();
    let three = nc.psum_pool("three", 1);
    let e = nc.tile(three, Dtype::F32, &[128, 512]).unwrap_err();
    assert!(matches!(e.kind, V::OverCapacity { needed: 9, capacity: 8, .. }), "{e}");
}

#[test]
fn using_or_allocating_from_a_released_pool_is_a_stale_tile_error() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::BOTH);
    let one = nc.sbuf_pool("one", 2);
    let t = nc.tile(one, Dtype::F32, &[128, 64]).unwrap();
    nc.memset(t, 0.0).unwrap();
    nc.release_pool(one).unwrap();
    let line = line!() + 1;
    let e = nc.memset(t, 1.0).unwrap_err();
    assert_eq!((e.instruction, e.loc.line), ("memset", line));
    assert!(matches!(&e.kind, V::StaleTile { pool, released: true, .. } if pool == "one"), "{e}");
    assert!(e.to_string().contains("after its pool `one` was released"), "{e}");

    let e = nc.tile(one, Dtype::F32, &[128, 64]).unwrap_err();
    assert_eq!(e.instruction, "tile");
    assert!(matches!(e.kind, V::StaleTile { released: true, .. }), "{e}");

    let e = nc.release_pool(one).unwrap_err();
    assert_eq!(e.instruction, "release_pool");
    assert!(e.to_string().contains("already released"), "{e}");
}

#[test]
fn release_pool_is_refused_inside_an_affine_loop() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    let one = nc.sbuf_pool("one", 1);
    let e = nc.affine_range(0..2, |nc, _| nc.release_pool(one)).unwrap_err();
    assert_eq!(e.instruction, "release_pool");
    assert!(e.to_string().contains("inside an affine_range loop"), "{e}");
}

#[test]
fn a_release_is_part_of_the_program_hash() {
    let hash = |release: bool| {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
        let one = nc.sbuf_pool("one", 1);
        fill(&mut nc, one, 1).unwrap();
        if release {
            nc.release_pool(one).unwrap();
        }
        let two = nc.sbuf_pool("two", 1);
        fill(&mut nc, two, 1).unwrap();
        nc.program_hash()
    };
    assert_ne!(hash(true), hash(false));
    assert_eq!(hash(true), hash(true));
}
