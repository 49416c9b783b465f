//! SPMD launches over the physical NeuronCores of a logical core (`Nc::spmd`, NKI
//! `kernel[2](…)` with `nl.program_id(0)`; sim/src/nc/spmd.rs): values as if the programs ran
//! one after another, each program on its own core's engines, DMA queues and HBM share,
//! cross-program HBM conflicts refused naming both instructions, the chip's LNC rule, the
//! program hash, the profile, the trace and the lower bound.

use neuron_sim::{
    Alu, Chip, Dtype, ExecMode, Hazard, Hbm, Nc, Scalar, SimResult, ViolationKind as V,
};

/// Row-block `b` (128 rows) of `x` times 2 plus 1, and its row sums, into `y` and `s`.
fn scale_rows(nc: &mut Nc, x: Hbm, y: Hbm, s: Hbm, b: u64) -> SimResult<()> {
    let rows = b * 128..(b + 1) * 128;
    let pool = nc.sbuf_pool("io", 2);
    let t = nc.tile(pool, Dtype::F32, &[128, 512])?;
    let r = nc.tile(pool, Dtype::F32, &[128, 1])?;
    nc.dma(t, x.rows(rows.clone()))?;
    nc.tensor_scalar(t, t, (Alu::Multiply, Scalar::Imm(2.0)), Some((Alu::Add, Scalar::Imm(1.0))))?;
    nc.tensor_reduce(r, t, Alu::Add, false)?;
    nc.dma(y.rows(rows.clone()), t)?;
    nc.dma(s.rows(rows), r)
}

