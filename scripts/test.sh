#!/usr/bin/env bash
# `make test`: fresh Postgres and Redis on their own ports, then the whole suite:
# the Rust tests (unit and end-to-end) and the Python suite that drives Hookgate
# with the official Svix SDK and verifiers.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# A full run from a fresh clone takes about 4 GB of disk (the build and its crates, the Python
# clients, the test databases, each dropped when its test ends). Said up front, as
# a disk that fills mid-run fails whichever test is writing at the time.
free_mb=$(df -Pm . | awk 'NR == 2 { print $4 }')
if [ "${free_mb:-0}" -lt 4096 ]; then
  echo "warning: ${free_mb} MB free here; a full run needs about 4 GB" >&2
fi
trap 'scripts/stack.sh down test' EXIT
scripts/stack.sh up test
# Tests start Postgres clusters of their own: the server binaries go on PATH.
PATH="$(scripts/stack.sh pgbin test):$PATH"
export PATH
eval "export $(scripts/stack.sh env test | sed 's/^/HOOKGATE_TEST_/' | tr '\n' ' ')"

# Python clients in a virtual environment of their own, reused across runs.
venv=target/pyvenv
if [ ! -x "$venv/bin/pytest" ] || ! cmp -s tests/python/requirements.txt "$venv/requirements.txt"; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r tests/python/requirements.txt
  cp tests/python/requirements.txt "$venv/requirements.txt"
fi

# Provider signing code from the providers' own npm packages (Stripe, Octokit).
if [ ! -d tests/node/node_modules ] || [ tests/node/package-lock.json -nt tests/node/node_modules ]; then
  (cd tests/node && npm ci --no-audit --no-fund --silent)
fi

# The previous release, for the rolling-upgrade test; built before this one, whose
# build then puts its own binary back in target/debug.
# Only a clone without that commit (a shallow one) goes on without the test, and says
# so; a build that fails fails the run.
skip=()
base_status=0
base_bin=$(scripts/build-base.sh) || base_status=$?
if [ "$base_status" = 0 ]; then
  export HOOKGATE_BASE_BIN="$base_bin"
elif [ "$base_status" = 3 ]; then
  echo "NOT RUN: the rolling-upgrade test (rolling::), for want of the previous release's commit" >&2
  skip=(-E 'not test(/^rolling::/)')
else
  echo "the previous release (tests/upgrade-base) did not build" >&2
  exit 1
fi
cargo build -q --bin hookgate --bin hookgate-bench
cmp -s target/debug/hookgate "${HOOKGATE_BASE_BIN:-/dev/null}" && { echo "target/debug/hookgate is the base build" >&2; exit 1; }
status=0
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --no-fail-fast ${skip[@]+"${skip[@]}"} "$@" || status=1
else
  if [ ${#skip[@]} -gt 0 ]; then
    cargo test --workspace --no-fail-fast "$@" -- --skip rolling:: || status=1
  else
    cargo test --workspace --no-fail-fast "$@" || status=1
  fi
fi
# One short smoke run of the load generator, so that `make bench` keeps working.
HOOKGATE_BIN=target/debug/hookgate BENCH_SECS=1 BENCH_CONCURRENCY=4 BENCH_DELIVERIES=200 BENCH_PRUNE_ROWS=20000 \
  target/debug/hookgate-bench >target/bench-smoke.txt 2>&1 || { cat target/bench-smoke.txt; status=1; }
# The deployment files: promtool rules tests, parsing, metric names.
deploy/check.sh || status=1
"$venv/bin/pytest" -q tests/python || status=1
exit $status
