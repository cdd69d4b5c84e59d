#!/usr/bin/env python3
"""Sink outputs: what `keepalived run --all` costs per sink it keeps awake through a sound server.

A private PulseAudio, then PipeWire (with WirePlumber) behind its pulse server, each with 1 and
then 3 sinks that carry a sound card's properties (so a selection picks them; a bare null sink is
virtual and never picked). keepalived plays into each through a libpulse stream of its own
behind an in-process ALSA PCM (output `pulse:DEVICE=<sink>`, one stream per sink); the yardstick
is aplay through ALSA's pulse plug-in with its fewest wakeups (4 s buffer, 2 s periods) on one
such sink. Run through `bench/run --sinks`; it writes its own
section of BENCHMARKS.md. Standard library only; the measuring is bench.py's.
"""

import argparse
import concurrent.futures
import json
import datetime
import os
import shlex
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

BEGIN_MARK = "<!-- bench/run --sinks results: begin (generated, do not edit by hand) -->"
END_MARK = "<!-- bench/run --sinks results: end -->"

# name, profile, card: the properties a card's sink has (Tests/IntegrationTests/SoundServerSinksTests).
SINKS = [("tv", "hdmi-stereo", 5), ("speakers", "analog-stereo", 6), ("dac", "analog-stereo", 7)]


def sink_module(name, profile, card):
    props = (f"device.class=sound device.api=alsa alsa.card={card} device.profile.name={profile} "
             f"device.description={name}")
    return f"module-null-sink sink_name={name} sink_properties='{props}'"


class SinksPulse(bench.PulseServer):
    """PulseAudio with `count` card-like sinks; its state is theirs, not the null sink's."""
    title = "PulseAudio"

    def __init__(self, count):
        super().__init__()
        self.names = [s[0] for s in SINKS[:count]]
        self.key = f"pulse-{count}"

    def start(self):
        self.env = bench.clean_env(XDG_RUNTIME_DIR=self.dir, HOME=self.dir,
                                   PULSE_SERVER=f"unix:{self.dir}/pulse/native", PULSE_RUNTIME_PATH=f"{self.dir}/pulse")
        self.command = ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--log-target=stderr"]
        for sink in SINKS[:len(self.names)]:
            self.command += ["-L", sink_module(*sink)]
        self.command += ["-L", "module-native-protocol-unix", "-L", "module-suspend-on-idle timeout=1"]
        self.spawn("pulseaudio", self.command)
        self.follow()

    def follow(self):
        deadline = time.monotonic() + 15
        while self.query() is None:
            if not self.alive()[0] or time.monotonic() > deadline:
                raise RuntimeError(f"{self.title} did not show its sinks; logs in {self.dir}")
            time.sleep(0.05)
        subscriber = self.spawn("pactl-subscribe", ["pactl", "subscribe"], stdout=subprocess.PIPE)
        self.monitor = threading.Thread(target=self.watch, args=(subscriber,), daemon=True)
        self.monitor.start()
        if self.wait_for(lambda s: True, 5) is None:
            raise RuntimeError(f"{self.title} monitor did not start")

    def query(self):
        sinks = bench.output(["pactl", "-f", "json", "list", "sinks"], env=self.env, timeout=5)
        inputs = bench.output(["pactl", "-f", "json", "list", "sink-inputs"], env=self.env, timeout=5)
        try:
            sinks, inputs = json.loads(sinks), json.loads(inputs)
        except (TypeError, ValueError):
            return None
        by_index = {s.get("index"): s.get("name") for s in sinks}
        states = {s.get("name"): str(s.get("state", "")).lower() for s in sinks if s.get("name") in self.names}
        if len(states) != len(self.names):
            return None
        streams = []
        for item in inputs:
            sink = by_index.get(item.get("sink"))
            if sink not in self.names:
                continue
            pid = item.get("properties", {}).get("application.process.id")
            streams.append({"pid": int(pid) if pid and pid.isdigit() else None, "sink": sink,
                            "running": not item.get("corked", False)})
        values = set(states.values())
        overall = values.pop() if len(values) == 1 else "mixed"
        return {"sink": overall, "streams": streams, "names": list(self.names)}

    @staticmethod
    def playing(pid):
        """Every sink running, each with a running stream of the program's."""
        def check(snapshot):
            return snapshot["sink"] == "running" and all(
                any(s["running"] and s["pid"] in (None, pid) and s["sink"] == name for s in snapshot["streams"])
                for name in snapshot["names"])
        return check


