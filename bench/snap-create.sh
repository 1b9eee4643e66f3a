#!/usr/bin/env bash
# What `snap create` costs as a volume's data grows, for this tree against
# revision BASE_REF: a filer of twelve 4 GiB data disks (RAID-DP, one spare),
# a 40 GiB vol0 and a 17 GiB lun0, filled with 1 MiB sequential writes to
# 1 GiB and then to 16 GiB. At each size a 12 s fio job of 4 KiB random writes
# (iodepth 8, over the LUN's first GiB) runs, and 5 s into it `snap create`
# is timed; the job's p99 and largest latency show whether the snapshot
# stalled host writes. The goal (issue 38): the 16 GiB snapshot within 1.5x of
# the 1 GiB one, and no stall longer than a CP. The builds take turns. Not
# part of the test suite: times depend on the machine. Needs about 24 GiB of
# free disk space.
#
# Usage: bench/snap-create.sh BASE_REF
set -euo pipefail
cd "$(dirname "$0")/.."
base_ref=${1:?usage: bench/snap-create.sh BASE_REF}

for tool in fio python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is needed" >&2; exit 1; }
done
source bench/two-builds.sh

dir=$work/snap-create
trap 'rm -rf "$dir"' EXIT

# run BUILD: serves a new filer with BUILD, prints one line per size.
run() {
  local wafer=$work/wafer-$1
  rm -rf "$dir"
  mkdir -p "$dir"
  "$wafer" --data "$dir/data" serve --socket "$dir/nbd.sock" --disk-size 4g --data-disks 12 \
    --vol-size 40g --lun-size 17g >"$dir/serve.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do [[ -S $dir/nbd.sock ]] && break; sleep 0.1; done
  local uri="nbd+unix:///vol0/lun0?socket=$dir/nbd.sock"
  local from=0
  for gib in 1 16; do
    fio --name=fill --ioengine=nbd --uri="$uri" --rw=write --bs=1m --iodepth=8 \
      --offset="${from}g" --size="$((gib - from))g" --output-format=terse >/dev/null
    from=$gib
    fio --name=across --ioengine=nbd --uri="$uri" --rw=randwrite --bs=4k --iodepth=8 --size=1g \
      --time_based --runtime=12 --output-format=json --output="$dir/fio-$gib.json" &
    local job=$!
    sleep 5
    local start end
    start=$(date +%s%N)
    "$wafer" --data "$dir/data" snap create vol0 "s$gib" >/dev/null
    end=$(date +%s%N)
    wait "$job"
    python3 - "$1" "$gib" "$(((end - start) / 1000000))" "$dir/fio-$gib.json" <<'EOF'
import json, sys
build, gib, ms, path = sys.argv[1][:10], sys.argv[2], sys.argv[3], sys.argv[4]
job = json.load(open(path))["jobs"][0]["write"]
clat = job["clat_ns"]
print(f"{build:<10} {gib:>3} GiB  snap create {ms:>6} ms  fio {job['iops']:>8,.0f} IOPS  "
      f"p99 {clat['percentile']['99.000000'] / 1e6:6.2f} ms  max {clat['max'] / 1e6:8.1f} ms")
EOF
  done
  kill "$pid"
  wait "$pid" || true
}

echo "build      data     snap create      concurrent 4 KiB random writes, iodepth 8"
run "$base_commit"
run this
