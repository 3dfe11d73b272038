#!/usr/bin/env bash
# Checks the deployment files in deploy/. CI calls it; so can anyone:
#
#   deploy/check.sh                  # static checks
#   deploy/check.sh metrics.txt      # also: every metric the dashboard and the alert
#                                    # rules use appears in this saved GET /metrics
#
# What runs: promtool check config / check rules / test rules (Debian's
# `prometheus` package is installed when promtool is missing and we are root);
# every JSON and YAML file under deploy/ parses; the dashboard's and the rules'
# metric names are those listed under Metrics in docs/operations.md and every
# panel's PromQL parses; the Dockerfile's build inputs exist; `docker compose
# config` when a compose is installed; `helm lint` / `helm template` when helm is
# installed (or, with HOOKGATE_DEPLOY_CHECK_FULL=1, Helm's Go SDK from PyPI's
# helm-python-sdk, plus kubernetes-validate against the Kubernetes schemas), and
# that deploy/k8s/ is the rendered chart.
#
# Python with PyYAML is needed; without it a venv is made in
# ${TMPDIR:-/tmp}/hookgate-deploy-venv. The last line reads
# `deploy-checks: N passed, M failed, K skipped`; the exit status is 1 if any failed.
set -euo pipefail

deploy=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$deploy/.." && pwd)
metrics_file=${1:-}
if [ -n "$metrics_file" ] && [ ! -r "$metrics_file" ]; then
  echo "deploy/check.sh: cannot read metrics file '$metrics_file'" >&2
  exit 2
fi

passed=0 failed=0 skipped=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# run NAME CMD...: runs a check, shows its output only when it fails.
run() {
  local name=$1; shift
  if "$@" >"$work/out" 2>&1; then
    passed=$((passed + 1)); echo "ok    $name"
  else
    failed=$((failed + 1)); echo "FAIL  $name"; sed 's/^/      /' "$work/out"
  fi
}
skip() { skipped=$((skipped + 1)); echo "skip  $1"; }

# --- tools ---------------------------------------------------------------------
venv=${TMPDIR:-/tmp}/hookgate-deploy-venv
py=python3
if ! python3 -c 'import yaml' 2>/dev/null; then
  if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import yaml' 2>/dev/null; then
    echo "...   creating $venv with PyYAML"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q pyyaml
  fi
  py=$venv/bin/python
fi
if [ "${HOOKGATE_DEPLOY_CHECK_FULL:-}" = 1 ]; then
  if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
  if ! "$venv/bin/python" -c 'import yaml, helm_python, kubernetes_validate' 2>/dev/null; then
    echo "...   installing pyyaml helm-python-sdk kubernetes-validate into $venv"
    "$venv/bin/pip" install -q pyyaml helm-python-sdk kubernetes-validate
  fi
  py=$venv/bin/python
fi

if ! command -v promtool >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "...   installing promtool (Debian package prometheus)"
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus; } \
    >"$work/apt.log" 2>&1 || sed 's/^/      /' "$work/apt.log"
fi

# --- Prometheus ------------------------------------------------------------------
if command -v promtool >/dev/null 2>&1; then
  run "promtool check config prometheus/prometheus.yml" promtool check config "$deploy/prometheus/prometheus.yml"
  run "promtool check rules prometheus/rules/hookgate.rules.yml" promtool check rules "$deploy/prometheus/rules/hookgate.rules.yml"
  run "promtool test rules prometheus/rules/hookgate.rules.test.yml" \
    promtool test rules "$deploy/prometheus/rules/hookgate.rules.test.yml"
else
  failed=$((failed + 1)); echo "FAIL  promtool is missing (apt-get install prometheus)"
fi

