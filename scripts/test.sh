#!/usr/bin/env bash
# `make test`: fresh Postgres and Redis on their own ports, then the whole suite.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/stack.sh up test
trap 'scripts/stack.sh down test' EXIT
eval "export $(scripts/stack.sh env test | sed 's/^/HOOKGATE_TEST_/' | tr '\n' ' ')"
cargo build -q --bin hookgate
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast "$@"
else
  cargo test --workspace --no-fail-fast "$@"
fi
