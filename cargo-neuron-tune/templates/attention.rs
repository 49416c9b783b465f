/// Single-head attention O = softmax(Q·Kᵀ/√d)·V for S ≤ 512 keys, d ≤ 128: Qᵀ and Kᵀ
/// loaded with transposing access patterns, softmax rows on partitions, P transposed on
/// the PE array for P·V.
pub struct __NAME__;

impl Kernel for __NAME__ {
    fn name(&self) -> &str {
        "__name__"
    }
    fn doc(&self) -> &str {
        "single-head attention, S ≤ 512"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::int("bufs", 2, "buffers")]
    }
    fn validate(&self, _: &Params, s: &Shape, _: &Chip) -> Result<(), String> {
        let (seq, d) = (s.get("seq")?, s.get("head_dim")?);
        if seq % 128 != 0 || seq > 512 || d > 128 {
            return Err(format!(
                "seq = {seq} must be a multiple of 128 up to 512, head_dim ≤ 128"
            ));
        }
        Ok(())
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![(
            "small".into(),
            Shape::new(&[("seq", 512), ("head_dim", 128)]),
        )]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        (1u64..=4, prop::sample::select(vec![32u64, 64, 128]))
            .prop_map(|(s, d)| Shape::new(&[("seq", 128 * s), ("head_dim", d)]))
            .boxed()
    }
    fn tensors(&self, s: &Shape) -> Vec<TensorSpec> {
        let d = [s.dim("seq"), s.dim("head_dim")];
        vec![
            TensorSpec::input("q", Dtype::Bf16, &d),
            TensorSpec::input("k", Dtype::Bf16, &d),
            TensorSpec::input("v", Dtype::Bf16, &d),
            TensorSpec::output("o", Dtype::Bf16, &d),
        ]
    }
    fn run(&self, nc: &mut Nc, p: &Params, sh: &Shape, t: &[Hbm]) -> SimResult<()> {
        let (s, d) = (sh.dim("seq"), sh.dim("head_dim"));
        let pool = nc.sbuf_pool("work", p.uint("bufs")? as u32);
        let stats = nc.sbuf_pool("stats", 2);
        let psum = nc.psum_pool("psum", 2);
        let kt = nc.tile(pool, Dtype::Bf16, &[d, s])?;
        nc.dma(kt, t[1].view().t())?;
        for qi in 0..s / 128 {
            let qt = nc.tile(pool, Dtype::Bf16, &[d, 128])?;
            nc.dma(qt, t[0].rows(qi * 128..(qi + 1) * 128).t())?;
            let sp = nc.tile(psum, Dtype::F32, &[128, s])?;
            nc.matmul(sp, qt, kt, false)?;
            let sc = nc.tile(pool, Dtype::F32, &[128, s])?;
            nc.activation(
                sc,
                sp,
                Act::Copy,
                ActArgs::default().scale(1.0 / (d as f32).sqrt()),
            )?;
            let mx = nc.tile(stats, Dtype::F32, &[128, 1])?;
            nc.tensor_reduce(mx, sc, Alu::Max, true)?;
            let pr = nc.tile(pool, Dtype::Bf16, &[128, s])?;
            let sum = nc.tile(stats, Dtype::F32, &[128, 1])?;
            nc.activation(pr, sc, Act::Exp, ActArgs::default().bias(mx).reduce(sum))?;
            nc.activation(sum, sum, Act::Reciprocal, ActArgs::default())?;
            let acc = nc.tile(psum, Dtype::F32, &[128, d])?;
            for ki in 0..s / 128 {
                let tp = nc.tile(psum, Dtype::Bf16, &[128, 128])?;
                nc.transpose(tp, pr.cols(ki * 128..(ki + 1) * 128))?;
                let pt = nc.tile(pool, Dtype::Bf16, &[128, 128])?;
                nc.tensor_copy(pt, tp)?;
                let vt = nc.tile(pool, Dtype::Bf16, &[128, d])?;
                nc.dma(vt, t[2].rows(ki * 128..(ki + 1) * 128))?;
                nc.matmul(acc, pt, vt, ki > 0)?;
            }
            let o = nc.tile(pool, Dtype::Bf16, &[128, d])?;
            nc.tensor_scalar(o, acc, (Alu::Multiply, Scalar::Col(sum.view())), None)?;
            nc.dma(t[3].rows(qi * 128..(qi + 1) * 128), o)?;
        }
        Ok(())
    }
    fn reference(&self, sh: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        let (s, d) = (sh.dim("seq") as usize, sh.dim("head_dim") as usize);
        let mut o = vec![0f32; s * d];
        for q in 0..s {
            let sc: Vec<f64> = (0..s)
                .map(|k| {
                    (0..d)
                        .map(|c| i[0][q * d + c] as f64 * i[1][k * d + c] as f64)
                        .sum::<f64>()
                        / (d as f64).sqrt()
                })
                .collect();
            let m = sc.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let z: f64 = sc.iter().map(|x| (x - m).exp()).sum();
            for c in 0..d {
                o[q * d + c] = (sc
                    .iter()
                    .enumerate()
                    .map(|(k, x)| (x - m).exp() * i[2][k * d + c] as f64)
                    .sum::<f64>()
                    / z) as f32;
            }
        }
        vec![o]
    }
    fn work(&self, s: &Shape) -> Work {
        let (seq, d) = (s.dim("seq") as f64, s.dim("head_dim") as f64);
        Work {
            flops: 4.0 * seq * seq * d,
            bytes: 8.0 * seq * d,
        }
    }
}
