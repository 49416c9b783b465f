/// y = x · 2 + 1, element-wise (one fused VectorE instruction per tile); rows on partitions,
/// columns in tiles. Change the constants (and the reference) to your own element-wise op.
pub struct __NAME__;

impl Kernel for __NAME__ {
    fn name(&self) -> &str {
        "__name__"
    }
    fn doc(&self) -> &str {
        "y = x·2 + 1 element-wise"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![
            ParamSpec::int("bufs", 2, "buffers"),
            ParamSpec::int("cols_per_tile", 512, "columns per tile"),
        ]
    }
    fn validate(&self, p: &Params, _: &Shape, chip: &Chip) -> Result<(), String> {
        let (b, c) = (p.uint("bufs")?, p.uint("cols_per_tile")?);
        let sbuf = chip.memory.sbuf_bytes_per_partition;
        if b * c * 2 > sbuf {
            return Err(format!("bufs x cols_per_tile = {} bf16 elements per partition do not fit {}'s {sbuf} bytes of SBUF", b * c, chip.name));
        }
        Ok(())
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![("small".into(), Shape::new(&[("rows", 256), ("cols", 1024)]))]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        (1u64..300, 1u64..1100)
            .prop_map(|(r, c)| Shape::new(&[("rows", r), ("cols", c)]))
            .boxed()
    }
    fn tensors(&self, s: &Shape) -> Vec<TensorSpec> {
        let d = [s.dim("rows"), s.dim("cols")];
        vec![
            TensorSpec::input("x", Dtype::Bf16, &d),
            TensorSpec::output("y", Dtype::Bf16, &d),
        ]
    }
    fn run(&self, nc: &mut Nc, p: &Params, s: &Shape, t: &[Hbm]) -> SimResult<()> {
        let (rows, cols, cw) = (s.dim("rows"), s.dim("cols"), p.uint("cols_per_tile")?);
        let pool = nc.sbuf_pool("io", p.uint("bufs")? as u32);
        let mut r = 0;
        while r < rows {
            let pr = (rows - r).min(128);
            let mut c = 0;
            while c < cols {
                let w = (cols - c).min(cw);
                let tile = nc.tile(pool, Dtype::Bf16, &[128, cw])?;
                let v = tile.parts(0..pr as u32).cols(0..w);
                nc.dma(v, t[0].slice(&[r..r + pr, c..c + w]))?;
                nc.tensor_scalar(
                    v,
                    v,
                    (Alu::Multiply, Scalar::Imm(2.0)),
                    Some((Alu::Add, Scalar::Imm(1.0))),
                )?;
                nc.dma(t[1].slice(&[r..r + pr, c..c + w]), v)?;
                c += w;
            }
            r += pr;
        }
        Ok(())
    }
    fn reference(&self, _: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        vec![i[0].iter().map(|x| x * 2.0 + 1.0).collect()]
    }
    fn work(&self, s: &Shape) -> Work {
        let n = (s.dim("rows") * s.dim("cols")) as f64;
        Work {
            flops: 2.0 * n,
            bytes: 4.0 * n,
        }
    }
}
