//! `tune --goal`: what a goal is, how its text parses, and the kernel time it asks for.

use neuron_tune_protocol::Work;

/// What `--goal` asks for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Goal {
    /// A speed-up over the default, as a fraction (`20%` → 0.2).
    Speedup(f64),
    /// A kernel time (µs, launch overhead included, like every reported time).
    TimeUs(f64),
    /// The kernel's declared useful FLOPs per reported time, in TFLOP/s.
    Tflops(f64),
    /// The kernel's declared useful bytes per reported time, in GB/s.
    Gbps(f64),
}

impl Goal {
    /// The time the best variant must reach, given the default's time and the shape's
    /// useful work (`None` when the goal needs what is missing or zero).
    pub fn target_us(self, default_us: Option<f64>, work: Option<Work>) -> Option<f64> {
        let per = |amount: f64, rate: f64| (amount > 0.0).then_some(amount / rate * 1e6);
        let t = match self {
            Goal::Speedup(p) => default_us.map(|d| d / (1.0 + p)),
            Goal::TimeUs(t) => Some(t),
            Goal::Tflops(r) => per(work?.flops, r * 1e12),
            Goal::Gbps(r) => per(work?.bytes, r * 1e9),
        };
        // A rate so extreme that the time is 0 or not a number is no goal.
        t.filter(|t| t.is_finite() && *t > 0.0)
    }

    /// A throughput goal: the time it asks for follows from the shape's useful work.
    pub fn needs_work(self) -> bool {
        self.rate().is_some()
    }

    /// A throughput goal's rate and unit.
    pub fn rate(self) -> Option<(f64, &'static str)> {
        match self {
            Goal::Tflops(r) => Some((r, "TFLOP/s")),
            Goal::Gbps(r) => Some((r, "GB/s")),
            _ => None,
        }
    }
}

impl std::fmt::Display for Goal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Goal::Speedup(p) => write!(f, "{}% faster than the default", 100.0 * p),
            Goal::TimeUs(t) => write!(f, "{t} µs"),
            Goal::Tflops(r) => write!(f, "{r} TFLOP/s"),
            Goal::Gbps(r) => write!(f, "{r} GB/s"),
        }
    }
}

/// `20%`, `5ms`, `250us`, `250µs`, `1.5s`, `150TFLOP/s` (`TFLOPS`), `300GB/s` (`GBps`); units
/// in any case except the `B` of bytes (`Gb/s` is gigabits, refused rather than misread).
pub fn parse_goal(text: &str) -> Result<Goal, String> {
    let t = text.trim();
    let expected = || {
        format!(
            "`{text}`: expected a speed-up such as `20%`, a time such as `5ms` or `250us`, or a \
             throughput such as `150TFLOP/s` or `300GB/s`"
        )
    };
    let number = |s: &str| -> Result<f64, String> {
        match s.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v > 0.0 => Ok(v),
            Ok(_) => Err(format!("`{text}`: must be more than 0")),
            Err(_) => Err(expected()),
        }
    };
    if let Some(p) = t.strip_suffix('%') {
        return Ok(Goal::Speedup(number(p)? / 100.0));
    }
    let lower = t.to_lowercase();
    for unit in ["tflop/s", "tflops"] {
        if let Some(v) = lower.strip_suffix(unit) {
            return Ok(Goal::Tflops(number(v)?));
        }
    }
    for unit in ["gB/s", "gBps"] {
        // Lower-cased but for the `B`.
        let at = t.len().saturating_sub(unit.len());
        match t.get(at..) {
            Some(u)
                if at > 0 && u.len() == unit.len() && u.to_lowercase() == unit.to_lowercase() =>
            {
                if u.contains('B') {
                    return Ok(Goal::Gbps(number(&t[..at])?));
                }
                return Err(format!("`{text}`: gigabits per second? Give bytes: `GB/s`"));
            }
            _ => {}
        }
    }
    for (unit, scale) in [("us", 1.0), ("µs", 1.0), ("ms", 1e3), ("s", 1e6)] {
        if let Some(v) = lower.strip_suffix(unit) {
            let us = number(v)? * scale;
            if !us.is_finite() {
                return Err(format!("`{text}`: too long a time"));
            }
            return Ok(Goal::TimeUs(us));
        }
    }
    Err(expected())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goals_parse_as_documented() {
        assert_eq!(parse_goal("20%"), Ok(Goal::Speedup(0.2)));
        assert_eq!(parse_goal("5ms"), Ok(Goal::TimeUs(5000.0)));
        assert_eq!(parse_goal("250us"), Ok(Goal::TimeUs(250.0)));
        assert_eq!(parse_goal("250µs"), Ok(Goal::TimeUs(250.0)));
        assert_eq!(parse_goal("1.5s"), Ok(Goal::TimeUs(1.5e6)));
        for bad in ["", "20", "fast", "-5%", "0ms", "nan%"] {
            assert!(parse_goal(bad).is_err(), "{bad}");
        }
        // 20 % faster than a 120 µs default is 100 µs.
        assert!((Goal::Speedup(0.2).target_us(Some(120.0), None).unwrap() - 100.0).abs() < 1e-9);
        assert_eq!(Goal::Speedup(0.2).target_us(None, None), None);
        assert_eq!(Goal::TimeUs(7.0).target_us(None, None), Some(7.0));
        // Throughputs: the declared work over the rate. 2·10⁹ FLOPs at 100 TFLOP/s take
        // 20 µs; 3·10⁶ bytes at 300 GB/s take 10 µs.
        assert_eq!(parse_goal("100TFLOP/s"), Ok(Goal::Tflops(100.0)));
        assert_eq!(parse_goal("100 tflops"), Ok(Goal::Tflops(100.0)));
        assert_eq!(parse_goal("300GB/s"), Ok(Goal::Gbps(300.0)));
        assert_eq!(parse_goal("300gBps"), Ok(Goal::Gbps(300.0)));
        assert_eq!(parse_goal("5e2GB/s"), Ok(Goal::Gbps(500.0)));
        // Bits are not bytes: refused, not read 8× off.
        for bits in ["300Gb/s", "300gbps"] {
            assert!(parse_goal(bits).unwrap_err().contains("gigabits"), "{bits}");
        }
        // Time units in any case.
        assert_eq!(parse_goal("1.5S"), Ok(Goal::TimeUs(1.5e6)));
        assert_eq!(parse_goal("5MS"), Ok(Goal::TimeUs(5000.0)));
        assert!(parse_goal("1e303s").is_err(), "infinite once scaled");
        assert!(parse_goal("gbps").unwrap_err().contains("expected"), "no number, not bits");
        // A rate whose time underflows to 0 is no goal.
        let huge = Work { flops: 1.0, bytes: 1.0 };
        assert_eq!(Goal::Tflops(1e300).target_us(None, Some(huge)), None);
        assert!(parse_goal("0GB/s").is_err() && parse_goal("TFLOP/s").is_err());
        let work = Work { flops: 2e9, bytes: 3e6 };
        assert!((Goal::Tflops(100.0).target_us(None, Some(work)).unwrap() - 20.0).abs() < 1e-9);
        assert!((Goal::Gbps(300.0).target_us(None, Some(work)).unwrap() - 10.0).abs() < 1e-9);
        // No work known, or none declared: no time to reach.
        assert_eq!(Goal::Gbps(300.0).target_us(Some(5.0), None), None);
        let none = Work { flops: 0.0, bytes: 3e6 };
        assert_eq!(Goal::Tflops(1.0).target_us(None, Some(none)), None);
    }
}
