//! The `cargo neuron-tune` subcommand (being built under issue 4; see ARCHITECTURE.md).

fn main() {
    eprintln!("cargo-neuron-tune: the CLI is not built yet (issue 4)");
    std::process::exit(2);
}
