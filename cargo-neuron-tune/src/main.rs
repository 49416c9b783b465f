//! `cargo neuron-tune` (also `cargo-neuron-tune neuron-tune …` as cargo invokes it).
fn main() -> std::process::ExitCode {
    cargo_neuron_tune::run::main(cargo_neuron_tune::cli::Cli::parse_args())
}
