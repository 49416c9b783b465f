//! Every built-in strategy: valid only, never twice, exhaustive, and deterministic per seed
//! (batched or not).

use std::collections::HashSet;

use neuron_tune_search::{
    builtin, run, Budget, Config, Ctx, Level, Outcome, Space, Stop, Strategy, BUILTIN,
};
use proptest::prelude::*;

fn space() -> Space {
    let ints = |v: &[i64]| v.iter().map(|&i| Level::Int(i)).collect::<Vec<_>>();
    Space::from_levels([
        ("x", ints(&[1, 2, 4, 8, 16])),
        ("y", ints(&[0, 1, 2, 3])),
        ("mode", vec![Level::Str("a".into()), Level::Str("b".into()), Level::Str("c".into())]),
        ("flag", vec![Level::Bool(false), Level::Bool(true)]),
    ])
    .unwrap()
}

/// A constraint: x * (y + 1) <= 16.
fn valid(c: &Config) -> bool {
    let x = [1, 2, 4, 8, 16][c.0[0] as usize];
    x * (c.0[1] + 1) <= 16
}

/// A smooth objective with an interaction and a categorical effect.
fn value(c: &Config) -> f64 {
    let x = c.0[0] as f64;
    let y = c.0[1] as f64;
    1.0 + (x - 2.0).powi(2) + (y - 1.0).powi(2) + [0.5, 0.0, 1.0][c.0[2] as usize] + c.0[3] as f64
}

fn outcome(c: &Config) -> Outcome {
    // Some valid-looking configurations fail at "run time".
    if c.0[2] == 2 && c.0[3] == 1 {
        Outcome::Invalid
    } else {
        Outcome::Value(value(c))
    }
}

/// Ask `batch` at a time, then tell in order, until `n` or exhaustion.
fn drive(s: &mut dyn Strategy, space: &Space, n: usize, batch: usize) -> Vec<Config> {
    let mut oracle = valid;
    let mut out = Vec::new();
    while out.len() < n {
        let mut asked = Vec::new();
        for _ in 0..batch {
            match s.ask(&mut Ctx::new(space, &mut oracle)).unwrap() {
                Some(c) => asked.push(c),
                None => break,
            }
        }
        if asked.is_empty() {
            break;
        }
        for c in &asked {
            s.tell(c, outcome(c));
        }
        out.extend(asked);
    }
    out
}

#[test]
fn every_strategy_proposes_each_valid_configuration_exactly_once() {
    let space = space();
    let n_valid = space.iter().filter(valid).count();
    for name in BUILTIN {
        let mut s = builtin(name, 7).unwrap();
        let all = drive(s.as_mut(), &space, usize::MAX, 3);
        assert!(all.iter().all(valid), "{name} proposed an invalid configuration");
        let distinct: HashSet<_> = all.iter().collect();
        assert_eq!(distinct.len(), all.len(), "{name} proposed a configuration twice");
        assert_eq!(all.len(), n_valid, "{name} did not exhaust the valid space");
        let mut oracle = valid;
        assert_eq!(
            s.ask(&mut Ctx::new(&space, &mut oracle)).unwrap(),
            None,
            "{name} after exhaustion"
        );
    }
}

#[test]
fn grid_walks_in_index_order() {
    let space = space();
    let mut g = builtin("grid", 0).unwrap();
    let all = drive(g.as_mut(), &space, usize::MAX, 1);
    let expected: Vec<Config> = space.iter().filter(valid).collect();
    assert_eq!(all, expected);
}

#[test]
fn same_seed_same_proposals_batched_or_not() {
    let space = space();
    for name in BUILTIN {
        for batch in [1, 4] {
            let a = drive(builtin(name, 11).unwrap().as_mut(), &space, 40, batch);
            let b = drive(builtin(name, 11).unwrap().as_mut(), &space, 40, batch);
            assert_eq!(a, b, "{name} with batch {batch} is not deterministic");
        }
        if name != "grid" {
            let a = drive(builtin(name, 1).unwrap().as_mut(), &space, 40, 1);
            let b = drive(builtin(name, 2).unwrap().as_mut(), &space, 40, 1);
            assert_ne!(a, b, "{name}: different seeds gave the same proposals");
        }
    }
}

#[test]
fn model_based_strategies_find_the_optimum_of_a_smooth_function() {
    let space = space();
    let opt = space.iter().filter(valid).map(|c| value(&c)).fold(f64::INFINITY, f64::min);
    for name in ["default", "bayes", "anneal", "genetic"] {
        let mut found = 0;
        for seed in 0..10 {
            let mut s = builtin(name, seed).unwrap();
            let mut oracle = valid;
            let mut eval = outcome;
            let r = run(s.as_mut(), &space, &mut oracle, &mut eval, Budget::evaluations(40), None)
                .unwrap();
            if r.best.unwrap().1 == opt {
                found += 1;
            }
        }
        assert!(
            found >= 7,
            "{name} found the optimum of 1 in ~60 valid in 40 evals only {found}/10 times"
        );
    }
}

#[test]
fn driver_stops_early_and_on_exhaustion() {
    let space = space();
    let mut oracle = valid;
    // A constant objective never improves after the first evaluation.
    let mut flat = |_: &Config| Outcome::Value(1.0);
    let mut s = builtin("random", 3).unwrap();
    let r = run(s.as_mut(), &space, &mut oracle, &mut flat, Budget::default(), Some(5)).unwrap();
    assert_eq!(r.stop, Stop::EarlyStop);
    assert_eq!(r.history.len(), 6);
    assert_eq!(r.best_so_far, vec![Some(1.0); 6]);
    let mut s = builtin("grid", 0).unwrap();
    let mut eval = outcome;
    let r = run(s.as_mut(), &space, &mut oracle, &mut eval, Budget::default(), None).unwrap();
    assert_eq!(r.stop, Stop::Exhausted);
    assert_eq!(r.history.len(), space.iter().filter(valid).count());
    // best_so_far is the running minimum.
    let mut best = None::<f64>;
    for (t, b) in r.history.iter().zip(&r.best_so_far) {
        if let Some(v) = t.outcome.value() {
            best = Some(best.map_or(v, |x| x.min(v)));
        }
        assert_eq!(*b, best);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn no_strategy_repeats_or_proposes_invalid(seed in any::<u64>(), which in 0..BUILTIN.len(), batch in 1usize..6) {
        let space = space();
        let mut s = builtin(BUILTIN[which], seed).unwrap();
        let all = drive(s.as_mut(), &space, 30, batch);
        prop_assert!(all.iter().all(valid));
        prop_assert_eq!(all.iter().collect::<HashSet<_>>().len(), all.len());
    }
}
