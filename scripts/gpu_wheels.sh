#!/usr/bin/env bash
# The wheels scripts/gpu_check.py needs beyond the GPU image (scripts/gpu_check_wheels.txt), for
# Python 3.12 on manylinux x86-64, downloaded into the ignored folder .whl/ (nothing else is
# kept there). Prints each wheel's size, the total (at most 64 MiB: what travels to the node) and
# the one command that installs them and runs the check on the node.
#   bash scripts/gpu_wheels.sh            # PIP="python3 -m pip" by default
set -euo pipefail
cd "$(dirname "$0")/.."
PIP="${PIP:-python3 -m pip}"
OUT="${WHEEL_DIR:-.whl}"  # the tests write elsewhere
LIMIT=$((64 * 1024 * 1024))
mkdir -p "$OUT"
pins=$(sed -e 's/#.*//' scripts/gpu_check_wheels.txt | awk 'NF {print $1}')
keep=()
for pin in $pins; do
  $PIP download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$OUT" "$pin" 2>&1 | grep -v "is ignored" || true
  name=${pin%%==*}; version=${pin##*==}
  stem=$(echo "$name" | tr '-' '_')
  whl=$(ls "$OUT"/"${stem}"-"${version}"-*.whl 2>/dev/null | head -1 || true)
  [ -n "$whl" ] || { echo "gpu_wheels: no cp312 manylinux x86-64 wheel for $pin" >&2; exit 1; }
  keep+=("$whl")
done
# one version of each: anything else in .whl/ would stop the install on the node
for f in "$OUT"/*.whl; do
  case " ${keep[*]} " in *" $f "*) ;; *) rm -f "$f"; echo "removed stale $f" ;; esac
done
total=0
for f in "${keep[@]}"; do
  size=$(stat -c %s "$f")
  total=$((total + size))
  printf '%8.2f MiB  %s\n' "$(awk -v s="$size" 'BEGIN {print s / 1048576}')" "$(basename "$f")"
done
printf '%8.2f MiB  total (limit 64 MiB)\n' "$(awk -v s="$total" 'BEGIN {print s / 1048576}')"
[ "$total" -le "$LIMIT" ] || { echo "gpu_wheels: the bundle exceeds 64 MiB" >&2; exit 1; }
echo
echo "On the node, from the repository root (with .whl/ carried):"
python3 -c 'import sys; sys.path.insert(0, "scripts"); import gpu_check_preflight as p; print("  " + p.INSTALL)'
