#!/usr/bin/env bash
# wafer serve against qemu-nbd, side by side, with fio's NBD engine over Unix
# sockets: 4 KiB random reads and writes at iodepth 32, 1 MiB sequential reads
# and writes at iodepth 8, each for $RUNTIME seconds over the first $REGION of
# the export. Prints IOPS, MB/s (10^6 B/s) and p99 completion latency for
# both, and wafer's figures as ratios of qemu-nbd's. Not part of the test
# suite: figures depend on the machine, and a shared one is noisy.
#
# Both servers get the same region written in full first, so that reads hit
# data rather than holes (qemu-nbd reads holes of a sparse file for free).
# What is compared is not the same promise: wafer acknowledges a write once
# its NVLog record is fdatasync'ed (durable); qemu-nbd with --cache=none
# (O_DIRECT) acknowledges once the device has the data, without a flush.
# QEMU_CACHE=directsync gives qemu-nbd wafer's durability promise.
#
# Usage: bench/nbd-vs-qemu-nbd.sh   (env: REGION=512m RUNTIME=15 QEMU_CACHE=none
#        BENCH_DIR=<scratch dir on the filesystem under test>)
set -euo pipefail
cd "$(dirname "$0")/.."

REGION=${REGION:-512m}
RUNTIME=${RUNTIME:-15}
QEMU_CACHE=${QEMU_CACHE:-none}
BENCH_DIR=${BENCH_DIR:-$PWD/target/bench-nbd}

for tool in fio qemu-nbd python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is needed" >&2; exit 1; }
done

cargo build --quiet --release -p wafer
wafer=${CARGO_TARGET_DIR:-$PWD/target}/release/wafer

rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR"
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
}
trap cleanup EXIT

wait_for_socket() {
  for _ in $(seq 600); do [[ -S $1 ]] && return 0; sleep 0.1; done
  echo "bench: $1 never appeared" >&2
  exit 1
}

# wafer: the default filer (2 GiB LUN on six 768 MiB data disks).
"$wafer" serve --data "$BENCH_DIR/wafer-data" --socket "$BENCH_DIR/wafer.sock" \
  >"$BENCH_DIR/wafer.out" 2>"$BENCH_DIR/wafer.log" &
pids+=($!)
wait_for_socket "$BENCH_DIR/wafer.sock"
wafer_uri="nbd+unix:///vol0/lun0?socket=$BENCH_DIR/wafer.sock"

# qemu-nbd: a raw file of the same size on the same filesystem.
# (native AIO needs O_DIRECT, which only the none and directsync modes use.)
truncate -s 2g "$BENCH_DIR/raw.img"
aio=threads
[[ $QEMU_CACHE == none || $QEMU_CACHE == directsync ]] && aio=native
qemu-nbd -f raw --cache="$QEMU_CACHE" --aio="$aio" -e 8 -t -x lun0 \
  -k "$BENCH_DIR/qemu.sock" "$BENCH_DIR/raw.img" 2>"$BENCH_DIR/qemu-nbd.log" &
pids+=($!)
wait_for_socket "$BENCH_DIR/qemu.sock"
qemu_uri="nbd+unix:///lun0?socket=$BENCH_DIR/qemu.sock"

run_fio() { # name uri rw bs iodepth [time_based]
  local name=$1 uri=$2 rw=$3 bs=$4 depth=$5
  local timed=(--time_based --runtime="$RUNTIME")
  [[ ${6:-timed} == once ]] && timed=()
  fio --name="$name" --ioengine=nbd --uri="$uri" --rw="$rw" --bs="$bs" --iodepth="$depth" \
    --size="$REGION" "${timed[@]}" --output-format=json \
    --output="$BENCH_DIR/$name.json" >/dev/null
}

echo "preconditioning: writing $REGION of each export" >&2
run_fio fill-wafer "$wafer_uri" write 1m 8 once
run_fio fill-qemu "$qemu_uri" write 1m 8 once

tests=("randread 4k 32" "randwrite 4k 32" "read 1m 8" "write 1m 8")
for test in "${tests[@]}"; do
  read -r rw bs depth <<<"$test"
  for server in wafer qemu; do
    uri_var="${server}_uri"
    echo "running $rw bs=$bs iodepth=$depth against $server" >&2
    run_fio "$server-$rw-$bs" "${!uri_var}" "$rw" "$bs" "$depth"
  done
done

python3 - "$BENCH_DIR" "$QEMU_CACHE" "${tests[@]}" <<'PY'
import json, sys
bench_dir, cache, tests = sys.argv[1], sys.argv[2], sys.argv[3:]

def figures(name, rw):
    job = json.load(open(f"{bench_dir}/{name}.json"))["jobs"][0]
    side = job["write" if "write" in rw else "read"]
    p99_ms = side["clat_ns"]["percentile"]["99.000000"] / 1e6
    return side["iops"], side["bw_bytes"] / 1e6, p99_ms

print(f"fio over NBD (Unix sockets), 1 job each; qemu-nbd --cache={cache}")
header = f"{'test':<22}{'server':<10}{'IOPS':>10}{'MB/s':>10}{'p99 ms':>10}"
print(header)
print("-" * len(header))
for test in tests:
    rw, bs, depth = test.split()
    label = f"{rw} {bs} qd{depth}"
    wafer = figures(f"wafer-{rw}-{bs}", rw)
    qemu = figures(f"qemu-{rw}-{bs}", rw)
    for server, (iops, mbs, p99) in (("wafer", wafer), ("qemu-nbd", qemu)):
        print(f"{label:<22}{server:<10}{iops:>10.0f}{mbs:>10.1f}{p99:>10.2f}")
    ratio = lambda a, b: f"{a / b:.2f}x" if b else "n/a"
    print(f"{'':<22}{'ratio':<10}{ratio(wafer[0], qemu[0]):>10}{ratio(wafer[1], qemu[1]):>10}"
          f"{ratio(wafer[2], qemu[2]):>10}")
PY
