/// C[M,N] = A_T[K,M]ᵀ · B[K,N]: K on partitions for both operands, 128-row output tiles,
/// `tile_n` columns per matmul, K tiles accumulated in PSUM.
pub struct __NAME__;

impl Kernel for __NAME__ {
    fn name(&self) -> &str {
        "__name__"
    }
    fn doc(&self) -> &str {
        "C = A_Tᵀ·B, bf16, K accumulated in PSUM"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::int("tile_n", 512, "moving free size (≤ 512)"),
            ParamSpec::int("bufs", 2, "buffers of the operand tiles"),
        ]
    }
    fn validate(&self, p: &Params, s: &Shape, _: &Chip) -> Result<(), String> {
        let tn = p.uint("tile_n")?;
        let (m, k, n) = (s.get("m")?, s.get("k")?, s.get("n")?);
        if tn > 512 || m % 128 != 0 || k % 128 != 0 || n % tn != 0 {
            return Err(format!(
                "m, k must be multiples of 128 and n of tile_n = {tn} (≤ 512)"
            ));
        }
        Ok(())
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![(
            "small".into(),
            Shape::new(&[("m", 256), ("k", 512), ("n", 1024)]),
        )]
    }
    fn small_shapes(&self, p: &Params) -> BoxedStrategy<Shape> {
        let tn = p.uint("tile_n").unwrap_or(512);
        (1u64..=2, 1u64..=3, 1u64..=2)
            .prop_map(move |(a, b, c)| Shape::new(&[("m", 128 * a), ("k", 128 * b), ("n", tn * c)]))
            .boxed()
    }
    fn tensors(&self, s: &Shape) -> Vec<TensorSpec> {
        let (m, k, n) = (s.dim("m"), s.dim("k"), s.dim("n"));
        vec![
            TensorSpec::input("a_t", Dtype::Bf16, &[k, m]),
            TensorSpec::input("b", Dtype::Bf16, &[k, n]),
            TensorSpec::output("c", Dtype::Bf16, &[m, n]),
        ]
    }
    fn run(&self, nc: &mut Nc, p: &Params, s: &Shape, t: &[Hbm]) -> SimResult<()> {
        let (m, k, n, tn) = (s.dim("m"), s.dim("k"), s.dim("n"), p.uint("tile_n")?);
        let ops = nc.sbuf_pool("operands", p.uint("bufs")? as u32);
        let outp = nc.sbuf_pool("out", 2);
        let psum = nc.psum_pool("acc", 2);
        for mi in 0..m / 128 {
            for ni in 0..n / tn {
                let acc = nc.tile(psum, Dtype::F32, &[128, tn])?;
                for ki in 0..k / 128 {
                    let a = nc.tile(ops, Dtype::Bf16, &[128, 128])?;
                    nc.dma(
                        a,
                        t[0].slice(&[ki * 128..(ki + 1) * 128, mi * 128..(mi + 1) * 128]),
                    )?;
                    let b = nc.tile(ops, Dtype::Bf16, &[128, tn])?;
                    nc.dma(
                        b,
                        t[1].slice(&[ki * 128..(ki + 1) * 128, ni * tn..(ni + 1) * tn]),
                    )?;
                    nc.matmul(acc, a, b, ki > 0)?;
                }
                let o = nc.tile(outp, Dtype::Bf16, &[128, tn])?;
                nc.tensor_copy(o, acc)?;
                nc.dma(
                    t[2].slice(&[mi * 128..(mi + 1) * 128, ni * tn..(ni + 1) * tn]),
                    o,
                )?;
            }
        }
        Ok(())
    }
    fn reference(&self, s: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        let (m, k, n) = (
            s.dim("m") as usize,
            s.dim("k") as usize,
            s.dim("n") as usize,
        );
        let mut c = vec![0f32; m * n];
        for r in 0..m {
            for kk in 0..k {
                let a = i[0][kk * m + r];
                for j in 0..n {
                    c[r * n + j] += a * i[1][kk * n + j];
                }
            }
        }
        vec![c]
    }
    fn work(&self, s: &Shape) -> Work {
        let (m, k, n) = (s.dim("m") as f64, s.dim("k") as f64, s.dim("n") as f64);
        Work {
            flops: 2.0 * m * k * n,
            bytes: 2.0 * (m * k + k * n + m * n),
        }
    }
}
