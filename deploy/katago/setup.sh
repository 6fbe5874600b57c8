#!/usr/bin/env bash
# KataGo on a machine without a GPU: the build the package registries offer, made to run on the CPU.
#
#   bash deploy/katago/setup.sh [DIR]      # default DIR: .cache/katago in the checkout (ignored by git)
#
# What it does, once (later runs find everything in place and only check it):
#  1. OpenCL on the CPU: Debian's pocl-opencl-icd (PoCL).
#  2. KataGo 1.18.1 (OpenCL backend, an AppImage) and its b10c384 network from the katrain 1.20.0 wheel on PyPI (the
#     only KataGo build on a registry), unpacked into DIR.
#  3. The OpenCL tuning file, written with KataGo's default (untuned) kernel parameters. KataGo tunes its kernels
#     before its first search and keeps the result in a file; on PoCL its tuner aborts with heap corruption in the
#     transformerRMSNorm step, every time. A file it can parse skips the tuner: KataGo 1.18.1's format is the line
#     VERSION=13 and 21 parameter lines, and a line without key=value pairs keeps that group's defaults. The tuner's
#     own runs here never beat the default for the convolution GEMM, the slowest kernel, and the other defaults ran at
#     52-85 % of the tuner's best (docs/go.md, "KataGo on the CPU").
#  4. DIR/katago: a wrapper that runs the unpacked binary with its bundled libraries; DIR/model.bin.gz: the network.
#     A test query checks that an analysis comes back.
#
# Use: KIBITZ_KATAGO=DIR/katago KIBITZ_KATAGO_MODEL=DIR/model.bin.gz (see docs/go.md, "KataGo on the CPU").
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR="${1:-.cache/katago}"
mkdir -p "$DIR"
DIR="$(cd "$DIR" && pwd)"
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3

if ! dpkg -s pocl-opencl-icd >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq pocl-opencl-icd >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq pocl-opencl-icd >/dev/null; }
fi

if [ ! -x "$DIR/appimage/usr/bin/katago" ]; then
  "$PY" -m pip download katrain==1.20.0 --no-deps --quiet -d "$DIR/wheel"
  "$PY" - "$DIR" <<'UNZIP'
import sys, zipfile
with zipfile.ZipFile(f"{sys.argv[1]}/wheel/katrain-1.20.0-py3-none-any.whl") as z:
    for name in ("katrain/KataGo/katago", "katrain/models/b10c384h6nbttflrs.bin.gz"):
        z.extract(name, sys.argv[1])
UNZIP
  chmod +x "$DIR/katrain/KataGo/katago"
  (cd "$DIR" && ./katrain/KataGo/katago --appimage-extract >/dev/null && rm -rf appimage && mv squashfs-root appimage)
  mv "$DIR/katrain/models/b10c384h6nbttflrs.bin.gz" "$DIR/model.bin.gz"
  rm -rf "$DIR/katrain" "$DIR/wheel"
fi

cat > "$DIR/katago" <<WRAP
#!/bin/sh
# KataGo 1.18.1 from the katrain wheel, with the libraries its AppImage bundles (libzip)
LD_LIBRARY_PATH="$DIR/appimage/usr/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}" exec "$DIR/appimage/usr/bin/katago" "\$@"
WRAP
chmod +x "$DIR/katago"
cp deploy/katago/analysis.cfg "$DIR/analysis.cfg"

# where KataGo looks for the tuning of this device and network: it says so at start when the file is missing (and
# then starts its tuner, which is stopped here)
log="$DIR/setup.log"
"$DIR/katago" analysis -model "$DIR/model.bin.gz" -config "$DIR/analysis.cfg" -override-config logToStderr=true \
  </dev/null >"$log" 2>&1 &
pid=$!
for _ in $(seq 240); do
  grep -q "No existing tuning parameters\|Started, ready to begin handling requests" "$log" && break
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.5
done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
tune="$(sed -n 's/.*No existing tuning parameters found or parseable or valid at: //p' "$log" | head -1)"
if [ -n "$tune" ]; then
  mkdir -p "$(dirname "$tune")"
  { echo "VERSION=13"; for _ in $(seq 21); do echo "0"; done; } > "$tune"
  echo "katago setup: default OpenCL parameters written to $tune"
fi

# one analysis must come back
answer="$(echo '{"id":"check","moves":[["B","Q16"],["W","D4"]],"rules":"chinese","komi":7.5,"boardXSize":19,"boardYSize":19,"maxVisits":1}' \
  | timeout 300 "$DIR/katago" analysis -model "$DIR/model.bin.gz" -config "$DIR/analysis.cfg" 2>/dev/null | head -1)"
case "$answer" in
  *'"rootInfo"'*) echo "katago setup: ok ($DIR/katago, $DIR/model.bin.gz)"; touch "$DIR/.ready";;
  *) echo "katago setup: no analysis came back: $answer" >&2; exit 1;;
esac
