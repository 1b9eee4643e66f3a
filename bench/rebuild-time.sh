#!/usr/bin/env bash
# How long `wafer serve` takes to rebuild a failed disk onto its spare, for
# this tree against revision BASE_REF, under several amounts of LUN data: a
# filer of six 2 GiB data disks (RAID-DP, one spare) and a 10 GiB LUN, GIB
# GiB written at its start with qemu-io, then `disk fail disk3`, timed until
# `aggr status -r` shows the RAID group normal again. The two builds take
# turns (a rebuild is disk-bound as well, so they do not run at once). Not
# part of the test suite: times depend on the machine. Needs about 20 GiB of
# free disk space (every disk of the filer, the spare's rebuilt copy).
#
# Usage: bench/rebuild-time.sh BASE_REF   (env: SIZES="1 3 6" in GiB, at most 9)
set -euo pipefail
cd "$(dirname "$0")/.."
base_ref=${1:?usage: bench/rebuild-time.sh BASE_REF}
SIZES=${SIZES:-1 3 6}

command -v qemu-io >/dev/null || { echo "bench: qemu-io is needed" >&2; exit 1; }
source bench/two-builds.sh

data=$work/rebuild-data
trap 'rm -rf "$data"' EXIT

# until_server PID COMMAND...: runs COMMAND until it succeeds, or fails the
# benchmark with the server's log if the server has stopped.
until_server() {
  local pid=$1
  shift
  until "$@" >/dev/null 2>&1; do
    kill -0 "$pid" 2>/dev/null || { cat "$work/rebuild-serve.log" >&2; exit 1; }
    sleep 0.5
  done
}

# group_normal BIN: whether the RAID group has no failed or rebuilding disk.
group_normal() {
  "$1" aggr status -r --data "$data" | grep -q "rg0 (normal)"
}

# rebuild_seconds BIN GIB: prints the seconds the rebuild took.
rebuild_seconds() {
  local bin=$1 gib=$2 port=10899
  rm -rf "$data"
  "$bin" serve --data "$data" --listen 127.0.0.1:$port --disk-size 2g --data-disks 6 \
    --vol-size 11g --lun-size 10g >"$work/rebuild-serve.log" 2>&1 &
  local pid=$!
  until_server "$pid" "$bin" aggr status -r --data "$data"
  for ((i = 0; i < gib; i++)); do
    qemu-io -f raw -c "write -P 0x5a ${i}g 1g" "nbd://127.0.0.1:$port/vol0/lun0" >/dev/null
  done
  local start
  start=$(date +%s.%N)
  "$bin" disk fail disk3 --data "$data" >/dev/null
  sleep 1
  until_server "$pid" group_normal "$bin"
  python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')"
  kill "$pid"
  wait "$pid" || true
  rm -rf "$data"
}

printf '%8s %14s %14s %8s\n' "LUN data" "base (s)" "this (s)" "ratio"
for gib in $SIZES; do
  base=$(rebuild_seconds "$work/wafer-$base_commit" "$gib")
  this=$(rebuild_seconds "$work/wafer-this" "$gib")
  printf '%6s GiB %14s %14s %7sx\n' "$gib" "$base" "$this" \
    "$(python3 -c "print(round($base / $this, 2))")"
done
