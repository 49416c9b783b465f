//! No code. This crate only declares dependencies, so that every build in the repository
//! resolves their features alike and shares their build units; see its `Cargo.toml`.
