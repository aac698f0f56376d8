#!/usr/bin/env bash
# Rebuild the native core in place after editing native/ (what `pip install -e .` does,
# without reinstalling): a release build, copied to where Python imports it.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --release --features extension-module --manifest-path native/Cargo.toml
# a new file renamed over the old one: a running server keeps the mapping it loaded
cp native/target/release/lib_native.so storage/_native.abi3.so.tmp
mv storage/_native.abi3.so.tmp storage/_native.abi3.so
