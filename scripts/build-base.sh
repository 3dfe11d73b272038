#!/usr/bin/env bash
# Builds the previous release's `hookgate` (the commit in tests/upgrade-base) for the
# rolling-upgrade test, once per commit, into target/upgrade-base/<commit>/hookgate.
# It builds in this target directory, so the dependencies this release builds are
# shared (only the workspace's own crates are compiled again). Prints the path.
# Exits 3 when the commit is not in this clone (a shallow one), 1 on any other failure.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
base=$(grep -v '^#' tests/upgrade-base | head -1)
out="target/upgrade-base/$base/hookgate"
if [ ! -x "$out" ]; then
  git cat-file -e "$base^{commit}" 2>/dev/null || {
    echo "the previous release's commit $base is not in this clone's history" >&2
    exit 3
  }
  src="target/upgrade-src/$base"
  rm -rf "$src" && mkdir -p "$src"
  git archive "$base" | tar -x -C "$src"
  cargo build -q --manifest-path "$src/Cargo.toml" --target-dir target --bin hookgate
  mkdir -p "$(dirname "$out")"
  cp target/debug/hookgate "$out"
  # This release's build puts its own binary back.
  rm -f target/debug/hookgate
  rm -rf "$src"
fi
echo "$root/$out"
