#!/usr/bin/env python3
"""E1's published targets against a lab run's report.json.

Reads DIR/report.json (and DIR/<array>.mechanisms.txt if present) written by
`wafer lab run scenarios/e1-fas2050-iometer.toml --out DIR` and checks what
issue 5 asks of E1 (reference/experiments.md):

- the wafer array: segment 1 within 15 % of 4864 IOPS; segment 14 / segment 1
  between 0.64 and 0.78; no segment more than 3 % above its predecessor;
  mean response time consistent with Little's law for 150 outstanding I/Os
  (within 10 %);
- the in-place comparator: segment 1 within 15 % of 6000 IOPS; segment 14
  within 5 % of segment 1.

Prints one line per check with the measured figure and PASS or MISS, then the
mechanisms tables. Exits 0 only if every check passes. Not part of the test
suite: a full E1 run takes tens of minutes.

Usage: bench/e1-verdict.py DIR
"""

import json
import pathlib
import sys


def checks_for(array, outstanding):
    segs = array["segments"]
    iops = [s["iops"] for s in segs]
    first, last = iops[0], iops[-1]
    little = [s["iops"] * s["latency_ms_avg"] / 1000 / outstanding for s in segs]
    worst_little = max(little, key=lambda x: abs(x - 1))
    if array["kind"] == "wafer":
        step = max(b / a for a, b in zip(iops, iops[1:])) if len(iops) > 1 else 1.0
        return [
            ("segment 1 IOPS within 15 % of 4864", f"{first:.0f} ({first / 4864:.3f}x)",
             abs(first / 4864 - 1) <= 0.15),
            ("segment 14 / segment 1 in [0.64, 0.78]", f"{last / first:.3f}",
             0.64 <= last / first <= 0.78),
            ("no segment > 3 % above its predecessor", f"largest step {step:.3f}x",
             step <= 1.03),
            (f"Little's law, {outstanding} outstanding, within 10 %",
             f"IOPS x latency / {outstanding} = {worst_little:.3f} at worst",
             abs(worst_little - 1) <= 0.10),
        ]
    return [
        ("segment 1 IOPS within 15 % of 6000", f"{first:.0f} ({first / 6000:.3f}x)",
         abs(first / 6000 - 1) <= 0.15),
        ("segment 14 within 5 % of segment 1", f"{last / first:.3f}",
         abs(last / first - 1) <= 0.05),
    ]


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = pathlib.Path(sys.argv[1])
    report = json.loads((out / "report.json").read_text())
    ok = True
    for array in report["arrays"]:
        outstanding = array["workload"]["outstanding_per_worker"] * array["workload"]["workers"]
        print(f"{array['name']} ({array['kind']}), {len(array['segments'])} segments:")
        print("   " + " ".join(f"{s['iops']:.0f}" for s in array["segments"]) + "  IOPS")
        for name, figure, passed in checks_for(array, outstanding):
            ok &= passed
            print(f"  {'PASS' if passed else 'MISS'}  {name}: {figure}")
    for table in sorted(out.glob("*.mechanisms.txt")):
        print()
        print(table.read_text(), end="")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
