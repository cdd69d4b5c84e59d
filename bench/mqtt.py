#!/usr/bin/env python3
"""MQTT's cost: keepalived with `--mqtt` off and on (connected to Debian's mosquitto, nothing
changing), the same output otherwise (ALSA's `null` device, paced by keepalived's own clock).

For each mode, R rounds of a fresh `keepalived run` (the release binary, bench.build_keepalived),
settled 3 s (with MQTT, connected and its state published), then measured over N seconds from
/proc: threads, resident and proportional memory, CPU time and context switches (each a wakeup)
of the whole process and of the MQTT thread (`keepalive-mqtt`) alone, and whether libmosquitto is
mapped at all. The issue's bounds: off, nothing added (no thread, no library, no wakeup); on and
idle, no more than the protocol's keep-alive ping (a PINGREQ and its PINGRESP a minute).

Run through `bench/run --mqtt [-n SECONDS] [--rounds R]`; writes its own section of BENCHMARKS.md.
Standard library only; needs mosquitto and libmosquitto1 (scripts/setup --test installs them).
"""

import argparse
import datetime
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

BEGIN_MARK = "<!-- bench/run --mqtt results: begin (generated, do not edit by hand) -->"
END_MARK = "<!-- bench/run --mqtt results: end -->"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_broker(scratch):
    port = free_port()
    conf = os.path.join(scratch, "mosquitto.conf")
    with open(conf, "w") as handle:
        handle.write(f"listener {port} 127.0.0.1\nallow_anonymous true\npersistence false\n"
                     + ("user root\n" if os.getuid() == 0 else ""))
    broker = subprocess.Popen(["/usr/sbin/mosquitto", "-c", conf], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return broker, port
        time.sleep(0.05)
    bench.die("mosquitto did not listen within 10 s")


def measure(binary, scratch, seconds, port):
    sock = os.path.join(scratch, f"k-{time.monotonic_ns()}.sock")
    log = os.path.join(scratch, "keepalived.log")
    command = [binary, "run", "-d", "null", "--socket", sock]
    if port:
        command += ["--mqtt", f"mqtt://127.0.0.1:{port}", "--mqtt-prefix", "keepalived/bench"]
    with open(log, "w") as handle:
        process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT, env=bench.clean_env())
    try:
        deadline = time.monotonic() + 10
        wanted = "MQTT: connected to the broker" if port else "playing device=null"
        while time.monotonic() < deadline and wanted not in open(log).read():
            time.sleep(0.05)
        if wanted not in open(log).read():
            bench.die(f"keepalived did not log '{wanted}' within 10 s:\n{open(log).read()[-2000:]}")
        time.sleep(3)
        tasks = bench.Tasks(process.pid)
        tasks.start_window()
        time.sleep(seconds)
        window = tasks.end_window()
        memory = bench.memory(process.pid)
        with open(f"/proc/{process.pid}/maps") as handle:
            mapped = "libmosquitto" in handle.read()
        mqtt = [t for t in window["per_thread"] if t["name"] == "keepalive-mqtt"]
        for thread in window["per_thread"]:
            bench.log(f"  {thread['name']}: {(thread['voluntary'] + thread['involuntary']) / window['seconds']:.2f} wakeups/s, "
                      f"{thread['cpu_ns'] / 1e6 / window['seconds']:.3f} ms/s")
        return {
            "threads": window["threads"], "rss": memory.get("VmRSS", 0), "pss": memory.get("Pss", 0),
            "private_dirty": memory.get("Private_Dirty", 0),
            "cpu_ms_per_s": window["cpu_ns"] / 1e6 / window["seconds"],
            "wakeups_per_s": window["switches"] / window["seconds"],
            "mqtt_wakeups_per_min": (sum(t["voluntary"] + t["involuntary"] for t in mqtt) / window["seconds"] * 60) if mqtt else None,
            "mqtt_cpu_ms_per_min": (sum(t["cpu_ns"] for t in mqtt) / 1e6 / window["seconds"] * 60) if mqtt else None,
            "libmosquitto_mapped": mapped,
        }
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def median(rows, key):
    values = [row[key] for row in rows if row[key] is not None]
    return statistics.median(values) if values else None


