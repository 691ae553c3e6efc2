#!/usr/bin/env bash
# Offline checks of everything under deploy/. Run from the repository root:
#
#   bash deploy/validate.sh
#
# Needs python3 and kubectl (for `kubectl kustomize`); installs kubernetes-validate and PyYAML
# from PyPI into a venv under ${TMPDIR:-/tmp} on first use. The docker compose and systemd checks
# run when their tools are present and are skipped with a note otherwise.
# Environment: K8S_VERSION (schema version, default 1.30.0), VENV (venv path).
set -euo pipefail

on_err() { echo "FAILED: deploy/validate.sh line $1: ${2%%$'\n'*}" >&2; }
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

K8S_VERSION="${K8S_VERSION:-1.30.0}"
VENV="${VENV:-${TMPDIR:-/tmp}/mcp_exporter-validate-venv}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/mcp_exporter-validate.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT

step() { printf '\n==> %s\n' "$*"; }
skip() { printf 'SKIP: %s\n' "$*"; }
die() { echo "FAILED: $*" >&2; exit 1; }

command -v python3 >/dev/null || die "python3 is required"
command -v kubectl >/dev/null || die "kubectl is required (for kubectl kustomize)"

step "python venv with kubernetes-validate and PyYAML ($VENV)"
if [[ ! -x "$VENV/bin/kubernetes-validate" ]] || ! "$VENV/bin/python" -c 'import yaml' 2>/dev/null; then
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate PyYAML
fi
PY="$VENV/bin/python"
"$VENV/bin/kubernetes-validate" --version

step "kubectl kustomize deploy/kubernetes"
kubectl kustomize deploy/kubernetes > "$WORK/all.yaml"
echo "$(grep -c '^kind:' "$WORK/all.yaml") objects"

