#!/usr/bin/env bash
# The lab's speed, side by side with a baseline revision: simulated host I/Os
# per wall-clock second for each array, and the wall time of the wafer
# array's preparation (building it, filling and reallocating the test file).
# Both builds run the same scenario in turn, ROUNDS times each, alternating so
# that a noisy neighbour hurts both alike; the medians are compared as ratios
# (this tree over the baseline). Both runs must write the same report.json:
# the lab is deterministic, so equal reports prove equal work (a change that
# alters the engine's decisions says so instead of a ratio of unequal work).
# Not part of the test suite: figures depend on the machine.
#
# Usage: bench/lab-speed.sh BASE_REF [SCENARIO]
#        (default scenario bench/lab-speed.toml; env ROUNDS=3)
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 1 || $# > 2)); then
  sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
fi
base_ref=$1
scenario=$(realpath "${2:-bench/lab-speed.toml}")
rounds=${ROUNDS:-3}
source bench/two-builds.sh

run() { # build round
  local out=$work/out-$1-$2
  rm -rf "$out"
  "$work/wafer-$1" lab run "$scenario" --jobs 1 --out "$out" 2>/dev/null >"$work/stdout-$1-$2"
}

for round in $(seq "$rounds"); do
  echo "round $round of $rounds" >&2
  run "$base_commit" "$round"
  run this "$round"
done

python3 - "$work" "$base_commit" "$rounds" "$(git rev-parse --short HEAD)" <<'EOF'
import pathlib, re, statistics, sys
work, base, rounds, head = pathlib.Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
line = re.compile(r"^\s+(\S+): (\d+) host I/Os simulated in ([\d.]+) s of wall time "
                  r"\((\d+) per second\), after ([\d.]+) s building")
def figures(build):
    runs = []
    for r in range(1, rounds + 1):
        found = {}
        for text in (work / f"stdout-{build}-{r}").read_text().splitlines():
            m = line.match(text)
            if m:
                found[m[1]] = (int(m[2]), float(m[4]), float(m[5]))
        runs.append(found)
    return runs
this, old = figures("this"), figures(base)
same = all((work / f"out-this-{r}" / "report.json").read_bytes()
           == (work / f"out-{base}-{r}" / "report.json").read_bytes() for r in range(1, rounds + 1))
print(f"lab speed, {rounds} alternating rounds, medians: this tree ({head}+) over baseline {base[:10]}")
print(f"{'array':<10} {'host I/Os':>11} {'baseline/s':>11} {'this/s':>9} {'ratio':>6}"
      f" {'prep base s':>11} {'prep this s':>11} {'ratio':>6}")
for array in this[0]:
    ios = this[0][array][0]
    b = statistics.median(run[array][1] for run in old)
    t = statistics.median(run[array][1] for run in this)
    pb = statistics.median(run[array][2] for run in old)
    pt = statistics.median(run[array][2] for run in this)
    prep = f"{pb / pt:6.2f}" if pt > 0 else "     -"
    print(f"{array:<10} {ios:>11,} {b:>11,.0f} {t:>9,.0f} {t / b:6.2f} {pb:>11.1f} {pt:>11.1f} {prep}")
print("(ratios: this tree's speed over the baseline's; above 1 is faster)")
print("reports: byte-identical, the same work" if same else
      "reports DIFFER: the two builds made different decisions, so the ratios compare unequal work")
EOF
