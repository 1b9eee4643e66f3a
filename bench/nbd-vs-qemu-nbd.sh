#!/usr/bin/env bash
# wafer serve against qemu-nbd, side by side, with fio's NBD engine over Unix
# sockets, one job each: 4 KiB random reads and writes at iodepth 32, 1 MiB
# sequential reads and writes at iodepth 8, and 4 KiB random 70/30 reads and
# writes at iodepth 32, each for $RUNTIME seconds over the first $REGION of
# the export. Prints IOPS, MB/s (10^6 B/s) and p99 completion latency for
# every server, IOPS as a ratio of qemu-nbd --cache=directsync's, and the
# server process's CPU time per I/O (user and system, from /proc), which a
# busy machine disturbs far less than throughput. Not part of the test suite:
# figures depend on the machine, and a shared one is noisy, so the servers
# take turns test by test.
#
# The servers:
#   wafer          the default filer, its NVLog in the data directory
#   wafer-nvlog    the same with --nvlog $NVLOG_DIR/nvlog (default /dev/shm:
#                  memory, which survives a SIGKILL but not a power cut; set
#                  NVLOG_DIR to a directory on a real second device to measure
#                  one)
#   base, base-nvlog   the same two with $BASELINE_BIN, when it is set (an
#                  older build, to compare a change side by side; base-nvlog
#                  if that build has --nvlog)
#   qemu-none      qemu-nbd --cache=none (O_DIRECT): acknowledges a write
#                  once the device has it, without a flush
#   qemu-dsync     qemu-nbd --cache=directsync (O_DIRECT|O_DSYNC): a write is
#                  durable when acknowledged, wafer's promise
#   file           fio directly on a file of the same filesystem, O_DIRECT,
#                  libaio: the disk's own limit (no durability promise)
#
# wafer acknowledges a write once its NVLog record is fdatasync'ed. Every
# server gets its region written in full first, so that reads hit data rather
# than holes (qemu-nbd reads holes of a sparse file for free).
#
# Usage: bench/nbd-vs-qemu-nbd.sh   (env: REGION=512m RUNTIME=15
#        BENCH_DIR=<scratch dir on the filesystem under test>
#        NVLOG_DIR=/dev/shm WAFER_BIN=<wafer binary; default: build it>
#        BASELINE_BIN=<another wafer binary to run beside it>)
set -euo pipefail
cd "$(dirname "$0")/.."

REGION=${REGION:-512m}
RUNTIME=${RUNTIME:-15}
BENCH_DIR=${BENCH_DIR:-$PWD/target/bench-nbd}
NVLOG_DIR=${NVLOG_DIR:-/dev/shm}
BASELINE_BIN=${BASELINE_BIN:-}

for tool in fio qemu-nbd python3; do
  command -v "$tool" >/dev/null || { echo "bench: $tool is needed" >&2; exit 1; }
done

if [[ -z ${WAFER_BIN:-} ]]; then
  cargo build --quiet --release -p wafer
  WAFER_BIN=${CARGO_TARGET_DIR:-$PWD/target}/release/wafer
fi

rm -rf "$BENCH_DIR"
mkdir -p "$BENCH_DIR"
nvlog_scratch=$(mktemp -d "$NVLOG_DIR/wafer-bench.XXXXXX")
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$nvlog_scratch"
}
trap cleanup EXIT

wait_for_socket() {
  for _ in $(seq 600); do [[ -S $1 ]] && return 0; sleep 0.1; done
  echo "bench: $1 never appeared" >&2
  exit 1
}

servers=()
declare -A uri pid_of
start_wafer() { # name binary [--nvlog PATH]
  local name=$1 binary=$2
  shift 2
  "$binary" serve --data "$BENCH_DIR/$name-data" --socket "$BENCH_DIR/$name.sock" "$@" \
    >"$BENCH_DIR/$name.out" 2>"$BENCH_DIR/$name.log" &
  pids+=($!)
  pid_of[$name]=$!
  wait_for_socket "$BENCH_DIR/$name.sock"
  servers+=("$name")
  uri[$name]="nbd+unix:///vol0/lun0?socket=$BENCH_DIR/$name.sock"
}

start_qemu() { # name cache
  local name=$1 cache=$2
  # A raw file of the LUN's size on the same filesystem; native AIO, which
  # O_DIRECT (both modes used here) allows.
  truncate -s 2g "$BENCH_DIR/$name.img"
  qemu-nbd -f raw --cache="$cache" --aio=native -e 8 -t -x lun0 \
    -k "$BENCH_DIR/$name.sock" "$BENCH_DIR/$name.img" 2>"$BENCH_DIR/$name.log" &
  pids+=($!)
  pid_of[$name]=$!
  wait_for_socket "$BENCH_DIR/$name.sock"
  servers+=("$name")
  uri[$name]="nbd+unix:///lun0?socket=$BENCH_DIR/$name.sock"
}