fn tensors(nc: &mut Nc) -> (Hbm, Hbm, Hbm) {
    let data: Vec<f32> = (0..256 * 512).map(|i| ((i * 37) % 101) as f32 / 7.0 - 5.0).collect();
    let x = nc.hbm_input("x", Dtype::F32, &[256, 512], &data).unwrap();
    let y = nc.hbm("y", Dtype::F32, &[256, 512]).unwrap();
    let s = nc.hbm("s", Dtype::F32, &[256, 1]).unwrap();
    (x, y, s)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn two_programs_compute_what_one_program_computes() {
    for chip in [Chip::trn2(), Chip::trn3()] {
        let mut one = Nc::new(chip.clone(), ExecMode::BOTH);
        let (x, y, s) = tensors(&mut one);
        for b in 0..2 {
            scale_rows(&mut one, x, y, s, b).unwrap();
        }
        let mut two = Nc::new(chip, ExecMode::BOTH);
        let (x2, y2, s2) = tensors(&mut two);
        two.spmd(2, |nc, pid| {
            assert_eq!((nc.program_id(), nc.num_programs()), (pid, 2));
            scale_rows(nc, x2, y2, s2, pid as u64)
        })
        .unwrap();
        assert_eq!((two.program_id(), two.num_programs()), (0, 1));
        assert!(bits(one.read_hbm(y).unwrap()) == bits(two.read_hbm(y2).unwrap()));
        assert!(bits(one.read_hbm(s).unwrap()) == bits(two.read_hbm(s2).unwrap()));
        assert!(two.read_hbm(y2).unwrap().iter().all(|v| v.is_finite()));
    }
}

/// VectorE on trn2 (neuroncore.md §7): 0.96 GHz, fixed access start 60 cycles, latency 100.
const VECTOR_GHZ: f64 = 0.96;

fn ps(cycles: u64) -> u64 {
    (cycles as f64 * 1000.0 / VECTOR_GHZ + 0.5) as u64
}

/// One half's VectorE work: a memset of a [128, 512] fp32 tile (`max(MIN_II, N)` = 512
/// cycles, §2.3, + 60) and `n` fp32 tensor_scalars from it into tiles of their own (512 + 60
/// each), the first waiting for the memset's result (its latency, 100 cycles).
fn vector_half(nc: &mut Nc, n: usize) -> SimResult<()> {
    let pool = nc.sbuf_pool("v", 1);
    let src = nc.tile_named(pool, "src", Dtype::F32, &[128, 512])?;
    nc.memset(src, 1.0)?;
    for i in 0..n {
        let d = nc.tile_named(pool, &format!("d{i}"), Dtype::F32, &[128, 512])?;
        nc.tensor_scalar(d, src, (Alu::Multiply, Scalar::Imm(3.0)), None)?;
    }
    nc.release_pools();
    Ok(())
}

#[test]
fn two_programs_each_doing_half_take_half_the_time_on_trn2() {
    let n = 8;
    let half = (n as u64 + 1) * ps(512 + 60) + ps(100);
    // One core: both halves in program order. The second half's memset writes a buffer of
    // a new pool, which may be the released memory of the first's, so it waits for the
    // first half's last write to land (its latency), and its first tensor_scalar for its own.
    let mut one = Nc::new(Chip::trn2(), ExecMode::TIMING);
    vector_half(&mut one, n).unwrap();
    vector_half(&mut one, n).unwrap();
    let p1 = one.profile();
    assert_eq!(p1.kernel_time_us, (2 * half + ps(100)) as f64 / 1e6);
    // Two cores: each its half, from time 0.
    let mut two = Nc::new(Chip::trn2(), ExecMode::TIMING);
    two.spmd(2, |nc, _| vector_half(nc, n)).unwrap();
    let p2 = two.profile();
    assert_eq!(p2.kernel_time_us, half as f64 / 1e6);
    // Work is summed over the cores; shares are of both cores' time.
    assert_eq!(p2.physical_cores, 2);
    assert_eq!(p2.vector_engine_instruction_count, 2 * (n as u64 + 1));
    assert_eq!(p2.instruction_count, p1.instruction_count);
    assert_eq!(p2.engines[1].busy_cycles, p1.engines[1].busy_cycles);
    let busy = 2 * (n as u64 + 1) * ps(512 + 60);
    let share = 100.0 * busy as f64 / (2 * half) as f64;
    assert!((p2.vector_engine_active_time_percent - share).abs() < 1e-9);
    let json = serde_json::to_value(&p2).unwrap();
    assert_eq!(json["physical_cores"], 2);
    assert!(serde_json::to_value(&p1).unwrap().get("physical_cores").is_none());
}

#[test]
fn one_program_is_timed_as_the_body_alone() {
    for chip in [Chip::trn1(), Chip::trn2()] {
        let mut plain = Nc::new(chip.clone(), ExecMode::BOTH);
        let (x, y, s) = tensors(&mut plain);
        scale_rows(&mut plain, x, y, s, 0).unwrap();
        let mut launched = Nc::new(chip, ExecMode::BOTH);
        let (x2, y2, s2) = tensors(&mut launched);
        launched.spmd(1, |nc, _| scale_rows(nc, x2, y2, s2, 0)).unwrap();
        let (mut a, mut b) = (plain.profile(), launched.profile());
        assert_ne!(a.program_hash, b.program_hash);
        a.program_hash.clear();
        b.program_hash.clear();
        assert_eq!(a, b);
        assert!(bits(plain.read_hbm(y).unwrap()) == bits(launched.read_hbm(y2).unwrap()));
    }
}

/// `programs` programs each loading `rows` rows of a [.., 8192] bf16 tensor in tiles of 128
/// rows (16 KiB per partition, one descriptor per row: DMA-streaming bound).
fn loads(chip: Chip, programs: u32, rows: u64) -> neuron_sim::Profile {
    let mut nc = Nc::new(chip, ExecMode::TIMING);
    let x = nc.hbm_input("x", Dtype::Bf16, &[rows * programs as u64, 8192], &[]).unwrap();
    nc.spmd(programs, |nc, pid| {
        let pool = nc.sbuf_pool("in", 2);
        for b in 0..rows / 128 {
            let t = nc.tile(pool, Dtype::Bf16, &[128, 8192])?;
            let r0 = pid as u64 * rows + b * 128;
            nc.dma(t, x.rows(r0..r0 + 128))?;
        }
        Ok(())
    })
    .unwrap();
    nc.profile()
}

#[test]
fn each_program_has_its_own_dma_queues_and_hbm_share() {
    // trn2: 16 engines × 23 GB/s = 368 GB/s of DMA against 362 GB/s of HBM per core (§7):
    // a core's loads are bound by its HBM share. Two programs moving a core's worth each
    // take what one core takes for its half, not what one core takes for both.
    let alone = loads(Chip::trn2(), 1, 512);
    let two = loads(Chip::trn2(), 2, 512);
    let both_on_one = loads(Chip::trn2(), 1, 1024);
    assert_eq!(two.kernel_time_us, alone.kernel_time_us);
    assert!(both_on_one.kernel_time_us > 1.9 * alone.kernel_time_us);
    assert_eq!(two.hbm_read_bytes, both_on_one.hbm_read_bytes);
    // The two cores together move more than one core's bandwidth; utilization is of both.
    let per_core = Chip::trn2().memory.hbm_gbps_per_core;
    assert!(two.hbm_bandwidth_gbps > 1.5 * per_core, "{}", two.hbm_bandwidth_gbps);
    assert!(two.mbu_estimated_percent <= 100.0 + 1e-9);
    assert!((two.mbu_estimated_percent - alone.mbu_estimated_percent).abs() < 1e-9);
    assert!((two.roofline_bound_us - alone.roofline_bound_us).abs() < 1e-9);
}

fn conflict(e: &neuron_sim::SimError) -> &neuron_sim::SpmdConflict {
    match &e.kind {
        V::SpmdConflict(c) => c,
        _ => panic!("not a conflict: {e}"),
    }
}

/// Each program stores its tile into `view(pid)` of `y` (after loading rows of `x`).
fn store_views(
    chip: Chip,
    view: impl Fn(Hbm, u32) -> neuron_sim::HbmView,
    cols: u64,
) -> SimResult<(Nc, Hbm)> {
    let mut nc = Nc::new(chip, ExecMode::FUNCTIONAL);
    let x = nc.hbm_input("x", Dtype::F32, &[128, cols], &vec![1.5; 128 * cols as usize])?;
    let y = nc.hbm("y", Dtype::F32, &[256, 64])?;
    nc.spmd(2, |nc, pid| {
        let pool = nc.sbuf_pool("io", 1);
        let t = nc.tile(pool, Dtype::F32, &[128, cols])?;
        nc.dma(t, x)?;
        nc.dma(view(y, pid), t)
    })?;
    Ok((nc, y))
}

#[test]
fn overlapping_writes_are_a_write_write_conflict_naming_both_stores() {
    // Program 0 writes rows 0..128, program 1 rows 64..192: row 64 is the first element
    // program 1 writes that program 0 wrote.
    let e = store_views(Chip::trn2(), |y, pid| y.rows(pid as u64 * 64..pid as u64 * 64 + 128), 64)
        .err()
        .expect("a conflict");
    let c = conflict(&e);
    assert_eq!(e.instruction, "dma_copy");
    assert_eq!((c.hazard, c.tensor.as_str(), c.row, c.element), (Hazard::Waw, "y", 64, 0));
    assert_eq!((c.program, c.earlier_program), (1, 0));
    assert_eq!(c.earlier_instruction, "dma_copy");
    assert_eq!(c.earlier_loc, e.loc, "the same line of the body issued both");
    assert_eq!(e.kind.name(), "spmd_conflict");
    let msg = e.to_string();
    assert!(
        msg.contains("WAW") && msg.contains("program 1 writes") && msg.contains("program 0"),
        "{msg}"
    );
}

#[test]
fn a_read_of_another_programs_write_is_a_write_read_conflict() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let x = nc.hbm_input("x", Dtype::F32, &[128, 64], &[2.0; 128 * 64]).unwrap();
    let y = nc.hbm("y", Dtype::F32, &[128, 64]).unwrap();
    let store_line = line!() + 7;
    let e = nc
        .spmd(2, |nc, pid| {
            let pool = nc.sbuf_pool("io", 1);
            let t = nc.tile(pool, Dtype::F32, &[128, 64])?;
            if pid == 0 {
                nc.dma(t, x)?;
                nc.dma(y, t)
            } else {
                nc.dma(t.parts(0..1).cols(0..61), y.rows(100..101).cols(3..64))
            }
        })
        .unwrap_err();
    let c = conflict(&e);
    assert_eq!((c.hazard, c.row, c.element), (Hazard::Raw, 100, 3));
    assert_eq!((c.program, c.earlier_program), (1, 0));
    assert_eq!(c.earlier_loc.line, store_line);
    assert_eq!(e.loc.line, store_line + 2);
    assert!(e.to_string().contains("program 1 reads it, which `dma_copy`"), "{e}");
    // The launch ended: the core is usable again (the caller's state restored).
    assert_eq!(nc.num_programs(), 1);
}

