#!/usr/bin/env python3
"""Hardware benchmark: keepalived against aplay on the Debian kernel's own snd-hda-intel driver
(an emulated Intel HDA controller and codec in QEMU, the codec allowed to sleep: power_save=1),
on hw:0,0, plughw:0,0 and default (dmix). Boots the VM rig of Tests/VM (see its README), runs
bench/hardware-guest.py in the guest, and writes the table into BENCHMARKS.md between its
markers. Run through `bench/run --hardware`.

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
BEGIN_MARK = "<!-- bench/run --hardware results: begin (generated, do not edit by hand) -->"
END_MARK = "<!-- bench/run --hardware results: end -->"


def table(results, seconds, kernel):
    lines = [
        f"Measured {datetime.date.today().isoformat()} with `bench/run --hardware -n {seconds:g}` "
        f"(kernel {kernel}, QEMU {vmrig_qemu_version()}, TCG; {seconds:g} s per program after a 3 s warm-up, "
        f"after one discarded 65 s ring-loop run so that no row pays for QEMU translating code it runs first).",
        "",
        "| device | program | wakeups/s | CPU µs/s (emulated) | underruns | codec powered off |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        if "error" in r:
            lines.append(f"| {r['device']} | {r['program']} | – | – | – | {r['error']} |")
            continue
        lines.append(f"| {r['device']} | {r['program']} | {r['wakeups']:.3f} | {r['cpu_us']:.1f} | {r['underruns']} | {r['codec_off_ms']} ms |")
    by = {(r["device"], r["program"]): r for r in results if "error" not in r}
    notes = []
    dk, da = by.get(("dmix", "keepalived")), by.get(("dmix", "aplay"))
    if dk and da and da["wakeups"] > 0 and da["cpu_us"] > 0:
        notes.append(f"dmix: keepalived wakes {dk['wakeups'] / da['wakeups']:.2f}× as often as aplay "
                     f"(target ≤ 0.25) and uses {dk['cpu_us'] / da['cpu_us']:.2f}× its CPU (target ≤ 1).")
    hk = by.get(("hw", "keepalived (ring loop)"))
    if hk:
        notes.append(f"hw ring loop: {hk['wakeups']:.3f} wakeups/s and {hk['cpu_us']:.1f} µs/s for the whole process "
                     f"(targets ≤ 0.1 and ≤ 20; the window holds one 60 s health check; no watchdog in this run: under systemd add its ping, one per 30 s).")
    lines.append("")
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


def vmrig_qemu_version():
    try:
        out = subprocess.run(["qemu-system-x86_64", "--version"], capture_output=True, text=True).stdout
        return out.split()[3] if out else "?"
    except OSError:
        return "?"


def main():
    parser = argparse.ArgumentParser(prog="bench/run --hardware", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", "--seconds", type=float, default=60, help="measuring window per program (default 60)")
    parser.add_argument("--keepalived", default=os.environ.get("BENCH_KEEPALIVED"), help="the binary (default: a release build)")
    parser.add_argument("--only", help="only the device classes containing this (hw, plughw, dmix)")
    parser.add_argument("--no-write", action="store_true", help="print, do not touch BENCHMARKS.md")
    args = parser.parse_args()

    keepalived = args.keepalived
    if not keepalived:
        subprocess.run(["swift", "build", "-c", "release", "--product", "keepalived"], cwd=ROOT, check=True)
        keepalived = os.path.join(ROOT, ".build", "release", "keepalived")
    kernel = vmrig.ensure_kernel()
    vmrig.ensure_initramfs(kernel)
    io = tempfile.mkdtemp(prefix="bench-hw-")
    env = {"KEEPALIVED": os.path.abspath(keepalived), "BENCH_SECONDS": str(args.seconds)}
    if args.only:
        env["BENCH_ONLY"] = args.only
    programs = 7 if not args.only else 3
    result = vmrig.run_vm([os.path.join(ROOT, "bench", "hardware-guest.py")], devices="hda", power_save=1,
                          env=env, io_dir=io, timeout=200 + programs * (args.seconds + 30),
                          on_line=lambda line: print(f"  [vm] {line}", flush=True))
    path = os.path.join(io, "results.json")
    if result.exit_code != 0 or not os.path.exists(path):
        print(f"bench/run --hardware: the guest failed (exit {result.exit_code}); log in {io}", file=sys.stderr)
        return 1
    with open(path) as f:
        results = json.load(f)
    section = table(results, args.seconds, kernel.version)
    print(section)
    if args.no_write:
        return 0
    text = open(BENCHMARKS).read() if os.path.exists(BENCHMARKS) else "# Benchmarks\n"
    block = f"{BEGIN_MARK}\n{section}{END_MARK}\n"
    if BEGIN_MARK in text and END_MARK in text:
        text = text.split(BEGIN_MARK)[0] + block + text.split(END_MARK, 1)[1].lstrip("\n")
    else:
        text = text.rstrip("\n") + "\n\n## Hardware: the kernel's own HDA driver in a VM\n\n" + block
    with open(BENCHMARKS, "w") as f:
        f.write(text)
    print(f"wrote {BENCHMARKS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
