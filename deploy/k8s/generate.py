#!/usr/bin/env python3
"""Renders deploy/helm/hookgate into the plain manifests of deploy/k8s/.

    python3 deploy/k8s/generate.py            # rewrite deploy/k8s/*.yaml
    python3 deploy/k8s/generate.py --check    # exit 1 if they differ from the chart

The chart is rendered with the `helm` binary when there is one, else with the
helm-python-sdk package (Helm's Go SDK behind ctypes). Needs PyYAML. The output is
normalised (parsed and dumped again), so both renderers give the same files.

The plain manifests read an existing Secret named `hookgate` (see
examples/secret.yaml) and run the migration Job as an ordinary Job: apply it and
wait for it before the Deployments (docs/operations.md).
"""
import os
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.join(HERE, "..", "helm", "hookgate")
RELEASE = "hookgate"
VALUES = {"secret": {"existingSecret": "hookgate"}}
HEADER = "# Generated from deploy/helm/hookgate by deploy/k8s/generate.py: edit the chart, then regenerate.\n"
# Comments the normalised output cannot carry (values.yaml explains them in full).
NOTES = {
    "01-configmap.yaml": (
        "# HOOKGATE_PUBLIC_URL: the address clients reach Hookgate at (https://hooks.example.com), the base of\n"
        "# source and portal URLs; set it. HOOKGATE_TRUSTED_PROXIES: comma-separated CIDRs whose X-Forwarded-Host,\n"
        "# X-Forwarded-Proto and Forwarded headers are believed (empty: none; the Host header and the connection's\n"
        "# scheme are used): set it to your ingress controller's pod network or your load balancer's network,\n"
        "# or set HOOKGATE_PUBLIC_URL, which wins. HOOKGATE_METRICS_LISTEN listens on the pod network for\n"
        "# Prometheus; 04-networkpolicy.yaml admits only Prometheus to it.\n"
    ),
    "04-networkpolicy.yaml": (
        "# The HTTP port stays open to every peer; the metrics port (its labels carry tenant ids) only to pods\n"
        "# labelled app.kubernetes.io/name=prometheus, in any namespace: narrow `from` to your Prometheus\n"
        "# (e.g. add matchLabels kubernetes.io/metadata.name: monitoring to the namespaceSelector). Enforced only\n"
        "# by a network plugin that implements NetworkPolicy. Apply it before the Deployments.\n"
    ),
}


def render():
    """The chart's manifests as parsed documents."""
    if shutil.which("helm"):
        with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
            yaml.safe_dump(VALUES, f)
        try:
            out = subprocess.run(["helm", "template", RELEASE, CHART, "-f", f.name],
                                 check=True, capture_output=True, text=True).stdout
        finally:
            os.unlink(f.name)
        texts = [out]
    else:
        import helm_python as helm  # pip install helm-python-sdk
        with helm.Chart.load(CHART) as chart:
            rendered = chart.render(VALUES, name=RELEASE, is_install=True)
        texts = [v for k, v in sorted(rendered.items()) if not k.endswith("NOTES.txt")]
    return [d for t in texts for d in yaml.safe_load_all(t) if d]


def plain(doc):
    """Drops what only Helm needs: its chart label and the hook annotations."""
    def fix_meta(meta):
        labels = meta.get("labels") or {}
        labels.pop("helm.sh/chart", None)
        if "app.kubernetes.io/managed-by" in labels:
            labels["app.kubernetes.io/managed-by"] = "kubectl"
        ann = meta.get("annotations") or {}
        for k in [k for k in ann if k.startswith("helm.sh/")]:
            del ann[k]
        if "annotations" in meta and not ann:
            del meta["annotations"]
    fix_meta(doc["metadata"])
    tmpl = doc.get("spec", {}).get("template", {})
    if "metadata" in tmpl:
        fix_meta(tmpl["metadata"])
    return doc


def filename(doc):
    kind, name = doc["kind"], doc["metadata"]["name"]
    component = name[len(RELEASE) + 1:] if name.startswith(RELEASE + "-") else ""
    order = {"ConfigMap": "01", "ServiceAccount": "02", "Job": "03", "NetworkPolicy": "04", "Deployment": "10",
             "Service": "20"}
    parts = [order.get(kind, "50"), kind.lower()] + ([component] if component else [])
    return "-".join(parts) + ".yaml"


def files():
    out = {}
    for doc in render():
        doc = plain(doc)
        name = filename(doc)
        out[name] = HEADER + NOTES.get(name, "") + yaml.safe_dump(doc, sort_keys=False, default_flow_style=False)
    return out


def main():
    want = files()
    have = {f: open(os.path.join(HERE, f)).read() for f in os.listdir(HERE) if f.endswith(".yaml")}
    if "--check" in sys.argv:
        drift = sorted(f for f in set(want) | set(have) if want.get(f) != have.get(f))
        for f in drift:
            print(f"deploy/k8s/{f} differs from the rendered chart", file=sys.stderr)
        sys.exit(1 if drift else 0)
    for f in set(have) - set(want):
        os.unlink(os.path.join(HERE, f))
    for f, text in want.items():
        with open(os.path.join(HERE, f), "w") as fh:
            fh.write(text)
    print("\n".join(sorted(want)))


if __name__ == "__main__":
    main()
