#!/usr/bin/env bash
# The status page in a real browser: start the exporter's --demo on a free loopback port, wait until
# /status.json shows the lossy gateway's stale cache (drift naming search_legacy, after the demo's
# first redeploy at 30 s), then load / in headless Debian Chromium and assert that the rendered DOM
# shows search_legacy as stale ("Drift: extra") under kb_lossy_gateway and carries a timeline entry.
# Also takes a screenshot (WORKDIR/status_page.png) for a person to look at.
#
# Usage: .ci/status_page_chromium.sh WORKDIR EXPORTER_BIN
# Installs Debian chromium when missing. Every wait is bounded; every child is killed on exit.
set -euo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 WORKDIR EXPORTER_BIN" >&2
  exit 2
fi
work=$(mkdir -p "$1" && cd "$1" && pwd)/status_page
bin=$2
[ -x "$bin" ] || { echo "exporter binary not executable: $bin" >&2; exit 2; }
rm -rf "$work"
mkdir -p "$work"
started=$(date +%s)

log() { printf '[status_page %3ss] %s\n' "$(($(date +%s) - started))" "$*"; }

pids=()
cleanup() {
  local rc=$?
  for p in "${pids[@]}"; do
    # negative pid: the whole process group (chromium runs in its own session)
    kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 20); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true
  done
  if [ "$rc" -ne 0 ]; then
    echo "---- status page check FAILED (exit $rc); logs in $work" >&2
    for f in "$work"/exporter.log "$work"/chromium-dom.err "$work"/chromium-shot.err; do
      [ -s "$f" ] && { echo "---- tail $f" >&2; tail -40 "$f" >&2; }
    done
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

fail() { echo "FAIL: $*" >&2; exit 1; }

# ---- tools
if ! command -v chromium >/dev/null 2>&1; then
  log "installing Debian chromium"
  timeout 600 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive timeout 900 apt-get install -y --no-install-recommends chromium >/dev/null
fi
command -v python3 >/dev/null 2>&1 || fail "python3 is required"
command -v curl >/dev/null 2>&1 || fail "curl is required"
log "$(chromium --version 2>/dev/null | head -1)"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

# ---- the demo exporter (its own process group so cleanup takes everything)
setsid "$bin" --demo --web.listen-address="127.0.0.1:$port" >"$work/exporter.log" 2>&1 &
pids+=($!)
log "exporter --demo pid ${pids[0]} on $base"

# ---- wait for the stale cache in /status.json (the demo redeploys at 30 s; audits every 10 s)
deadline=$((SECONDS + 120))
ready=""
while [ $SECONDS -lt $deadline ]; do
  kill -0 "${pids[0]}" 2>/dev/null || fail "the exporter exited early"
  if curl -fsS --max-time 5 "$base/status.json" -o "$work/status.json" 2>/dev/null &&
    python3 - "$work/status.json" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
t = next((t for t in doc["targets"] if t["name"] == "kb_lossy_gateway"), None)
ok = t is not None and any("search_legacy" in c["drift"]["extra"] for c in t["connections"])
sys.exit(0 if ok else 1)
EOF
  then
    ready=yes
    break
  fi
  sleep 1
done
[ -n "$ready" ] || fail "within 120 s /status.json never showed kb_lossy_gateway drift extra [search_legacy]"
log "/status.json: kb_lossy_gateway drift extra = [search_legacy]"

# ---- headless Chromium: the rendered DOM, then a screenshot
chromium_run() { # OUT ERR extra-args... ; bounded, own session, fresh profile
  local out=$1 err=$2 profile
  shift 2
  profile=$(mktemp -d "$work/profile.XXXXXX")
  setsid timeout -k 5 60 chromium --headless --no-sandbox --disable-gpu --disable-quic \
    --no-first-run --disable-background-networking --disable-component-update --disable-sync \
    --disable-dev-shm-usage --user-data-dir="$profile" "$@" >"$out" 2>"$err" &
  local p=$!
  pids+=("$p")
  wait "$p"
}

chromium_run "$work/dom.html" "$work/chromium-dom.err" --dump-dom "$base/" ||
  fail "chromium --dump-dom failed"
[ -s "$work/dom.html" ] || fail "chromium produced an empty DOM"
log "rendered DOM: $(wc -c <"$work/dom.html") bytes"

python3 - "$work/dom.html" <<'EOF' || fail "the rendered page lacks the stale tool or the timeline"
import re, sys
dom = open(sys.argv[1], encoding="utf-8").read()
start = dom.find('id="target-kb_lossy_gateway"')
if start < 0:
    sys.exit("no section for kb_lossy_gateway in the DOM")
end = dom.find("<h2", start + 1)
section = dom[start:end if end > 0 else len(dom)]
# the stale tool in the "Drift: extra" row of the lossy target (not just in its probe table)
extra = re.search(r"Drift: extra</th>\s*<td>(.*?)</td>", section, re.S)
if not extra or "search_legacy" not in extra.group(1):
    sys.exit("kb_lossy_gateway: 'Drift: extra' row does not name search_legacy: %r"
             % (extra.group(1) if extra else None))
kinds = re.findall(r"<td(?: class=\"\w+\")?>(unannounced_change|cache_replaced|drift|list_changed)</td>", section)
if not kinds:
    sys.exit("kb_lossy_gateway: no timeline entry (unannounced_change/cache_replaced/drift) in the DOM")
if "unannounced_change" not in kinds and "cache_replaced" not in kinds:
    sys.exit("kb_lossy_gateway: timeline lacks unannounced_change and cache_replaced: %s" % kinds)
print("DOM: kb_lossy_gateway 'Drift: extra' names search_legacy; timeline has %s"
      % ", ".join(sorted(set(kinds))))
EOF

chromium_run "$work/chromium-shot.out" "$work/chromium-shot.err" \
  --hide-scrollbars --window-size=1280,4000 --screenshot="$work/status_page.png" "$base/" ||
  fail "chromium --screenshot failed"
[ -s "$work/status_page.png" ] || fail "no screenshot written"
log "screenshot: $work/status_page.png ($(wc -c <"$work/status_page.png") bytes)"
log "PASS in $(($(date +%s) - started)) s"