# --- every JSON and YAML file parses ---------------------------------------------
parse_all() {
  "$py" - "$deploy" <<'PY'
import json, os, sys, yaml
root = sys.argv[1]; bad = 0; n = 0
for d, dirs, files in os.walk(root):
    # Helm templates are Go templates, not YAML; they are checked by rendering.
    dirs[:] = [x for x in dirs if not (x == "templates" and os.path.exists(os.path.join(d, "Chart.yaml")))]
    for f in sorted(files):
        p = os.path.join(d, f)
        try:
            if f.endswith(".json"):
                json.load(open(p)); n += 1
            elif f.endswith((".yml", ".yaml")):
                list(yaml.safe_load_all(open(p))); n += 1
        except Exception as e:
            bad += 1; print(f"{os.path.relpath(p, root)}: {e}")
print(f"{n} files parsed")
sys.exit(1 if bad else 0)
PY
}
run "every JSON and YAML file under deploy/ parses" parse_all

# --- metric names and PromQL of the dashboard and the rules ------------------------
# Prints "name<TAB>where" for every hookgate_* metric used (suffixes of histogram
# series stripped), checks them against the metrics listed in docs/operations.md,
# and writes each panel's PromQL as a recording rule so that promtool can parse it.
metric_names() {
  "$py" - "$deploy" "$work" <<'PY'
import json, os, re, sys, yaml
deploy, work = sys.argv[1], sys.argv[2]
DOCUMENTED = {  # the metrics table of docs/operations.md
    "hookgate_ingress_requests_total", "hookgate_ingress_duplicates_total",
    "hookgate_ingress_request_duration_seconds", "hookgate_messages_created_total",
    "hookgate_delivery_attempts_total", "hookgate_delivery_duration_seconds",
    "hookgate_delivery_lag_seconds", "hookgate_deliveries_pending",
    "hookgate_deliveries_failed_total", "hookgate_endpoints_disabled_total",
    "hookgate_redis_errors_total", "hookgate_db_pool_connections", "hookgate_http_requests_total",
    "hookgate_partition_maintenance_errors_total", "hookgate_partitions_ahead_seconds",
    "hookgate_quota_rejections_total", "hookgate_destination_publishes_total",
    "hookgate_sink_horizon_age_seconds", "hookgate_own_servers_unresolved", "hookgate_audit_failures_total",
    "hookgate_replica_lag_seconds", "hookgate_replica_in_use",
}
def names(expr):
    return {re.sub(r"_(bucket|sum|count)$", "", m) for m in re.findall(r"\bhookgate_[a-z0-9_]+", expr)}
used, records, problems = {}, [], []
for dash in sorted(f for f in os.listdir(os.path.join(deploy, "grafana")) if f.endswith(".json")):
    d = json.load(open(os.path.join(deploy, "grafana", dash)))
    ids = []
    def walk(panels):
        for p in panels:
            ids.append(p.get("id"))
            if p.get("type") != "row":
                ds = (p.get("datasource") or {}).get("uid", "")
                if not ds.startswith("$"):
                    problems.append(f"{dash}: panel '{p.get('title')}' has a fixed data source {ds!r}, not a variable")
                if not p.get("targets"):
                    problems.append(f"{dash}: panel '{p.get('title')}' has no query")
            for t in p.get("targets", []):
                e = t.get("expr", "")
                for n in names(e):
                    used.setdefault(n, set()).add(f"{dash}: {p.get('title')}")
                promql = re.sub(r"\$__rate_interval|\$__interval|\$__range", "5m", e)
                promql = re.sub(r"\$\{?\w+\}?", ".*", promql)
                records.append({"record": f"panel:{len(records)}", "expr": promql})
            walk(p.get("panels", []))
    walk(d.get("panels", []))
    if len(ids) != len(set(ids)):
        problems.append(f"{dash}: panel ids are not unique")
rules = yaml.safe_load(open(os.path.join(deploy, "prometheus", "rules", "hookgate.rules.yml")))
for g in rules["groups"]:
    for r in g["rules"]:
        for n in names(r["expr"]):
            used.setdefault(n, set()).add(f"alert {r.get('alert') or r.get('record')}")
for n in sorted(set(used) - DOCUMENTED):
    problems.append(f"{n} is not a metric documented in docs/operations.md (used by {', '.join(sorted(used[n]))})")
yaml.safe_dump({"groups": [{"name": "dashboard-panels", "rules": records}]}, open(os.path.join(work, "panels.rules.yml"), "w"))
with open(os.path.join(work, "used-metrics.tsv"), "w") as f:
    for n in sorted(used):
        f.write(f"{n}\t{'; '.join(sorted(used[n]))}\n")
for p in problems:
    print(p)
print(f"{len(used)} metric names, {len(records)} panel queries")
sys.exit(1 if problems else 0)
PY
}
run "dashboard and rules use only documented metric names; panels use the datasource variable" metric_names
if command -v promtool >/dev/null 2>&1 && [ -s "$work/panels.rules.yml" ]; then
  run "every dashboard panel's PromQL parses (promtool)" promtool check rules "$work/panels.rules.yml"
