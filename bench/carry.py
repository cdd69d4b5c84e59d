#!/usr/bin/env python3
"""Carry benchmark: what carrying a player on keepalived's running stream (`--carry`) costs, on
the kernel's loopback card in a VM at 192 kHz, S32_LE, stereo: keepalived's CPU and wakeups while
it carries aplay, less its own in the ring loop, against aplay's alone on `hw:` (issue 60: at
most 2 % of the player's, one wakeup per player period). Boots the VM rig of Tests/VM, runs
bench/carry-guest.py in the guest, and writes the table into BENCHMARKS.md between its markers.
Run through `bench/run --carry` after `scripts/package` (the guest takes the plug-in from dist/).

The guest runs under TCG (no nested KVM here): CPU figures are emulated, so only the ratios
between programs measured in the same run mean anything; wakeups (context switches) are real
counts of the guest's scheduler."""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "Tests", "VM"))
import vmrig  # noqa: E402

BENCHMARKS = os.path.join(ROOT, "BENCHMARKS.md")
BEGIN_MARK = "<!-- bench/run --carry results: begin (generated, do not edit by hand) -->"
END_MARK = "<!-- bench/run --carry results: end -->"


def table(results, seconds, kernel, load):
    runs = {r["run"]: r for r in results["runs"]}
    alone, idle, carrying = runs["aplay alone on hw:"], runs["keepalived alone (ring loop)"], runs["keepalived carrying aplay"]
    period_rate = results["rate"] / (results["rate"] * 125 // 1000)
    lines = [
        f"Measured {datetime.date.today().isoformat()} with `bench/run --carry -n {seconds:g}` (kernel {kernel}, TCG; "
        f"{results['rate']} Hz {results['format']} {results['channels']} ch, aplay with a 500 ms buffer of 125 ms periods "
        f"playing digital zero, {seconds:g} s per run after a 3 s warm-up; this machine's load average "
        f"{load[0]:.2f} at the start, {load[1]:.2f} at the end).",
        "",
        "| run | process | wakeups/s | CPU µs/s (emulated) |",
        "| --- | --- | ---: | ---: |",
    ]
    for r in results["runs"]:
        for name in ("aplay", "keepalived"):
            if name in r:
                lines.append(f"| {r['run']} | {name} | {r[name]['wakeups']:.2f} | {r[name]['cpu_us']:.1f} |")
    added_cpu = carrying["keepalived"]["cpu_us"] - idle["keepalived"]["cpu_us"]
    added_wakeups = carrying["keepalived"]["wakeups"] - idle["keepalived"]["wakeups"]

    def voluntary(run):
        return sum(v for v, _ in run["keepalived"].get("threads", {}).values())
    added_voluntary = voluntary(carrying) - voluntary(idle)
    lines += [
        "",
        f"- In the same run (the fairest figure under TCG, where another program's load on this machine "
        f"stretches every guest task's time alike): keepalived carrying used {carrying['keepalived']['cpu_us'] / carrying['aplay']['cpu_us']:.2f}× "
        f"the CPU of the aplay it carried.",
        f"- keepalived's added CPU while carrying: {added_cpu:.1f} µs/s, {100 * added_cpu / alone['aplay']['cpu_us']:.1f} % of aplay's "
        f"own on `hw:` ({alone['aplay']['cpu_us']:.1f} µs/s); carried, aplay itself used {carrying['aplay']['cpu_us']:.1f} µs/s.",
        f"- keepalived's added context switches: {added_wakeups:.2f}/s against aplay's {period_rate:g} periods/s "
        f"({added_wakeups / period_rate:.2f} per period); of them its own wakeups (voluntary: the thread slept and was woken) "
        f"{added_voluntary:.2f}/s, {added_voluntary / period_rate:.2f} per period, the rest the scheduler's preemptions; "
        f"aplay alone switched {alone['aplay']['wakeups']:.2f}/s, carried {carrying['aplay']['wakeups']:.2f}/s.",
        f"- recoveries while carrying: {carrying.get('recoveries')}, aplay's underruns: {carrying.get('aplay_underruns')}.",
    ]
    for r in (idle, carrying):
        by_thread = r["keepalived"].get("threads")
        if by_thread:
            shown = ", ".join(f"{t.rsplit(' ', 1)[0]} {v + i:.2f}/s ({v:.2f} voluntary, {i:.2f} involuntary)"
                              for t, (v, i) in sorted(by_thread.items(), key=lambda x: -sum(x[1])))
            lines.append(f"- keepalived's context switches by thread, {r['run']}: {shown}.")
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser(prog="bench/run --carry", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--seconds", type=float, default=30, help="measuring window per run (default 30)")
    parser.add_argument("--keepalived", default=os.environ.get("BENCH_KEEPALIVED"), help="the binary (default: a release build)")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch BENCHMARKS.md")
    args = parser.parse_args()

    keepalived = args.keepalived
    if not keepalived:
        subprocess.run(["swift", "build", "-c", "release", "--product", "keepalived"], cwd=ROOT, check=True)
        keepalived = os.path.join(ROOT, ".build", "release", "keepalived")
    kernel = vmrig.ensure_kernel()
    vmrig.ensure_initramfs(kernel)
    io = tempfile.mkdtemp(prefix="bench-carry-")
    env = {"KEEPALIVED": os.path.abspath(keepalived), "BENCH_SECONDS": str(args.seconds)}
    load_start = os.getloadavg()[0]
    if load_start >= 0.5:
        print(f"bench/run --carry: this machine's load average is {load_start:.2f}: CPU figures across runs will not compare", file=sys.stderr)
    result = vmrig.run_vm([os.path.join(ROOT, "bench", "carry-guest.py")], devices="aloop",
                          module_options={"snd_aloop": "pcm_substreams=1"}, env=env, io_dir=io,
                          timeout=300 + 3 * (args.seconds + 30), on_line=lambda line: print(f"  [vm] {line}", flush=True))
    path = os.path.join(io, "results.json")
    if result.exit_code != 0 or not os.path.exists(path):
        print(f"bench/run --carry: the guest failed (exit {result.exit_code}); log in {io}", file=sys.stderr)
        return 1
    with open(path) as f:
        results = json.load(f)
    section = table(results, args.seconds, kernel.version, (load_start, os.getloadavg()[0]))
    print(section)
    if args.no_write:
        return 0
    text = open(BENCHMARKS).read()
    block = f"{BEGIN_MARK}\n{section}{END_MARK}\n"
    if BEGIN_MARK in text and END_MARK in text:
        text = text.split(BEGIN_MARK)[0] + block + text.split(END_MARK, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n## Carrying a player (`bench/run --carry`)\n\n" + block
    with open(BENCHMARKS, "w") as f:
        f.write(text)
    print(f"wrote {BENCHMARKS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
