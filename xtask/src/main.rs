//! Repository automation: `cargo xtask ci` (to be filled in).
fn main() {}