class SinksPipeWirePulse(SinksPulse):
    """PipeWire and WirePlumber, with PipeWire's pulse server (Tests/Fixtures/pipewire-pulse:
    Debian 12's pipewire-pulse package conflicts with pulseaudio); the sinks made through it."""
    title = "PipeWire (pulse server)"

    def __init__(self, count):
        super().__init__(count)
        self.key = f"pipewire-{count}"

    def start(self):
        bench.start_pipewire_pulse(self)
        for sink in SINKS[:len(self.names)]:
            words = shlex.split(sink_module(*sink))
            # pipewire-pulse may refuse a connection right after its first answer (seen once
            # in ten runs): a few tries, then the error.
            for attempt in range(5):
                result = subprocess.run(["pactl", "load-module"] + words, env=self.env, capture_output=True, text=True, timeout=10)
                if result.returncode == 0 or "Connection refused" not in result.stderr:
                    break
                time.sleep(0.2 * (attempt + 1))
            if result.returncode != 0:
                raise RuntimeError(f"pactl load-module {words[0]} failed: {result.stderr}")
        self.follow()

    def versions(self):
        text = bench.output(["pipewire", "--version"]) or ""
        return {"pipewire": bench.first_line(text)}


def contenders(keepalived, count):
    plural = "s" if count > 1 else ""
    rows = [("keepalived", f"keepalived --all, {count} sink{plural}", [keepalived, "run", "--all"], {}),
            # A card output's buffer, the sinks' default before SinkDefaults: what the 4 s saves.
            ("keepalived-2s", f"keepalived --all --buffer 2, {count} sink{plural}", [keepalived, "run", "--all", "--buffer", "2"], {})]
    if count == 1:
        # The README's first command on a desktop: ALSA's `default` is the pulse plug-in there
        # (Debian's hook while a server answers), which keepalived plays through a stream of
        # its own that follows the default sink (the only sink here).
        rows.append(("keepalived-default", "keepalived -d default (the default sink)", [keepalived, "run", "-d", "default"], {}))
        rows.append(("aplay-tuned", "aplay (4 s buffer, 2 s period) on the sink",
                     ["aplay", "-q", "-D", f"pulse:DEVICE={SINKS[0][0]}", "-t", "raw", "-f", "S16_LE", "-c", "1", "-r", "44100",
                      "--buffer-time=4000000", "--period-time=2000000", "/dev/zero"], {}))
    return rows


