//! `cargo neuron-tune` (also `cargo-neuron-tune neuron-tune …` as cargo invokes it).
fn main() -> std::process::ExitCode {
    cargo_neuron_tune::commands::run(cargo_neuron_tune::cli::Cli::parse_args())
}
