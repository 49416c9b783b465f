/// Row sums: y[r] = Σ_c x[r, c], rows on partitions (VectorE tensor_reduce), fp32 out.
pub struct __NAME__;

impl Kernel for __NAME__ {
    fn name(&self) -> &str {
        "__name__"
    }
    fn doc(&self) -> &str {
        "row sums of a matrix"
    }
    fn params(&self) -> Vec<ParamSpec> {
        vec![ParamSpec::int("bufs", 2, "buffers")]
    }
    fn validate(&self, p: &Params, s: &Shape, chip: &Chip) -> Result<(), String> {
        let (b, c) = (p.uint("bufs")?, s.get("cols")?);
        let sbuf = chip.memory.sbuf_bytes_per_partition;
        if b * (c * 4 + 4) > sbuf {
            return Err(format!(
                "cols = {c} with bufs = {b} does not fit {}'s {sbuf} bytes of SBUF per partition",
                chip.name
            ));
        }
        Ok(())
    }
    fn shapes(&self) -> Vec<(String, Shape)> {
        vec![("small".into(), Shape::new(&[("rows", 512), ("cols", 2048)]))]
    }
    fn small_shapes(&self, _: &Params) -> BoxedStrategy<Shape> {
        (1u64..300, 1u64..3000)
            .prop_map(|(r, c)| Shape::new(&[("rows", r), ("cols", c)]))
            .boxed()
    }
    fn tensors(&self, s: &Shape) -> Vec<TensorSpec> {
        let (r, c) = (s.dim("rows"), s.dim("cols"));
        vec![
            TensorSpec::input("x", Dtype::Bf16, &[r, c]),
            TensorSpec::output("y", Dtype::F32, &[r, 1]),
        ]
    }
    fn run(&self, nc: &mut Nc, p: &Params, s: &Shape, t: &[Hbm]) -> SimResult<()> {
        let (rows, cols) = (s.dim("rows"), s.dim("cols"));
        let io = nc.sbuf_pool("io", p.uint("bufs")? as u32);
        let mut r = 0;
        while r < rows {
            let pr = (rows - r).min(128);
            let x = nc.tile(io, Dtype::F32, &[128, cols])?.parts(0..pr as u32);
            nc.dma(x, t[0].rows(r..r + pr))?;
            let y = nc.tile(io, Dtype::F32, &[128, 1])?.parts(0..pr as u32);
            nc.tensor_reduce(y, x, Alu::Add, false)?;
            nc.dma(t[1].rows(r..r + pr), y)?;
            r += pr;
        }
        Ok(())
    }
    fn reference(&self, s: &Shape, i: &[Vec<f32>]) -> Vec<Vec<f32>> {
        let c = s.dim("cols") as usize;
        vec![i[0]
            .chunks(c)
            .map(|row| row.iter().map(|&v| v as f64).sum::<f64>() as f32)
            .collect()]
    }
    fn work(&self, s: &Shape) -> Work {
        let n = (s.dim("rows") * s.dim("cols")) as f64;
        Work {
            flops: n,
            bytes: 2.0 * n,
        }
    }
}