def median_run(results):
    """The run with the median CPU, carrying every run's CPU and wakeups; the first failed run if
    any failed (a failure is never averaged away)."""
    failed = [r for r in results if "error" in r]
    if failed:
        return failed[0]
    ordered = sorted(results, key=lambda r: r["cpu_us_per_s"])
    row = dict(ordered[(len(ordered) - 1) // 2])
    row["runs"] = [{"cpu_us_per_s": r["cpu_us_per_s"], "wakeups_per_s": r["wakeups_per_s"]} for r in results]
    row["wakeups_per_s"] = sorted(r["wakeups_per_s"] for r in results)[(len(results) - 1) // 2]
    return row


def spread(row, key):
    values = [r[key] for r in row.get("runs", [])]
    return f" ({min(values):.{1 if 'cpu' in key else 2}f}–{max(values):.{1 if 'cpu' in key else 2}f})" if len(values) > 1 else ""


def render(results, info):
    lines = [f"Run {info['started']} → {info['finished']}, N = {info['seconds']:g} s per program, steady-state "
             f"window from t = {info['warmup']:g} s to t = N; each program run {info['repeat']} times, interleaved: "
             f"the median run, the range of all runs in parentheses.", "",
             f"Command: `{info['command']}`", "",
             f"Machine: {info['machine']}; load average at start {info['load_start']}, at end {info['load_end']}.", ""]
    verdicts = []
    for title, rows in results:
        lines += [f"### {title}", "",
                  "| program | sinks | launch→playing ms | CPU µs/s | per sink | wakeups/s | per sink | threads | RssAnon MB |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        baseline = next((r for r in rows if r["key"] == "aplay-tuned" and "error" not in r), None)
        for r in rows:
            if "error" in r:
                lines.append(f"| {r['label']} | {r['sinks']} | {r['error']} | | | | | | |")
                continue
            anon = bench.kb_to_mb(r.get("memory", {}).get("RssAnon"))
            lines.append(f"| {r['label']} | {r['sinks']} | {r.get('launch_to_playing_ms', 0):.0f} | {r['cpu_us_per_s']:.1f}{spread(r, 'cpu_us_per_s')} | "
                         f"{r['cpu_us_per_s'] / r['sinks']:.1f} | {r['wakeups_per_s']:.2f}{spread(r, 'wakeups_per_s')} | {r['wakeups_per_s'] / r['sinks']:.2f} | "
                         f"{r['threads']} | {anon:.2f} |")
        lines.append("")
        if baseline:
            for r in rows:
                if not r["key"].startswith("keepalived") or "error" in r:
                    continue
                wake = r["wakeups_per_s"] / r["sinks"] <= baseline["wakeups_per_s"]
                cpu = r["cpu_us_per_s"] / r["sinks"] <= baseline["cpu_us_per_s"]
                if r["key"] == "keepalived":
                    verdicts.append((title, r["sinks"], wake, cpu))
                if r["key"] == "keepalived-default":
                    half_wake = r["wakeups_per_s"] <= baseline["wakeups_per_s"] / 2
                    half_cpu = r["cpu_us_per_s"] <= baseline["cpu_us_per_s"] / 2
                    lines.append(f"- {r['label']} against half of tuned aplay's (issue 36): wakeups "
                                 f"{r['wakeups_per_s']:.2f} vs {baseline['wakeups_per_s'] / 2:.2f} ({'MET' if half_wake else 'NOT MET'}), "
                                 f"CPU {r['cpu_us_per_s']:.1f} vs {baseline['cpu_us_per_s'] / 2:.1f} µs/s ({'MET' if half_cpu else 'NOT MET'})")
                lines.append(f"- {r['label']}, per sink against tuned aplay: wakeups "
                             f"{r['wakeups_per_s'] / r['sinks']:.2f} vs {baseline['wakeups_per_s']:.2f} ({'MET' if wake else 'NOT MET'}), "
                             f"CPU {r['cpu_us_per_s'] / r['sinks']:.1f} vs {baseline['cpu_us_per_s']:.1f} µs/s ({'MET' if cpu else 'NOT MET'})")
            lines.append("")
    missed = [f"{title}, {count} sink{'s' if count > 1 else ''} ({' and '.join(what for what, ok in (('wakeups', w), ('CPU', c)) if not ok)})"
              for title, count, w, c in verdicts if not (w and c)]
    target = ("Target (issue 25), for keepalived as it runs by default: per sink, wakeups and CPU no more than "
              "tuned aplay's on the same server: ")
    if verdicts and not missed:
        lines.append(target + "**MET** on every server and sink count measured in this run.")
    else:
        lines.append(target + "**NOT MET** in this run for " + ("; ".join(missed) if missed else "want of a baseline") + ".")
    return "\n".join(lines) + "\n"


def write_section(section):
    bench.replace_section(BEGIN_MARK, END_MARK, "Sink outputs (`bench/run --sinks`)", section)


def main():
    parser = argparse.ArgumentParser(prog="bench/run --sinks", description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--seconds", type=float, default=float(os.environ.get("BENCH_SECONDS", 60)))
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--servers", default="pulse,pipewire", help="comma-separated: pulse,pipewire")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each program, interleaved; its row is the median run")
    parser.add_argument("--keepalived", metavar="PATH", default=os.environ.get("BENCH_KEEPALIVED"))
    parser.add_argument("--no-write", dest="write", action="store_false", help="print only")
    args = parser.parse_args()
    args.warmup = min(args.warmup, args.seconds / 2)
    keepalived = os.path.abspath(args.keepalived) if args.keepalived else bench.build_keepalived()
    os.sync()
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_dir = os.path.join(bench.OUT, f"sinks-{stamp}")
    os.makedirs(log_dir, exist_ok=True)
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    def measure(key):
        rows = []
        title = None
        for count in (1, 3):
            server = SinksPulse(count) if key == "pulse" else SinksPipeWirePulse(count)
            title = server.title
            bench.log(f"starting {server.title} with {count} sink(s) in {server.dir}")
            try:
                server.start()
                # A one-sink difference is a few µs/s, of the order of one run's noise: every
                # program runs --repeat times, interleaved with the others (so a slow minute
                # of the machine falls on all of them), and its row is its median run.
                runs = {}
                for attempt in range(args.repeat):
                    for program, label, command, extra in contenders(keepalived, count):
                        bench.log(f"{server.title}: {label} for {args.seconds:g} s (run {attempt + 1} of {args.repeat})")
                        result = bench.run_one(server, program, label, command, extra, args.seconds, args.warmup, log_dir)
                        result["sinks"] = count
                        runs.setdefault(program, []).append(result)
                        bench.log(f"  {result['error']}" if "error" in result
                                  else f"  {result['cpu_us_per_s']:.1f} µs/s, {result['wakeups_per_s']:.2f} wakeups/s")
                rows += [median_run(results) for results in runs.values()]
            finally:
                server.stop()
                server.cleanup()
        return title, rows

    # One server per core, side by side, as bench/run does: every figure is the program's own.
    keys = [s.strip() for s in args.servers.split(",") if s.strip()]
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(keys)) as pool:
        results = list(pool.map(measure, keys))
    info = {"started": started, "finished": datetime.datetime.now().astimezone().strftime("%H:%M:%S"),
            "seconds": args.seconds, "warmup": args.warmup, "repeat": args.repeat,
            "command": "bench/run --sinks" + ("" if len(sys.argv) == 1 else " " + shlex.join(sys.argv[1:])),
            "machine": bench.machine(), "load_start": load_start,
            "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg())}
    section = render(results, info)
    print(section)
    with open(os.path.join(log_dir, "results.md"), "w") as handle:
        handle.write(section)
    # Every program's per-thread figures, for finding where the time goes.
    with open(os.path.join(log_dir, "results.json"), "w") as handle:
        json.dump(results, handle, indent=1, default=str)
    if args.write:
        write_section(section)
        bench.log(f"wrote {os.path.relpath(bench.BENCHMARKS, bench.ROOT)}")


if __name__ == "__main__":
    main()