#[test]
fn a_write_of_what_another_program_read_is_a_read_write_conflict() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
    let x = nc.hbm_input("x", Dtype::F32, &[128, 64], &[2.0; 128 * 64]).unwrap();
    let e = nc
        .spmd(2, |nc, pid| {
            let pool = nc.sbuf_pool("io", 1);
            let t = nc.tile(pool, Dtype::F32, &[128, 64])?;
            nc.dma(t, x)?;
            if pid == 1 {
                nc.dma(x.rows(5..6), t.parts(0..1))?;
            }
            Ok(())
        })
        .unwrap_err();
    let c = conflict(&e);
    assert_eq!(
        (c.hazard, c.row, c.element, c.program, c.earlier_program),
        (Hazard::War, 5, 0, 1, 0)
    );
    assert!(
        e.to_string().contains("which `dma_copy`") && e.to_string().contains(" read in program 0"),
        "{e}"
    );
}

#[test]
fn disjoint_interleaved_accesses_and_shared_reads_are_accepted() {
    // Every other column of y per program (a strided store each), both programs reading
    // all of x: no element is written by one program and touched by the other.
    let (nc, y) =
        store_views(Chip::trn2(), |y, pid| y.rows(0..128).split(1, 2).index(2, pid as u64), 32)
            .unwrap();
    let y = nc.read_hbm(y).unwrap();
    assert!(y[..128 * 64].iter().all(|&v| v == 1.5));
    assert!(y[128 * 64..].iter().all(|v| v.is_nan()));
}