def render(results, seconds, rounds, versions):
    def fmt(value, digits=1):
        return "n/a" if value is None else f"{value:.{digits}f}"
    lines = [BEGIN_MARK, "",
             f"Measured {datetime.date.today().isoformat()} with `bench/run --mqtt -n {seconds} --rounds {rounds}`"
             f" ({versions}); medians of {rounds} rounds of {seconds} s, each on a fresh `keepalived run -d null`.", "",
             "| MQTT | threads | VmRSS (KiB) | PSS (KiB) | private dirty (KiB) | CPU (ms/s) | wakeups/s (whole process) | MQTT thread: wakeups/min | MQTT thread: CPU (ms/min) | libmosquitto mapped |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for label, rows in results:
        lines.append(f"| {label} | {fmt(median(rows, 'threads'), 0)} | {fmt(median(rows, 'rss'), 0)} | {fmt(median(rows, 'pss'), 0)} | "
                     f"{fmt(median(rows, 'private_dirty'), 0)} | {fmt(median(rows, 'cpu_ms_per_s'), 3)} | {fmt(median(rows, 'wakeups_per_s'), 2)} | "
                     f"{fmt(median(rows, 'mqtt_wakeups_per_min'), 2)} | {fmt(median(rows, 'mqtt_cpu_ms_per_min'), 3)} | "
                     f"{'yes' if any(r['libmosquitto_mapped'] for r in rows) else 'no'} |")
    lines += ["", END_MARK]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--seconds", type=int, default=120, help="seconds per round (default 120: two keep-alive pings)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--binary", help="a keepalived binary instead of building the release one")
    parser.add_argument("--no-write", action="store_true", help="print the section, leave BENCHMARKS.md alone")
    args = parser.parse_args()
    for tool in ("/usr/sbin/mosquitto",):
        if not os.access(tool, os.X_OK):
            bench.die(f"{tool} is missing: sudo apt install mosquitto libmosquitto1 (scripts/setup --test)", 69)
    binary = args.binary or bench.build_keepalived()
    scratch = tempfile.mkdtemp(prefix="keepalived-bench-mqtt.")
    broker, port = start_broker(scratch)
    try:
        off, on = [], []
        for round_ in range(args.rounds):
            bench.log(f"round {round_ + 1}/{args.rounds}: MQTT off, {args.seconds} s")
            off.append(measure(binary, scratch, args.seconds, None))
            bench.log(f"round {round_ + 1}/{args.rounds}: MQTT on, connected and idle, {args.seconds} s")
            on.append(measure(binary, scratch, args.seconds, port))
    finally:
        broker.terminate()
        broker.wait(timeout=10)
        shutil.rmtree(scratch, ignore_errors=True)
    versions = f"mosquitto {bench.dpkg_version('mosquitto') or '?'}, libmosquitto1 {bench.dpkg_version('libmosquitto1') or '?'}"
    section = render([("off", off), ("on, connected, nothing changing", on)], args.seconds, args.rounds, versions)
    print(section)
    if args.no_write:
        return
    path = os.path.join(bench.ROOT, "BENCHMARKS.md")
    text = open(path).read()
    if BEGIN_MARK in text:
        text = text[:text.index(BEGIN_MARK)] + section + text[text.index(END_MARK) + len(END_MARK):]
    else:
        text = text.rstrip("\n") + "\n\n## MQTT: what `--mqtt` costs (`bench/run --mqtt`)\n\n" + section + "\n"
    with open(path, "w") as handle:
        handle.write(text)
    bench.log(f"wrote {path}")


if __name__ == "__main__":
    main()