step "split built-in kinds from CRD kinds"
"$PY" - "$WORK" <<'PY'
import sys, yaml, pathlib
work = pathlib.Path(sys.argv[1])
docs = [d for d in yaml.safe_load_all((work / "all.yaml").read_text()) if d]
builtin = [d for d in docs if d["apiVersion"] != "monitoring.coreos.com/v1"]
crds = [d for d in docs if d["apiVersion"] == "monitoring.coreos.com/v1"]
for i, d in enumerate(builtin):
    (work / f"builtin-{i:02d}-{d['kind']}.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
(work / "crds.yaml").write_text(yaml.safe_dump_all(crds, sort_keys=False))
print("built-in:", ", ".join(f"{d['kind']}/{d['metadata']['name']}" for d in builtin))
print("CRDs:    ", ", ".join(f"{d['kind']}/{d['metadata']['name']}" for d in crds))
want = {"ConfigMap", "Deployment", "Service"}
missing = want - {d["kind"] for d in builtin}
if missing:
    sys.exit(f"kustomize output lacks {sorted(missing)}")
PY

step "kubernetes-validate --strict -k $K8S_VERSION (built-in kinds)"
"$VENV/bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$WORK"/builtin-*.yaml

step "kustomization lists every manifest; Deployment hardening; labels"
"$PY" - "$WORK" <<'PY'
import sys, yaml, pathlib
work = pathlib.Path(sys.argv[1])
kdir = pathlib.Path("deploy/kubernetes")
kust = yaml.safe_load((kdir / "kustomization.yaml").read_text())
files = {p.name for p in kdir.glob("*.yaml")} - {"kustomization.yaml"}
listed = set(kust["resources"])
if files != listed:
    sys.exit(f"kustomization.yaml resources {sorted(listed)} != manifests {sorted(files)}")
errors = []
docs = [d for d in yaml.safe_load_all((work / "all.yaml").read_text()) if d]
for d in docs:
    if d["metadata"].get("labels", {}).get("app.kubernetes.io/name") != "mcp-exporter":
        errors.append(f"{d['kind']}: label app.kubernetes.io/name=mcp-exporter missing")
dep = next(d for d in docs if d["kind"] == "Deployment")
pod = dep["spec"]["template"]["spec"]
c = pod["containers"][0]
sc, psc = c.get("securityContext", {}), pod.get("securityContext", {})
checks = {
    "replicas == 1": dep["spec"].get("replicas") == 1,
    "pod runAsNonRoot": psc.get("runAsNonRoot") is True,
    "pod seccompProfile RuntimeDefault": psc.get("seccompProfile", {}).get("type") == "RuntimeDefault",
    "readOnlyRootFilesystem": sc.get("readOnlyRootFilesystem") is True,
    "allowPrivilegeEscalation false": sc.get("allowPrivilegeEscalation") is False,
    "capabilities drop ALL": sc.get("capabilities", {}).get("drop") == ["ALL"],
    "requests and limits": all(k in c.get("resources", {}).get(s, {})
                               for s in ("requests", "limits") for k in ("cpu", "memory")),
    "liveness /-/healthy": c["livenessProbe"]["httpGet"]["path"] == "/-/healthy",
    "readiness /-/ready": c["readinessProbe"]["httpGet"]["path"] == "/-/ready",
    "port 10117 named metrics": {"name": "metrics", "containerPort": 10117, "protocol": "TCP"} in c["ports"],
    "KB_TOKEN from optional Secret": any(
        e["name"] == "KB_TOKEN" and e["valueFrom"]["secretKeyRef"].get("optional") is True
        for e in c.get("env", [])),
    "config file flag": "--config.file=/etc/mcp_exporter/mcp_exporter.yml" in c.get("args", []),
}
errors += [f"Deployment: {k}" for k, ok in checks.items() if not ok]
# The config volume must come from the ConfigMap that kustomize emits, with the key the flag reads.
cm = next(d for d in docs if d["kind"] == "ConfigMap")
vol = next(v for v in pod["volumes"] if v["name"] == "config")
if vol["configMap"]["name"] != cm["metadata"]["name"]:
    errors.append("Deployment: config volume does not reference the ConfigMap")
conf = yaml.safe_load(cm["data"]["mcp_exporter.yml"])
if not conf.get("targets") or not all("name" in t and "url" in t for t in conf["targets"]):
    errors.append("ConfigMap: mcp_exporter.yml needs targets with name and url")
svc = next(d for d in docs if d["kind"] == "Service")
if not any(p["name"] == "metrics" and p["port"] == 10117 for p in svc["spec"]["ports"]):
    errors.append("Service: port 10117 named metrics missing")
if svc["spec"]["selector"] != dep["spec"]["template"]["metadata"]["labels"]:
    errors.append("Service selector does not match the pod labels")
if errors:
    sys.exit("\n".join(errors))
print("ok:", ", ".join(checks))
PY

step "CRD structure (ServiceMonitor, PrometheusRule) against alerts/mcp_exporter.rules.yml"
"$PY" - "$WORK" <<'PY'
import sys, yaml, pathlib
work = pathlib.Path(sys.argv[1])
crds = [d for d in yaml.safe_load_all((work / "crds.yaml").read_text()) if d]
errors = []
for d in crds:
    for key in ("apiVersion", "kind", "metadata", "spec"):
        if key not in d:
            errors.append(f"{d.get('kind')}: missing {key}")
    if not d.get("metadata", {}).get("name"):
        errors.append(f"{d.get('kind')}: metadata.name missing")
    extra = set(d) - {"apiVersion", "kind", "metadata", "spec"}
    if extra:
        errors.append(f"{d.get('kind')}: unexpected top-level keys {sorted(extra)}")
by_kind = {d["kind"]: d for d in crds}
if set(by_kind) != {"ServiceMonitor", "PrometheusRule"}:
    errors.append(f"expected one ServiceMonitor and one PrometheusRule, got {sorted(by_kind)}")
sm = by_kind.get("ServiceMonitor")
if sm:
    eps = sm["spec"].get("endpoints") or []
    if not any(e.get("port") == "metrics" and e.get("interval") == "30s" for e in eps):
        errors.append("ServiceMonitor: no endpoint with port metrics, interval 30s")
    if sm["spec"].get("selector", {}).get("matchLabels", {}).get("app.kubernetes.io/name") != "mcp-exporter":
        errors.append("ServiceMonitor: selector does not select app.kubernetes.io/name=mcp-exporter")
pr = by_kind.get("PrometheusRule")
if pr:
    groups = pr["spec"].get("groups")
    if not groups:
        errors.append("PrometheusRule: spec.groups is empty")
    rules_file = yaml.safe_load(pathlib.Path("alerts/mcp_exporter.rules.yml").read_text())
    if groups != rules_file["groups"]:
        errors.append("PrometheusRule: spec.groups differ from alerts/mcp_exporter.rules.yml groups "
                      "(run python3 deploy/kubernetes/gen-prometheusrule.py)")
    for g in groups or []:
        for r in g.get("rules", []):
            if not isinstance(r.get("expr"), str) or ("alert" in r) == ("record" in r):
                errors.append(f"PrometheusRule: bad rule in group {g.get('name')}: {r}")
            for k in ("labels", "annotations"):
                if not all(isinstance(v, str) for v in (r.get(k) or {}).values()):
                    errors.append(f"PrometheusRule: non-string {k} in {r.get('alert') or r.get('record')}")
    n = sum(len(g.get("rules", [])) for g in groups or [])
    print(f"PrometheusRule: {len(groups or [])} groups, {n} rules")
if errors:
    sys.exit("\n".join(errors))
print("ok")
PY

step "deploy/kubernetes/prometheusrule.yaml is up to date with alerts/mcp_exporter.rules.yml"
"$PY" deploy/kubernetes/gen-prometheusrule.py --output "$WORK/prometheusrule.yaml"
diff -u deploy/kubernetes/prometheusrule.yaml "$WORK/prometheusrule.yaml" \
  || die "prometheusrule.yaml is stale: run python3 deploy/kubernetes/gen-prometheusrule.py"
echo ok

step "compose files"
"$PY" - <<'PY'
import sys, yaml, pathlib
base = pathlib.Path("deploy/compose")
for f in ["compose.yaml", "prometheus.yml", "grafana/provisioning/datasources/prometheus.yml",
          "grafana/provisioning/dashboards/dashboards.yml"]:
    yaml.safe_load((base / f).read_text())
for p in ["deploy/Dockerfile", "deploy/Dockerfile.dockerignore", "alerts/mcp_exporter.rules.yml", "dashboards"]:
    if not pathlib.Path(p).exists():
        sys.exit(f"compose stack needs {p}")
print("YAML parses; Dockerfile, alerts and dashboards exist")
PY
if docker compose version >/dev/null 2>&1; then
  docker compose -f deploy/compose/compose.yaml config -q && echo "docker compose config: ok"
elif command -v docker-compose >/dev/null; then
  docker-compose -f deploy/compose/compose.yaml config -q && echo "docker-compose config: ok"
else
  skip "neither 'docker compose' nor docker-compose available; compose schema not checked"
fi

step "systemd unit"
if command -v systemd-analyze >/dev/null; then
  unit=deploy/systemd/mcp_exporter.service
  if [[ ! -x /usr/local/bin/mcp_exporter ]]; then
    # verify insists that ExecStart= exists: check a copy that points at a stub.
    printf '#!/bin/sh\n' > "$WORK/mcp_exporter"
    chmod +x "$WORK/mcp_exporter"
    sed "s#/usr/local/bin/mcp_exporter#$WORK/mcp_exporter#g" "$unit" > "$WORK/mcp_exporter.service"
    unit="$WORK/mcp_exporter.service"
    echo "(binary not installed: verifying a copy with ExecStart pointing at a stub)"
  fi
  out="$(systemd-analyze verify "$unit" 2>&1)" || { echo "$out" >&2; die "systemd-analyze verify"; }
  [[ -z "$out" ]] || { echo "$out" >&2; die "systemd-analyze verify printed warnings"; }
  echo "systemd-analyze verify: ok"
  if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
    # --threshold is the exposure level times 10: fail above 2.0 ("OK" is below 3.0).
    sec_rc=0
    sec="$(systemd-analyze security --offline=yes --threshold=20 --no-pager "$unit" 2>&1)" || sec_rc=$?
    echo "$sec" | tail -1
    [[ $sec_rc -eq 0 ]] || { echo "$sec" >&2; die "systemd-analyze security: exposure above 2.0"; }
  fi
else
  skip "systemd-analyze not installed; unit not verified"
fi

printf '\nALL CHECKS PASSED\n'
