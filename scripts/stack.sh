#!/usr/bin/env bash
# Starts or stops a local Postgres and Redis on loopback for `make run` or `make test`.
#   scripts/stack.sh up|down|env|pgbin run|test|bench
# `run` keeps its data under .data/ across runs; `test` and `bench` start fresh each time.
set -euo pipefail

cmd=${1:?usage: stack.sh up|down|env run|test|bench}
profile=${2:?usage: stack.sh up|down|env run|test|bench}
root=$(cd "$(dirname "$0")/.." && pwd)

# Ports below Linux's ephemeral range (32768-60999): a busy test run's outgoing
# connections can hold any port in that range and make a later bind fail.
case "$profile" in
  run)  pg_port=${HOOKGATE_PG_PORT:-15432}; redis_port=${HOOKGATE_REDIS_PORT:-16379}; dir="$root/.data" ;;
  test) pg_port=${HOOKGATE_TEST_PG_PORT:-15433}; redis_port=${HOOKGATE_TEST_REDIS_PORT:-16380}; dir="$root/target/test-stack" ;;
  bench) pg_port=${HOOKGATE_BENCH_PG_PORT:-15434}; redis_port=${HOOKGATE_BENCH_REDIS_PORT:-16381}; dir="$root/target/bench-stack" ;;
  *) echo "stack.sh: unknown profile '$profile' (run, test or bench)" >&2; exit 2 ;;
esac

# Postgres refuses to run as root: run its binaries as the `postgres` user then.
as_pg() {
  if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi
}

# The `postgres` user must be able to reach the data folder; under a private home
# (e.g. /root) it cannot, so the cluster goes to /tmp instead.
pg_dir() {
  local d="$dir/pg"
  if [ "$(id -u)" = 0 ] && ! runuser -u postgres -- test -x "$dir/.." 2>/dev/null; then
    d="/tmp/hookgate-$profile-$pg_port/pg"
  fi
  echo "$d"
}

need() {
  command -v "$1" >/dev/null 2>&1 && return 0
  if { [ "$1" = redis-server ] || [ "$1" = rabbitmq-server ]; } && [ "$(id -u)" = 0 ]; then
    echo "installing $1 (apt-get)…" >&2
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1") >&2
    command -v "$1" >/dev/null 2>&1 && return 0
  fi
  echo "stack.sh: '$1' is not installed; $2" >&2
  exit 1
}

# PostgreSQL's server binaries: on PATH, else the versioned directory Debian's and
# Ubuntu's `postgresql` package puts them in (/usr/lib/postgresql/<version>/bin,
# off PATH), else (`up` only) installed with apt-get when we are root. The directory found is
# put first on PATH for this script (`stack.sh pgbin` prints it for others).
pg_bin_dir() {
  local found
  if found=$(command -v initdb 2>/dev/null); then dirname "$found"; return 0; fi
  # Only directories with a server in them: a client-only package makes one too.
  # The newest one, unless a cluster of this profile was made by another version.
  local d want=""
  [ -f "$(pg_dir)/PG_VERSION" ] && want=$(cat "$(pg_dir)/PG_VERSION")
  if [ -n "$want" ] && [ -x "/usr/lib/postgresql/$want/bin/initdb" ]; then echo "/usr/lib/postgresql/$want/bin"; return 0; fi
  found=""
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
    [ -x "$d/initdb" ] && found=$d
  done
  if [ -n "$found" ]; then echo "$found"; return 0; fi
  return 1
}

ensure_pg() {
  local d
  if d=$(pg_bin_dir); then
    case ":$PATH:" in *":$d:"*) ;; *) [ "${1:-}" = quiet ] || echo "using PostgreSQL from $d" >&2 ;; esac
    export PATH="$d:$PATH"
    return 0
  fi
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "PostgreSQL is not installed: installing it with apt-get (package postgresql, no cluster of its own)…" >&2
    # Hookgate runs its own cluster on its own port: the package's default one is not wanted.
    # A drop-in (read after createcluster.conf, so it holds even where that file exists).
    mkdir -p /etc/postgresql-common/createcluster.d
    echo "create_main_cluster = false" > /etc/postgresql-common/createcluster.d/hookgate.conf
    (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      -o Dpkg::Options::=--force-confold postgresql) >&2
    if d=$(pg_bin_dir); then
      echo "installed; using PostgreSQL from $d" >&2
      export PATH="$d:$PATH"
      return 0
    fi
  fi
  echo "stack.sh: PostgreSQL server binaries (initdb, pg_ctl, postgres) not found;" \
    "install PostgreSQL 15 or later (apt-get install postgresql) or put its bin directory on PATH" >&2
  exit 1
}