#[test]
fn trn1_refuses_two_programs_and_no_chip_takes_three() {
    for (chip, programs, max) in [(Chip::trn1(), 2, 1), (Chip::trn2(), 3, 2), (Chip::trn3(), 3, 2)]
    {
        let mut nc = Nc::new(chip.clone(), ExecMode::BOTH);
        let e = nc.spmd(programs, |_, _| panic!("no program runs")).unwrap_err();
        assert_eq!(e.instruction, "spmd");
        assert_eq!(e.loc.line, line!() - 2);
        assert_eq!(e.kind, V::TooManyPrograms { programs, max, chip: chip.name.clone() });
        assert_eq!(e.kind.name(), "too_many_programs");
        assert!(e.to_string().contains("LNC=1 on trn1, LNC=2 on trn2 and trn3"), "{e}");
        assert_eq!(chip.max_programs(), max);
    }
    let mut nc = Nc::new(Chip::trn1(), ExecMode::BOTH);
    nc.spmd(1, |_, pid| {
        assert_eq!(pid, 0);
        Ok(())
    })
    .unwrap();
    assert!(nc.spmd(0, |_, _| Ok(())).is_err());
}

#[test]
fn launches_are_refused_nested_in_loops_or_with_pools_open() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::BOTH);
    let e = nc.spmd(2, |nc, _| nc.spmd(2, |_, _| Ok(()))).unwrap_err();
    assert!(matches!(&e.kind, V::Invalid(m) if m.contains("inside program 0")), "{e}");
    let e = nc.affine_range(0..2, |nc, _| nc.spmd(2, |_, _| Ok(()))).unwrap_err();
    assert!(matches!(&e.kind, V::Invalid(m) if m.contains("affine_range")), "{e}");
    let pool = nc.sbuf_pool("open", 1);
    let t = nc.tile(pool, Dtype::F32, &[128, 4]).unwrap();
    let e = nc.spmd(2, |_, _| Ok(())).unwrap_err();
    assert!(matches!(&e.kind, V::Invalid(m) if m.contains("pool `open`")), "{e}");
    // Released, the launch runs; a tile kept from one program is stale in the next.
    nc.release_pools();
    let mut kept = None;
    let e = nc
        .spmd(2, |nc, pid| {
            if pid == 0 {
                let pool = nc.sbuf_pool("p", 1);
                kept = Some(nc.tile(pool, Dtype::F32, &[128, 4])?);
                nc.memset(kept.unwrap(), 0.0)
            } else {
                nc.memset(kept.unwrap(), 1.0)
            }
        })
        .unwrap_err();
    assert!(matches!(e.kind, V::StaleTile { released: true, .. }), "{e}");
    assert!(nc.memset(t, 0.0).is_err(), "the caller's released tile stays stale");
}

