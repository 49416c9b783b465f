//! Freeing a pool between the phases of one kernel (`Nc::release_pool`): the memory is
//! reclaimed, handles to the released tiles are errors, and the order between the old and the
//! new buffers of that memory is kept (docs/neuroncore.md §1.6, the note on phases).

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

mod random_phases {
    //! Properties over random two-phase programs: the release orders every later access after
    //! every earlier one, and changes times only, never values.

    use neuron_sim::{Act, ActArgs, Alu, Chip, Dtype, Engine, ExecMode, Hbm, Nc, Pool};
    use proptest::prelude::*;

    const F: u64 = 32;

    #[derive(Clone, Copy, Debug)]
    enum Step {
        Load { tile: usize, block: u64 },
        Store { tile: usize, block: u64 },
        Add { dst: usize, a: usize, b: usize },
        Exp { dst: usize, src: usize },
        Copy { engine: usize, dst: usize, src: usize },
        Shuffle { dst: usize, src: usize, shift: u8 },
    }

    fn step() -> impl Strategy<Value = Step> {
        let t = 0usize..3;
        prop_oneof![
            (t.clone(), 0u64..4).prop_map(|(tile, block)| Step::Load { tile, block }),
            (t.clone(), 0u64..4).prop_map(|(tile, block)| Step::Store { tile, block }),
            (t.clone(), t.clone(), t.clone()).prop_map(|(dst, a, b)| Step::Add { dst, a, b }),
            (t.clone(), t.clone()).prop_map(|(dst, src)| Step::Exp { dst, src }),
            (0usize..3, t.clone(), t.clone()).prop_map(|(engine, dst, src)| Step::Copy {
                engine,
                dst,
                src
            }),
            (t.clone(), t, 0u8..32).prop_map(|(dst, src, shift)| Step::Shuffle { dst, src, shift }),
        ]
    }

    /// One phase: three tiles of `pool` loaded from `x` (so each is written), then `steps`.
    fn phase(nc: &mut Nc, pool: Pool, x: Hbm, y: Hbm, steps: &[Step]) {
        let tiles: Vec<_> = (0..3)
            .map(|i| nc.tile_named(pool, &format!("t{i}"), Dtype::F32, &[128, F]).unwrap())
            .collect();
        for (i, t) in tiles.iter().enumerate() {
            nc.dma(*t, x.cols(i as u64 * F..(i as u64 + 1) * F)).unwrap();
        }
        for s in steps {
            match *s {
                Step::Load { tile, block } => {
                    nc.dma(tiles[tile], x.cols(block * F..(block + 1) * F))
                }
                Step::Store { tile, block } => {
                    nc.dma(y.cols(block * F..(block + 1) * F), tiles[tile])
                }
                Step::Add { dst, a, b } => {
                    nc.tensor_tensor(tiles[dst], tiles[a], tiles[b], Alu::Add)
                }
                Step::Exp { dst, src } => {
                    nc.activation(tiles[dst], tiles[src], Act::Exp, ActArgs::default())
                }
                Step::Copy { engine, dst, src } => {
                    let e = [Engine::Vector, Engine::Scalar, Engine::GpSimd][engine];
                    nc.on(e).tensor_copy(tiles[dst], tiles[src])
                }
                Step::Shuffle { dst, src, shift } => {
                    let mask = std::array::from_fn(|i| (i as u8 + shift) % 32);
                    nc.stream_shuffle(tiles[dst], tiles[src], mask)
                }
            }
            .unwrap();
        }
    }

    struct Run {
        out: Vec<u32>,
        /// Trace slices (start, end) in µs of phase 1 and of phase 2.
        slices: [Vec<(f64, f64)>; 2],
    }

    fn slices(nc: &Nc) -> Vec<(f64, f64)> {
        let trace = nc.trace_json().unwrap_or_default();
        let Some(events) = trace["traceEvents"].as_array() else { return Vec::new() };
        events
            .iter()
            .filter(|e| e["ph"] == "X")
            .map(|e| {
                let ts = e["ts"].as_f64().unwrap();
                (ts, ts + e["dur"].as_f64().unwrap())
            })
            .collect()
    }

    fn run(one: &[Step], two: &[Step], release: bool, mode: ExecMode) -> Run {
        let mut nc = Nc::new(Chip::trn2(), mode);
        let input: Vec<f32> =
            (0..128 * 4 * F).map(|i| ((i * 7919) % 1000) as f32 / 1000.0).collect();
        let x = nc.hbm_input("x", Dtype::F32, &[128, 4 * F], &input).unwrap();
        let y1 = nc.hbm("y1", Dtype::F32, &[128, 4 * F]).unwrap();
        let y2 = nc.hbm("y2", Dtype::F32, &[128, 4 * F]).unwrap();
        let p1 = nc.sbuf_pool("one", 1);
        phase(&mut nc, p1, x, y1, one);
        let first = slices(&nc);
        if release {
            nc.release_pool(p1).unwrap();
        }
        let p2 = nc.sbuf_pool("two", 1);
        phase(&mut nc, p2, x, y2, two);
        let all = slices(&nc);
        let second = all[first.len()..].to_vec();
        let out =
            nc.read_hbm(y2).map(|v| v.iter().map(|f| f.to_bits()).collect()).unwrap_or_default();
        Run { out, slices: [first, second] }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

        /// Every phase-2 instruction touches a buffer made after the release, so none starts
        /// before every phase-1 instruction has ended.
        #[test]
        fn nothing_of_the_next_phase_starts_before_the_released_phase_ends(
            one in prop::collection::vec(step(), 0..12),
            two in prop::collection::vec(step(), 0..12),
        ) {
            let r = run(&one, &two, true, ExecMode::TRACE);
            let end = r.slices[0].iter().map(|s| s.1).fold(0.0, f64::max);
            for (start, _) in &r.slices[1] {
                prop_assert!(*start >= end - 1e-9, "phase-2 slice at {} µs, phase 1 ends {} µs", start, end);
            }
        }

        /// The release orders the phases in time; the values phase 2 computes do not change.
        #[test]
        fn a_release_changes_no_value(
            one in prop::collection::vec(step(), 0..12),
            two in prop::collection::vec(step(), 0..12),
        ) {
            // Phase 2 ends by storing every tile (block 3 gets tile 0 again), so whatever it
            // computed last is seen in `y2`, not only what a random `Store` happened to write.
            let mut two = two;
            two.extend((0..4).map(|block| Step::Store { tile: block as usize % 3, block }));
            let with = run(&one, &two, true, ExecMode::FUNCTIONAL);
            let without = run(&one, &two, false, ExecMode::FUNCTIONAL);
            // (y2 starts as zeros; the input is in [0, 1), a thousandth of it 0.)
            let written = with.out.iter().filter(|&&bits| bits != 0).count();
            prop_assert!(written > with.out.len() / 2, "y2 holds what phase 2 stored");
            prop_assert_eq!(with.out, without.out);
        }
    }
}
