use neuron_sim::{Chip, Dtype, Engine, ExecMode, Nc};
use std::time::Instant;
fn main() {
    for mode in [ExecMode { functional: false, timing: false, trace: false }, ExecMode::TIMING] {
        let t0 = Instant::now();
        let mut nc = Nc::new(Chip::trn2(), mode);
        let (m, k, n) = (4096u64, 4096u64, 4096u64);
        let a_t = nc.hbm_input("aT", Dtype::Bf16, &[k, m], &[]).unwrap();
        let b = nc.hbm_input("b", Dtype::Bf16, &[k, n], &[]).unwrap();
        let c = nc.hbm("c", Dtype::Bf16, &[m, n]).unwrap();
        let kt = k / 128;
        let a_pool = nc.sbuf_pool("a", 2);
        let b_pool = nc.sbuf_pool("b", 2);
        let o_pool = nc.sbuf_pool("out", 2);
        let psum = nc.psum_pool("acc", 2);
        let (mut dmas, mut mms) = (0, 0);
        let mut tdma = std::time::Duration::ZERO;
        for ni in 0..n / 512 {
            let bt = nc.tile(b_pool, Dtype::Bf16, &[128, kt, 512]).unwrap();
            for ki in 0..kt {
                let t = Instant::now();
                nc.dma(bt.at(ki), b.slice(&[ki * 128..(ki + 1) * 128, ni * 512..(ni + 1) * 512]))
                    .unwrap();
                tdma += t.elapsed();
                dmas += 1;
            }
            for mi in 0..m / 128 {
                let at = nc.tile(a_pool, Dtype::Bf16, &[128, kt, 128]).unwrap();
                if std::env::var("PANEL").is_ok() {
                    let t = Instant::now();
                    // One DMA for the whole K panel: [kt*128, 128] viewed as [128, kt, 128].
                    nc.dma(at, a_t.cols(mi * 128..(mi + 1) * 128).split(0, 128).swap(0, 1))
                        .unwrap();
                    tdma += t.elapsed();
                    dmas += 1;
                } else {
                    for ki in 0..kt {
                        let t = Instant::now();
                        nc.dma(
                            at.at(ki),
                            a_t.slice(&[ki * 128..(ki + 1) * 128, mi * 128..(mi + 1) * 128]),
                        )
                        .unwrap();
                        tdma += t.elapsed();
                        dmas += 1;
                    }
                }
                let acc = nc.tile(psum, Dtype::F32, &[128, 512]).unwrap();
                for ki in 0..kt {
                    nc.matmul(acc, at.at(ki), bt.at(ki), ki > 0).unwrap();
                    mms += 1;
                }
                let o = nc.tile(o_pool, Dtype::Bf16, &[128, 512]).unwrap();
                nc.on(Engine::Scalar).tensor_copy(o, acc).unwrap();
                nc.dma(c.slice(&[mi * 128..(mi + 1) * 128, ni * 512..(ni + 1) * 512]), o).unwrap();
            }
        }
        let el = t0.elapsed();
        let p = nc.profile();
        println!("{mode:?}: {} instr ({dmas} dma, {mms} mm) in {:?} = {:.2} M/s; dma time {:?}; kernel {:.1} us", p.instruction_count, el, p.instruction_count as f64 / el.as_secs_f64() / 1e6, tdma, p.kernel_time_us);
    }
}
