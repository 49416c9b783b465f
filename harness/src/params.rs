//! Typed kernel parameters and named problem shapes.
//!
//! The types live in `neuron-tune-protocol` (the tool reads and writes them too); this module
//! re-exports them for kernel code. A kernel declares its parameters ([`ParamSpec`]); a
//! variant carries concrete values ([`Params`]); a problem size is a [`Shape`].
//!
//! The typed accessors answer `String` errors, so they compose with `?` in a validity rule
//! and in a kernel body (where the error is reported at the line of the `?`):
//!
//! ```
//! # use neuron_tune_harness::{Params, Shape};
//! fn validate(p: &Params, s: &Shape) -> Result<(), String> {
//!     let (block, rows) = (p.uint("block_rows")?, s.get("rows")?);
//!     if rows % block != 0 {
//!         return Err(format!("block_rows = {block} does not divide rows = {rows}"));
//!     }
//!     Ok(())
//! }
//! let p = Params::new().with("block_rows", 3);
//! assert!(validate(&p, &Shape::new(&[("rows", 9)])).is_ok());
//! assert_eq!(
//!     validate(&Params::new(), &Shape::new(&[("rows", 9)])).unwrap_err(),
//!     "parameter `block_rows`: missing"
//! );
//! ```

pub use neuron_tune_protocol::{ParamError, ParamKind, ParamSpec, ParamValue, Params, Shape};

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<ParamSpec> {
        vec![
            ParamSpec::int("bufs", 2, "buffers"),
            ParamSpec::bool("fuse", false, "fuse"),
            ParamSpec::choice("order", &["mn", "nm"], "mn", "loop order"),
        ]
    }

    #[test]
    fn overrides_are_typed_by_spec() {
        let base = Params::defaults(&specs());
        let p = Params::parse_overrides(&base, "bufs=3, order=nm", &specs()).unwrap();
        assert_eq!(p.int("bufs").unwrap(), 3);
        assert_eq!(p.str("order").unwrap(), "nm");
        assert!(!p.bool("fuse").unwrap());
        p.check(&specs()).unwrap();
        let e = Params::parse_overrides(&base, "bufs=x", &specs()).unwrap_err();
        assert_eq!(e.to_string(), "parameter `bufs`: expected an integer, got `x`");
        let e = Params::parse_overrides(&base, "order=km", &specs()).unwrap_err();
        assert!(e.to_string().contains("one of \"mn\", \"nm\""), "{e}");
        let e = Params::parse_overrides(&base, "tile=4", &specs()).unwrap_err();
        assert!(e.to_string().contains("unknown parameter (known: bufs, fuse, order)"), "{e}");
    }

    #[test]
    fn a_parameter_error_in_a_body_names_the_line_of_its_question_mark() {
        fn body(p: &Params) -> neuron_sim::SimResult<i64> {
            Ok(p.int("bufs")?)
        }
        let line = line!() - 2;
        let e = body(&Params::new()).unwrap_err();
        assert_eq!((e.instruction, e.loc.file, e.loc.line), ("kernel", file!(), line));
        assert_eq!(e.kind, neuron_sim::ViolationKind::Invalid("parameter `bufs`: missing".into()));
        assert_eq!(body(&Params::new().with("bufs", 3)).unwrap(), 3);
    }

    #[test]
    fn display_is_stable() {
        let p = Params::defaults(&specs());
        assert_eq!(p.to_string(), "bufs=2,fuse=false,order=mn");
        assert_eq!(Shape::new(&[("n", 2), ("m", 1)]).to_string(), "{m=1, n=2}");
    }
}