# The default filer: a 2 GiB LUN on six 768 MiB data disks.
start_wafer wafer "$WAFER_BIN"
start_wafer wafer-nvlog "$WAFER_BIN" --nvlog "$nvlog_scratch/wafer"
if [[ -n $BASELINE_BIN ]]; then
  start_wafer base "$BASELINE_BIN"
  if "$BASELINE_BIN" serve --help | grep -q -- --nvlog; then
    start_wafer base-nvlog "$BASELINE_BIN" --nvlog "$nvlog_scratch/base"
  fi
fi
start_qemu qemu-none none
start_qemu qemu-dsync directsync
servers+=(file)

cpu_ticks() { # pid: user + system clock ticks so far
  awk '{print $14 + $15}' "/proc/$1/stat"
}

run_fio() { # name server rw bs iodepth [once]
  local name=$1 server=$2 rw=$3 bs=$4 depth=$5
  local timed=(--time_based --runtime="$RUNTIME")
  [[ ${6:-timed} == once ]] && timed=()
  local target=(--ioengine=nbd --uri="${uri[$server]:-}")
  [[ $server == file ]] && target=(--ioengine=libaio --direct=1 --filename="$BENCH_DIR/file.img")
  local pid=${pid_of[$server]:-} before=0
  [[ -n $pid ]] && before=$(cpu_ticks "$pid")
  fio --name="$name" "${target[@]}" --rw="$rw" --rwmixread=70 --bs="$bs" --iodepth="$depth" \
    --size="$REGION" "${timed[@]}" --output-format=json \
    --output="$BENCH_DIR/$name.json" >/dev/null
  [[ -n $pid ]] && echo $(($(cpu_ticks "$pid") - before)) >"$BENCH_DIR/$name.cpu"
  return 0
}

echo "preconditioning: writing $REGION of each of ${servers[*]}" >&2
for server in "${servers[@]}"; do
  run_fio "fill-$server" "$server" write 1m 8 once
done

tests=("randread 4k 32" "randwrite 4k 32" "read 1m 8" "write 1m 8" "randrw 4k 32")
for test in "${tests[@]}"; do
  read -r rw bs depth <<<"$test"
  for server in "${servers[@]}"; do
    echo "running $rw bs=$bs iodepth=$depth against $server" >&2
    run_fio "$server-$rw-$bs" "$server" "$rw" "$bs" "$depth"
  done
done

python3 - "$BENCH_DIR" "$(getconf CLK_TCK)" "${#servers[@]}" "${servers[@]}" "${tests[@]}" <<'PY'
import json, os, sys
bench_dir, ticks_per_second, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
servers, tests = sys.argv[4:4 + count], sys.argv[4 + count:]

def figures(name):
    """IOPS, MB/s, p99 ms (the worse side) and server CPU us per I/O."""
    job = json.load(open(f"{bench_dir}/{name}.json"))["jobs"][0]
    sides = [job[s] for s in ("read", "write") if job[s]["total_ios"] > 0]
    p99 = max(s["clat_ns"]["percentile"]["99.000000"] for s in sides) / 1e6
    ios = sum(s["total_ios"] for s in sides)
    cpu = f"{bench_dir}/{name}.cpu"
    cpu_us = None
    if os.path.exists(cpu) and ios:
        cpu_us = int(open(cpu).read()) / ticks_per_second * 1e6 / ios
    iops, mbs = sum(s["iops"] for s in sides), sum(s["bw_bytes"] for s in sides) / 1e6
    return iops, mbs, p99, cpu_us

print("fio, 1 job each: NBD over Unix sockets; 'file' is fio on a file (O_DIRECT, libaio)")
print("ratio: IOPS against qemu-nbd --cache=directsync; randrw is 70/30, p99 the worse side;")
print("CPU: the server process's user + system time per I/O, in us")
header = f"{'test':<18}{'server':<13}{'IOPS':>9}{'MB/s':>9}{'p99 ms':>9}{'ratio':>8}{'CPU us':>8}"
print(header)
print("-" * len(header))
for test in tests:
    rw, bs, depth = test.split()
    label = f"{rw} {bs} qd{depth}"
    rows = {server: figures(f"{server}-{rw}-{bs}") for server in servers}
    reference = rows["qemu-dsync"][0]
    for server, (iops, mbs, p99, cpu_us) in rows.items():
        ratio = f"{iops / reference:.2f}x" if reference else "n/a"
        cpu = "-" if cpu_us is None else f"{cpu_us:.0f}"
        print(f"{label:<18}{server:<13}{iops:>9.0f}{mbs:>9.1f}{p99:>9.2f}{ratio:>8}{cpu:>8}")
        label = ""
PY
