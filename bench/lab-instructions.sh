#!/usr/bin/env bash
# The lab's cost in instructions, side by side with a baseline revision:
# callgrind counts the instructions of the wafer array's run phase (every
# call of its `advance` and `submit`), or of its preparation (PHASE=prepare),
# and divides by the host I/Os simulated. Unlike wall time, the count does not
# depend on what else the machine runs, so one run per build settles a change
# of a few per cent. Both builds run at once. Caveats: callgrind counts every
# iteration of `rep movsb`/`rep stosb` (large memcpy and memset), and cache
# misses cost nothing in it; confirm a gain in time with bench/lab-speed.sh.
# Needs valgrind (apt-get install valgrind). Not part of the test suite.
#
# Usage: bench/lab-instructions.sh BASE_REF [SCENARIO]
#        (default scenario bench/lab-instructions.toml; env PHASE=run|prepare)
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 1 || $# > 2)); then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
command -v valgrind >/dev/null || { echo "needs valgrind: apt-get install valgrind" >&2; exit 2; }
base_ref=$1
scenario=$(realpath "${2:-bench/lab-instructions.toml}")
phase=${PHASE:-run}
case $phase in
  run) toggles=(advance submit) ;;
  prepare) toggles=(prepare) ;;
  *) echo "PHASE is run or prepare, not $phase" >&2; exit 2 ;;
esac
source bench/two-builds.sh

count() { # build
  local out=$work/callgrind-$1
  local args=(--tool=callgrind --collect-atstart=no "--callgrind-out-file=$out.out")
  for name in "${toggles[@]}"; do
    args+=("--toggle-collect=<wafer_lab::wafer::WaferArray as wafer_lab::array::Array>::$name")
  done
  rm -rf "$out"
  valgrind "${args[@]}" "$work/wafer-$1" lab run "$scenario" --jobs 1 --out "$out" \
    2>"$out.log" >"$out.stdout"
}

echo "counting $phase instructions of both builds (minutes)" >&2
count "$base_commit" &
count this
wait

python3 - "$work" "$base_commit" "$phase" "$(git rev-parse --short HEAD)" <<'PY'
import pathlib, re, sys
work, base, phase, head = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
def figures(build):
    stem = work / f"callgrind-{build}"
    totals = re.search(r"^totals: (\d+)", (stem.parent / f"{stem.name}.out").read_text(), re.M)
    ios = re.search(r"^\s+\S+: (\d+) host I/Os simulated", (stem.parent / f"{stem.name}.stdout").read_text(), re.M)
    return int(totals[1]), int(ios[1])
(bi, bn), (ti, tn) = figures(base), figures("this")
same = (work / f"callgrind-{base}" / "report.json").read_bytes() == (work / "callgrind-this" / "report.json").read_bytes()
print(f"lab instructions, {phase} phase: this tree ({head}+) against baseline {base[:10]}")
print(f"{'build':<10} {'instructions':>16} {'host I/Os':>10} {'per host I/O':>13}")
for name, i, n in (("baseline", bi, bn), ("this", ti, tn)):
    print(f"{name:<10} {i:>16,} {n:>10,} {i / n:>13,.0f}")
print(f"ratio (this over baseline): {ti / bi:.4f}; below 1 is fewer instructions")
print("reports: byte-identical, the same work" if same else
      "reports DIFFER: the two builds made different decisions, so the counts compare unequal work")
PY