fi

if [ -n "$metrics_file" ]; then
  metrics_present() {
    "$py" - "$work/used-metrics.tsv" "$metrics_file" <<'PY'
import re, sys
used = [l.rstrip("\n").split("\t") for l in open(sys.argv[1]) if l.strip()]
have = set()
for line in open(sys.argv[2], errors="replace"):
    m = re.match(r"#\s*(?:TYPE|HELP)\s+([a-zA-Z_:][a-zA-Z0-9_:]*)", line) or re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)[{ ]", line)
    if m:
        have.add(m.group(1))
# Series that exist only with an optional part configured: one per read replica
# (HOOKGATE_DATABASE_REPLICA_URL), none without.
OPTIONAL = {"hookgate_replica_lag_seconds", "hookgate_replica_in_use"}
missing = [(n, w) for n, w in used if not ({n, n + "_bucket", n + "_sum", n + "_count"} & have) and n not in OPTIONAL]
for n in sorted(OPTIONAL - have):
    print(f"optional: {n}  (only with a read replica configured)")
for n, w in missing:
    print(f"missing: {n}  (used by {w})")
if missing:
    print("Note: a labelled metric appears in /metrics only once it has been observed,")
    print("so save the file from an instance that has served traffic of every kind.")
print(f"{len(used) - len(missing)} of {len(used)} metrics present or optional in {sys.argv[2]}")
sys.exit(1 if missing else 0)
PY
  }
  run "every metric used by the dashboard and the rules is in $metrics_file" metrics_present
fi

# --- Dockerfile ------------------------------------------------------------------------
dockerfile_inputs() {
  local f=$deploy/Dockerfile ok=0
  grep -q '^FROM rust:1-bookworm AS builder' "$f" || { echo "builder stage is not rust:1-bookworm"; ok=1; }
  grep -q '^FROM debian:bookworm-slim' "$f" || { echo "runtime stage is not debian:bookworm-slim"; ok=1; }
  grep -q 'cargo build --release --locked --bin hookgate' "$f" || { echo "no cargo build of the hookgate binary"; ok=1; }
  grep -q '^USER 10001' "$f" || { echo "the image does not run as the non-root uid 10001"; ok=1; }
  grep -q '^ENTRYPOINT \["hookgate"\]' "$f" || { echo "ENTRYPOINT is not hookgate"; ok=1; }
  # What the builder copies must exist, and every workspace member must be among it.
  local src
  for src in $(sed -n 's/^COPY \([^-][^ ]*\( [^ ]*\)*\) [^ ]*$/\1/p' "$f"); do
    [ -e "$root/$src" ] || { echo "COPY source $src does not exist"; ok=1; }
  done
  local member
  for member in $(sed -n '/^members/,/]/p' "$root/Cargo.toml" | grep -o '"[^"]*"' | tr -d '"'); do
    grep -Eq "^COPY (.* )?${member%%/*}( |$)" "$f" || { echo "workspace member $member is not copied into the build"; ok=1; }
  done
  return $ok
}
run "Dockerfile: stages, non-root user, build inputs exist" dockerfile_inputs

