//! The benchmark GEMM in its two forms (plain loops and affine loops), shared by the
//! criterion benchmark (`benches/sim.rs`) and the one-shot driver that callgrind counts
//! instructions of (`examples/gemm_once.rs`, docs/scheduling.md §3).

use neuron_sim::{Chip, Dtype, Engine, ExecMode, Hbm, Nc, SimResult};

/// Run `body` over `range` as an `affine_range` loop (`AFFINE`) or in program order.
fn each<const AFFINE: bool>(
    nc: &mut Nc,
    range: std::ops::Range<u64>,
    body: impl FnMut(&mut Nc, u64) -> SimResult<()>,
) -> SimResult<()> {
    if AFFINE {
        nc.affine_range(range, body)
    } else {
        nc.sequential_range(range, body)
    }
}

/// A blocked GEMM C[M,N] = AT[K,M].T @ B[K,N]: per (m, n) block of [128 x 512], K/128
/// matmuls accumulate in PSUM; B tiles are loaded once per n column block and reused for
/// every m; A is loaded as one K panel per m block (`PANEL`) or one DMA per [128 x 128] tile.
/// With `AFFINE` its loops are declared independent, as the NKI tutorials write them: the
/// column blocks, the row blocks and the K tiles are `affine_range` loops (the K loop is the
/// PSUM accumulation NKI allows across iterations), so the timing model list-schedules
/// them; without, each engine runs its instructions in program order. Both forms issue the
/// same instructions in the same order.
pub fn gemm<const PANEL: bool, const AFFINE: bool>(
    nc: &mut Nc,
    a_t: Hbm,
    b: Hbm,
    c: Hbm,
) -> SimResult<()> {
    let (k, m) = a_t.dims2();
    let n = b.dims2().1;
    let kt = k / 128;
    let a_pool = nc.sbuf_pool("a", 2);
    let b_pool = nc.sbuf_pool("b", 2);
    let o_pool = nc.sbuf_pool("out", 2);
    let psum = nc.psum_pool("acc", 2);
    each::<AFFINE>(nc, 0..n / 512, |nc, ni| {
        let bt = nc.tile(b_pool, Dtype::Bf16, &[128, kt, 512])?;
        each::<AFFINE>(nc, 0..kt, |nc, ki| {
            nc.dma(bt.at(ki), b.slice(&[ki * 128..(ki + 1) * 128, ni * 512..(ni + 1) * 512]))
        })?;
        each::<AFFINE>(nc, 0..m / 128, |nc, mi| {
            let at = nc.tile(a_pool, Dtype::Bf16, &[128, kt, 128])?;
            if PANEL {
                // [K, 128] columns of AT viewed as [128 partitions, K/128 tiles, 128].
                nc.dma(at, a_t.cols(mi * 128..(mi + 1) * 128).split(0, 128).swap(0, 1))?;
            } else {
                each::<AFFINE>(nc, 0..kt, |nc, ki| {
                    let rows = ki * 128..(ki + 1) * 128;
                    nc.dma(at.at(ki), a_t.slice(&[rows, mi * 128..(mi + 1) * 128]))
                })?;
            }
            let acc = nc.tile(psum, Dtype::F32, &[128, 512])?;
            each::<AFFINE>(nc, 0..kt, |nc, ki| nc.matmul(acc, at.at(ki), bt.at(ki), ki > 0))?;
            let o = nc.tile(o_pool, Dtype::Bf16, &[128, 512])?;
            nc.on(Engine::Scalar).tensor_copy(o, acc)?;
            nc.dma(c.slice(&[mi * 128..(mi + 1) * 128, ni * 512..(ni + 1) * 512]), o)
        })
    })
}

/// The GEMM M×K×N on trn2 in `mode` (`data`: A transposed and B, or none for timing):
/// its instruction count and kernel time.
pub fn run_gemm<const PANEL: bool, const AFFINE: bool>(
    mode: ExecMode,
    m: u64,
    k: u64,
    n: u64,
    data: Option<(&[f32], &[f32])>,
) -> (u64, f64) {
    let mut nc = Nc::new(Chip::trn2(), mode);
    let (a, b) = data.unwrap_or((&[], &[]));
    let a_t = nc.hbm_input("aT", Dtype::Bf16, &[k, m], a).unwrap();
    let bb = nc.hbm_input("b", Dtype::Bf16, &[k, n], b).unwrap();
    let c = nc.hbm("c", Dtype::Bf16, &[m, n]).unwrap();
    gemm::<PANEL, AFFINE>(&mut nc, a_t, bb, c).unwrap();
    let p = nc.profile();
    (p.instruction_count, p.kernel_time_us)
}
