#!/usr/bin/env bash
# Every check a change must pass: formatting, lints, then all tests (unit, integration, docs).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The plugin tests run the distributor binary of examples/custom-agent, which
# `cargo test` does not build for another package's tests.
cargo build --workspace --bins --locked
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --locked
cargo test --workspace --locked