database_url="postgres://hookgate@127.0.0.1:$pg_port/hookgate"
redis_url="redis://127.0.0.1:$redis_port/"

up() {
  ensure_pg
  need redis-server "run: apt-get install -y redis-server"
  # The destination tests start a private RabbitMQ node of their own (tests/python/brokers.py).
  [ "$profile" = test ] && PATH="$PATH:/usr/sbin" need rabbitmq-server "run: apt-get install -y rabbitmq-server"
  mkdir -p "$dir"
  local pgd; pgd=$(pg_dir)
  if [ "$profile" != run ]; then
    down >/dev/null 2>&1 || true
    rm -rf "$pgd" "$dir/redis"
  fi
  mkdir -p "$(dirname "$pgd")" "$dir/redis"
  [ "$(id -u)" = 0 ] && chown postgres: "$(dirname "$pgd")"
  if [ ! -f "$pgd/PG_VERSION" ]; then
    as_pg initdb -D "$pgd" -U hookgate --auth=trust -E UTF8 --no-locale >/dev/null
  fi
  if ! as_pg pg_ctl -D "$pgd" status >/dev/null 2>&1; then
    local opts="-c listen_addresses=127.0.0.1 -p $pg_port -k $(dirname "$pgd") -c max_connections=400"
    [ "$profile" = test ] && opts="$opts -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
    # Each test database is cloned from a template through the WAL (about 12 MB each):
    # a small WAL ceiling recycles it instead of keeping a gigabyte of it on disk.
    [ "$profile" = test ] && opts="$opts -c max_wal_size=128MB -c min_wal_size=32MB"
    # Benchmarks run the settings recommended for production (deploy/postgres.conf):
    # durable (fsync, synchronous commit), so the baseline and Hookgate pay the same
    # commit cost.
    if [ "$profile" = bench ]; then
      opts="$opts $(sed -e 's/#.*//' -e '/^[[:space:]]*$/d' -e 's/[[:space:]]*=[[:space:]]*/=/' \
        -e 's/^[[:space:]]*/-c /' "$root/deploy/postgres.conf" | tr '\n' ' ')"
    fi
    # Profiling settings of one's own, such as preloading pg_stat_statements.
    [ "$profile" = bench ] && opts="$opts ${HOOKGATE_BENCH_PG_OPTIONS:-}"
    as_pg pg_ctl -D "$pgd" -l "$(dirname "$pgd")/postgres.log" -o "$opts" -w start >/dev/null
  fi
  as_pg psql -h 127.0.0.1 -p "$pg_port" -U hookgate -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = 'hookgate'" | grep -q 1 ||
    as_pg psql -h 127.0.0.1 -p "$pg_port" -U hookgate -d postgres -qc "CREATE DATABASE hookgate" >/dev/null
  if ! redis-cli -p "$redis_port" ping >/dev/null 2>&1; then
    redis-server --port "$redis_port" --bind 127.0.0.1 --daemonize yes --save '' --appendonly no \
      --dir "$dir/redis" --pidfile "$dir/redis/redis.pid" --logfile "$dir/redis/redis.log" >/dev/null
    for _ in $(seq 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  fi
  echo "postgres on 127.0.0.1:$pg_port, redis on 127.0.0.1:$redis_port" >&2
}

down() {
  local pgd; pgd=$(pg_dir)
  # Stopping never installs anything: without PostgreSQL there is nothing to stop.
  if [ -f "$pgd/PG_VERSION" ] && d=$(pg_bin_dir); then
    as_pg "$d/pg_ctl" -D "$pgd" -m fast -w stop >/dev/null 2>&1 || true
  fi
  redis-cli -p "$redis_port" shutdown nosave >/dev/null 2>&1 || true
  echo "stopped postgres :$pg_port and redis :$redis_port" >&2
}

case "$cmd" in
  up) up ;;
  down) down ;;
  env) echo "DATABASE_URL=$database_url"; echo "REDIS_URL=$redis_url" ;;
  # Finds, never installs (tests call it from many processes at once): `up` installs.
  pgbin) pg_bin_dir || { echo "stack.sh: PostgreSQL not found; run scripts/stack.sh up $profile first" >&2; exit 1; } ;;
  *) echo "stack.sh: unknown command '$cmd'" >&2; exit 2 ;;
esac