fn hash(chip: Chip, f: impl FnOnce(&mut Nc) -> SimResult<()>) -> String {
    let mut nc = Nc::new(chip, ExecMode::TIMING);
    f(&mut nc).unwrap();
    nc.profile().program_hash
}

#[test]
fn the_program_hash_covers_the_launch() {
    let body = |nc: &mut Nc, pid: u32| -> SimResult<()> {
        let x = nc.hbm_input(&format!("x{pid}"), Dtype::F32, &[128, 64], &[])?;
        let pool = nc.sbuf_pool("p", 1);
        let t = nc.tile(pool, Dtype::F32, &[128, 64])?;
        nc.dma(t, x)
    };
    let chip = Chip::trn2;
    let plain = hash(chip(), |nc| {
        body(nc, 0)?;
        nc.release_pools();
        body(nc, 1)
    });
    let launched = hash(chip(), |nc| nc.spmd(2, body));
    let once = hash(chip(), |nc| body(nc, 0));
    let once_launched = hash(chip(), |nc| nc.spmd(1, body));
    let all = [&plain, &launched, &once, &once_launched];
    for (i, a) in all.iter().enumerate() {
        for b in &all[i + 1..] {
            assert_ne!(a, b);
        }
    }
    assert_eq!(launched, hash(chip(), |nc| nc.spmd(2, body)), "deterministic");
}

#[test]
fn runs_are_deterministic_and_traced_per_core() {
    let run = || {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::TRACE);
        let (x, y, s) = tensors(&mut nc);
        nc.spmd(2, |nc, pid| scale_rows(nc, x, y, s, pid as u64)).unwrap();
        (nc.profile(), nc.trace_json().unwrap())
    };
    let (p, trace) = run();
    assert_eq!((p.clone(), trace.clone()), run());
    let events = trace["traceEvents"].as_array().unwrap();
    let names: Vec<_> = events
        .iter()
        .filter(|e| e["name"] == "process_name")
        .map(|e| (e["pid"].as_u64().unwrap(), e["args"]["name"].as_str().unwrap().to_string()))
        .collect();
    assert_eq!(names, [(1, "NeuronCore 0 (trn2)".into()), (2, "NeuronCore 1 (trn2)".into())]);
    for pid in [1, 2] {
        // Each core: 2 VectorE instructions, 3 DMAs of 16 chunks (one per engine, §1.7).
        let slices = events.iter().filter(|e| e["ph"] == "X" && e["pid"] == pid).count();
        assert_eq!(slices, 2 + 3 * 16, "core {pid}");
    }
    let end = events
        .iter()
        .filter(|e| e["ph"] == "X")
        .map(|e| e["ts"].as_f64().unwrap() + e["dur"].as_f64().unwrap())
        .fold(0.0, f64::max);
    assert!((end - p.kernel_time_us).abs() < 1e-6, "{end} vs {}", p.kernel_time_us);
}

