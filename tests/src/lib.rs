//! End-to-end tests of the CLI live in `tests/`; this library holds their shared helpers.
