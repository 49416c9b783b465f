//! Unit tests of `nc/affine.rs`: merging rectangles, and logging accesses to merge later.

use super::*;
use crate::{Chip, Dtype, ExecMode};

/// Each iteration writes its own rows of one HBM tensor and its own columns of one tile:
/// the earlier iterations' accesses merge into one rectangle per source line, so the
/// check's memory does not grow with the trip count.
#[test]
fn disjoint_accesses_of_many_iterations_merge_into_one_rectangle() {
    let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
    let n = 16_000u64;
    let y = nc.hbm("y", Dtype::Bf16, &[n, 4]).unwrap();
    let pool = nc.sbuf_pool("p", 1);
    let wide = nc.tile(pool, Dtype::Bf16, &[1, 4 * n]).unwrap();
    nc.memset(wide, 0.0).unwrap();
    let tids = (nc.hbm[y.id as usize].tid, nc.bufs[wide.view().tile.buf as usize].tid);
    let mut sizes = (0, 0);
    nc.affine_range(0..n, |nc, i| {
        nc.memset(wide.cols(4 * i..4 * i + 4), 1.0)?;
        nc.dma(y.rows(i..i + 1), wide.cols(4 * i..4 * i + 4))?;
        // What a check would see: the log merged (it never holds a full log).
        let level = &mut nc.loops.levels[0];
        for (id, size) in [(tids.0, &mut sizes.0), (tids.1, &mut sizes.1)] {
            level.merge_log(id as usize);
            *size = (*size).max(level.bufs[id as usize].earlier.len());
        }
        Ok(())
    })
    .unwrap();
    assert_eq!(sizes, (1, 2), "y: one store rectangle; wide: one memset, one read");
}

/// Merging the logged accesses late (when a check needs them, or the log is full) finds
/// what merging each access when it came finds: random nested affine loops whose
/// iterations read and write blocks of two tiles and an HBM tensor — mostly their own
/// blocks, some shared with other iterations at one level or all — end with the same
/// error, or none, either way. Logs fill up and are merged part-way (up to 16 × 12
/// iterations of up to 3 accesses per buffer).
#[test]
fn merging_the_log_late_finds_what_merging_at_once_finds() {
    // (operation, block mode of its destination, of its source) per access of the body;
    // operation 0: memset, 1: tile copy, 2: store to HBM, 3: load from HBM.
    type Op = (u64, u64, u64);
    let mut next = crate::test_rng(0x0123_4567_89ab_cdef);
    let (mut errors, mut oks) = (0, 0);
    for case in 0..200 {
        let (outer, inner) = (1 + next(16), 1 + next(12));
        let ops: Vec<Op> = (0..1 + next(3))
            .map(|_| {
                // Block modes: 0 the iteration's own block (index i·inner + j), 1 the
                // inner index's (shared across outer iterations), 2 the outer index's
                // (shared across inner ones), 3 block 0 (shared by all). Mostly own.
                let mode = |next: &mut dyn FnMut(u64) -> u64| {
                    if next(4) > 0 {
                        0
                    } else {
                        next(4)
                    }
                };
                (next(4), mode(&mut next), mode(&mut next))
            })
            .collect();
        let run = |eager: bool| {
            let mut nc = Nc::new(Chip::trn2(), ExecMode::TIMING);
            nc.loops.eager = eager;
            let pool = nc.sbuf_pool("p", 1);
            let blocks = 16 * 12;
            let tiles = [
                nc.tile(pool, Dtype::F32, &[128, 8 * blocks]).unwrap(),
                nc.tile(pool, Dtype::F32, &[128, 8 * blocks]).unwrap(),
            ];
            let h = nc.hbm("h", Dtype::F32, &[blocks, 8 * 128]).unwrap();
            let result = nc.affine_range(0..outer, |nc, i| {
                nc.affine_range(0..inner, |nc, j| {
                    for (n, &(op, dm, sm)) in ops.iter().enumerate() {
                        let block = |mode| match mode {
                            0 => i * inner + j,
                            1 => j,
                            2 => i,
                            _ => 0,
                        };
                        let (d, s) = (block(dm), block(sm));
                        let (td, ts) = (tiles[n % 2], tiles[(n + 1) % 2]);
                        match op {
                            0 => nc.memset(td.cols(8 * d..8 * d + 8), 1.0)?,
                            1 => nc.tensor_copy(
                                td.cols(8 * d..8 * d + 8),
                                ts.cols(8 * s..8 * s + 8),
                            )?,
                            2 => nc.dma(h.rows(d..d + 1), ts.cols(8 * s..8 * s + 8))?,
                            _ => nc.dma(td.cols(8 * d..8 * d + 8), h.rows(s..s + 1))?,
                        }
                    }
                    Ok(())
                })
            });
            result.map_err(|e| e.to_string())
        };
        let (late, at_once) = (run(false), run(true));
        assert_eq!(late, at_once, "case {case}: {outer} x {inner}, {ops:?}");
        if late.is_err() {
            errors += 1;
        } else {
            oks += 1;
        }
    }
    // Both outcomes were exercised.
    assert!(errors >= 20 && oks >= 20, "{errors} errors, {oks} without");
}