#[test]
fn the_caller_continues_after_the_launch_ends() {
    // Before the launch, a kernel on the caller's core; after it, a store of what the
    // programs wrote: it starts when the later program has ended.
    let mut nc = Nc::new(Chip::trn2(), ExecMode::BOTH);
    nc.count_lower_bound_work();
    let (x, y, s) = tensors(&mut nc);
    vector_half(&mut nc, 4).unwrap();
    let before = nc.profile().kernel_time_us;
    nc.spmd(2, |nc, pid| {
        if pid == 1 {
            vector_half(nc, 20)?;
        }
        scale_rows(nc, x, y, s, pid as u64)
    })
    .unwrap();
    let launch = nc.profile().kernel_time_us;
    assert!(launch > before);
    let pool = nc.sbuf_pool("after", 1);
    let t = nc.tile(pool, Dtype::F32, &[128, 512]).unwrap();
    nc.dma(t, y.rows(128..256)).unwrap();
    let p = nc.profile();
    // At least the DMA's fixed latency (1.3 µs, §1.7) after the launch's end.
    assert!(p.kernel_time_us >= launch + 1.3, "{} vs {launch}", p.kernel_time_us);
    assert!(p.kernel_time_us >= nc.lower_bound().us());
    assert!(nc.lower_bound().engine_us > before, "the bound adds the phases");
    let x1 = nc.read_hbm(x).unwrap()[128 * 512];
    assert_eq!(nc.read_hbm(y).unwrap()[128 * 512], x1 * 2.0 + 1.0);
}

#[test]
fn a_program_starts_when_the_callers_work_has_ended_even_on_tensors_it_makes() {
    // The caller's VectorE work ends at `before`; program 1 copies between two HBM tensors
    // it makes itself: the copy still starts no sooner, and ends at least its fixed DMA
    // latency (1.3 µs, §1.7) after.
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    vector_half(&mut nc, 4).unwrap();
    let before = nc.profile().kernel_time_us;
    nc.spmd(2, |nc, pid| {
        if pid == 1 {
            let a = nc.hbm("a", Dtype::F32, &[128, 64])?;
            let b = nc.hbm("b", Dtype::F32, &[128, 64])?;
            nc.dma(b, a)?;
        }
        Ok(())
    })
    .unwrap();
    assert!(nc.profile().kernel_time_us >= before + 1.3, "{}", nc.profile().kernel_time_us);
}

#[test]
fn indirect_copies_are_checked_row_by_row_across_programs() {
    // Program 0 scatters into rows 3 and 7 of a table, program 1 gathers rows 9 and 7 (and,
    // in the accepted run, 9 and 8): the rows the indices reach are what is compared.
    let run = |gathered: [f32; 2]| -> SimResult<Nc> {
        let mut nc = Nc::new(Chip::trn2(), ExecMode::FUNCTIONAL);
        let vals: Vec<f32> = (0..16 * 4).map(|i| i as f32).collect();
        let table = nc.hbm_input("table", Dtype::F32, &[16, 4], &vals)?;
        let scatter_idx = nc.hbm_input("si", Dtype::I32, &[2, 1], &[3.0, 7.0])?;
        let gather_idx = nc.hbm_input("gi", Dtype::I32, &[2, 1], &gathered)?;
        nc.spmd(2, |nc, pid| {
            let pool = nc.sbuf_pool("sb", 1);
            let it = nc.tile(pool, Dtype::I32, &[2, 1])?;
            let rows = nc.tile(pool, Dtype::F32, &[2, 4])?;
            if pid == 0 {
                nc.dma(it, scatter_idx)?;
                nc.memset(rows, -1.0)?;
                nc.dma_scatter(table.view(), rows, it)
            } else {
                nc.dma(it, gather_idx)?;
                nc.dma_gather(rows, table.view(), it)
            }
        })?;
        Ok(nc)
    };
    let e = run([9.0, 7.0]).err().expect("row 7 is written by one program, read by the other");
    let c = conflict(&e);
    assert_eq!((c.hazard, c.tensor.as_str(), c.row, c.element), (Hazard::Raw, "table", 7, 0));
    assert_eq!((e.instruction, c.earlier_instruction), ("dma_copy", "dma_copy"));
    assert!(e.loc.line > c.earlier_loc.line, "the gather's line is after the scatter's");
    run([9.0, 8.0]).unwrap();
}