# --- docker compose --------------------------------------------------------------------
compose_env=(POSTGRES_PASSWORD=check HOOKGATE_ADMIN_TOKEN=check HOOKGATE_MASTER_KEY=check GRAFANA_ADMIN_PASSWORD=check)
compose_missing_secret_refused() {
  # Without the required secrets, `config` must refuse to render.
  ! env -u POSTGRES_PASSWORD -u HOOKGATE_ADMIN_TOKEN -u HOOKGATE_MASTER_KEY -u GRAFANA_ADMIN_PASSWORD \
    "$@" -f "$deploy/docker-compose.yml" config -q
}
if docker compose version >/dev/null 2>&1; then
  run "docker compose config -q" env "${compose_env[@]}" docker compose -f "$deploy/docker-compose.yml" config -q
  run "docker compose config refuses to run without the secrets" compose_missing_secret_refused docker compose
elif command -v docker-compose >/dev/null 2>&1; then
  run "docker-compose config -q" env "${compose_env[@]}" docker-compose -f "$deploy/docker-compose.yml" config -q
  run "docker-compose config refuses to run without the secrets" compose_missing_secret_refused docker-compose
else
  skip "docker compose config (neither the compose plugin nor docker-compose is installed)"
fi

# --- Helm and the plain manifests ----------------------------------------------------------
chart=$deploy/helm/hookgate
if command -v helm >/dev/null 2>&1; then
  run "helm lint" helm lint "$chart" -f "$chart/ci/test-values.yaml"
  run "helm template" helm template hookgate "$chart" -f "$chart/ci/test-values.yaml"
  run "deploy/k8s is the rendered chart" "$py" "$deploy/k8s/generate.py" --check
elif "$py" -c 'import helm_python' 2>/dev/null; then
  helm_sdk() {
    "$py" - "$chart" <<'PY'
import sys, yaml, helm_python as helm
chart = sys.argv[1]
values = yaml.safe_load(open(chart + "/ci/test-values.yaml"))
res = helm.lint(chart, values=values, strict=True)
for m in res.get("messages") or []:
    print(m)
if res.get("errors"):
    sys.exit(1)
with helm.Chart.load(chart) as c:
    out = c.render(values, name="hookgate", is_install=True)
    docs = [d for k, v in out.items() if not k.endswith("NOTES.txt") for d in yaml.safe_load_all(v) if d]
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in docs)
    print("\n".join(kinds))
    want = {"Deployment/hookgate-api", "Deployment/hookgate-ingress", "Deployment/hookgate-worker",
            "Service/hookgate-api", "Service/hookgate-ingress", "ConfigMap/hookgate", "Secret/hookgate",
            "Job/hookgate-migrate", "NetworkPolicy/hookgate"}
    sys.exit(1 if want - set(kinds) else 0)
PY
  }
  run "helm lint and render (Helm Go SDK via helm-python-sdk)" helm_sdk
  run "deploy/k8s is the rendered chart" "$py" "$deploy/k8s/generate.py" --check
else
  skip "helm lint / helm template (no helm; HOOKGATE_DEPLOY_CHECK_FULL=1 uses Helm's SDK from PyPI)"
fi
if "$py" -c 'import kubernetes_validate' 2>/dev/null; then
  run "deploy/k8s manifests match the Kubernetes 1.30 schemas" \
    "$py" -m kubernetes_validate --strict --quiet -k 1.30.0 "$deploy"/k8s/*.yaml "$deploy"/k8s/examples/*.yaml
else
  skip "Kubernetes schema validation (kubernetes-validate not installed; HOOKGATE_DEPLOY_CHECK_FULL=1)"
fi

echo "deploy-checks: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
