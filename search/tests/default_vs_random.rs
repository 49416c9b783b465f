//! A cheap guard for CI: the default strategy beats exact random search on a convolution
//! landscape at 50 evaluations (the full comparison is `cargo xtask bench-search`).

use neuron_tune_search::{baseline, builtin, run, Budget, Landscape};

#[test]
fn default_beats_exact_random_at_50_evaluations() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/landscapes/convolution_milo_A4000.json.gz"
    );
    let l = Landscape::load(path).unwrap();
    let opt = l.optimum().1;
    let seeds = 8;
    let mut sum = 0.0;
    for seed in 0..seeds {
        let mut s = builtin("default", seed).unwrap();
        let mut oracle = l.oracle();
        let mut eval = &l;
        let r = run(s.as_mut(), l.space(), &mut oracle, &mut eval, Budget::evaluations(50), None)
            .unwrap();
        sum += opt / r.best.unwrap().1;
    }
    let default = sum / seeds as f64;
    let random = baseline::expected_fraction_of_optimum(&l.valid_values(), 50).unwrap();
    assert!(default > random, "default {default:.4} vs exact random {random:.4}");
}
