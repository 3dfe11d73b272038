#!/usr/bin/env bash
# `make run`: local Postgres and Redis, generated secrets kept in .data/secrets.env,
# migrations, then `hookgate serve` in the foreground on 127.0.0.1:8080.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/stack.sh up run
eval "export $(scripts/stack.sh env run | tr '\n' ' ')"
secrets=.data/secrets.env
if [ ! -f "$secrets" ]; then
  umask 077
  {
    echo "HOOKGATE_ADMIN_TOKEN=hgadm_$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')"
    echo "HOOKGATE_MASTER_KEY=$(head -c 32 /dev/urandom | base64)"
  } > "$secrets"
fi
set -a; . "$secrets"; set +a
export HOOKGATE_LISTEN=${HOOKGATE_LISTEN:-127.0.0.1:8080}
export HOOKGATE_METRICS_LISTEN=${HOOKGATE_METRICS_LISTEN:-127.0.0.1:9464}
cargo build -q --bin hookgate
bin=target/debug/hookgate
# One local process, stopped before this runs: a switch migration may go through.
# --contracts: one process, no older release beside it: a database an earlier
# release left with its contracts pending (an upgrade across releases) goes through.
"$bin" migrate --switch --contracts
cat <<MSG

Hookgate is starting on http://$HOOKGATE_LISTEN
  admin token: $HOOKGATE_ADMIN_TOKEN   (kept in $secrets)
  create a tenant:
    curl -s -X POST http://$HOOKGATE_LISTEN/admin/v1/tenant -H 'Authorization: Bearer $HOOKGATE_ADMIN_TOKEN' -H 'Content-Type: application/json' -d '{"name":"Acme"}'
  stop Postgres and Redis afterwards with: make stop

MSG
exec "$bin" serve
