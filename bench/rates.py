#!/usr/bin/env python3
"""Rate switching beside keepalived: how soon a user's track gets its own rate on a PipeWire sink.

A private PipeWire with `default.clock.allowed-rates = [ 44100 48000 ]`, WirePlumber and PipeWire's
pulse server (Tests/Fixtures/pipewire-pulse), with one null sink. Tracks of 1 s alternate between
44.1 and 48 kHz (paplay, the user's player); for each, the time from launching the player to the
sink showing the track's rate (`pactl list short sinks`, polled), first with nothing else on the
sink (suspended between tracks: what PipeWire does alone), then beside `keepalived run -d
pulse:DEVICE=<sink>` (its stream keeps the sink running). Also keepalived's private memory before
the first track and after the last: what loading libpipewire for its questions costs. Run through
`bench/run --rates`; it writes its own section of BENCHMARKS.md. Standard library only.
"""

import argparse
import datetime
import math
import os
import shlex
import statistics
import struct
import subprocess
import sys
import time
import wave

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

BEGIN_MARK = "<!-- bench/run --rates results: begin (generated, do not edit by hand) -->"
END_MARK = "<!-- bench/run --rates results: end -->"
SINK = "tv"
RATES = (44100, 48000)


class RatedPipeWire(bench.Server):
    key = "rates"
    title = "PipeWire (pulse server), allowed-rates [ 44100 48000 ]"

    def start(self):
        drop_ins = os.path.join(self.dir, ".config", "pipewire", "pipewire.conf.d")
        os.makedirs(drop_ins)
        with open(os.path.join(drop_ins, "rates.conf"), "w") as handle:
            handle.write("context.properties = { default.clock.allowed-rates = [ 44100 48000 ] }\n")
        bench.start_pipewire_pulse(self)
        # Suspended 1 s after its last stream, as bench/run's sinks are.
        props = (f"{{ factory.name=support.null-audio-sink node.name={SINK} media.class=Audio/Sink object.linger=true "
                 "audio.position=[FL FR] session.suspend-timeout-seconds=1 }")
        result = subprocess.run(["pw-cli", "create-node", "adapter", props], env=self.env, capture_output=True, text=True, timeout=10)
        if result.returncode != 0:
            raise RuntimeError(f"pw-cli create-node failed: {result.stderr}")
        if not self.until(lambda: self.sink() is not None, 10):
            raise RuntimeError("the null sink did not appear")

    def sink(self):
        """(rate, state) of the sink as pipewire-pulse shows it, or None."""
        text = bench.output(["pactl", "list", "short", "sinks"], env=self.env, timeout=2) or ""
        for line in text.splitlines():
            fields = line.split("\t")
            if len(fields) >= 5 and fields[1] == SINK and fields[3].endswith("Hz"):
                return int(fields[3].split()[-1][:-2]), fields[4]
        return None

    def inputs(self):
        text = bench.output(["pactl", "list", "short", "sink-inputs"], env=self.env, timeout=2) or ""
        return [line for line in text.splitlines() if line.strip()]

    @staticmethod
    def until(predicate, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate():
                return True
            time.sleep(0.02)
        return False

    def versions(self):
        lines = (bench.output(["pipewire", "--version"]) or "").splitlines()
        linked = next((line.split()[-1] for line in lines if line.startswith("Linked with libpipewire")), "?")
        return {"pipewire": f"PipeWire {linked}"}


def make_track(path, rate):
    with wave.open(path, "wb") as handle:
        handle.setnchannels(2)
        handle.setsampwidth(2)
        handle.setframerate(rate)
        frames = b"".join(struct.pack("<hh", v, v) for v in (int(3000 * math.sin(2 * math.pi * 440 * i / rate)) for i in range(rate)))
        handle.writeframes(frames)


def play(server, track, rate):
    """Launches paplay; returns ms until the sink shows `rate`, or None if it never did while the
    track played (the player's exit status is checked too)."""
    started = time.monotonic()
    player = subprocess.Popen(["paplay", f"--device={SINK}", track], env=server.env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    reached = None
    while player.poll() is None:
        shown = server.sink()
        if shown and shown[0] == rate:
            reached = (time.monotonic() - started) * 1000
            break
    _, error = player.communicate(timeout=10)
    if player.returncode != 0:
        raise RuntimeError(f"paplay exited {player.returncode}: {error.decode()}")
    return reached


def summary(values):
    got = [v for v in values if v is not None]
    if not got:
        return "never", "–"
    missed = len(values) - len(got)
    text = f"{statistics.median(got):.0f}"
    span = f"{min(got):.0f}–{max(got):.0f}" + (f" ({missed} of {len(values)} never)" if missed else "")
    return text, span


def render(rows, memory, info):
    lines = [
        f"Run {info['started']} → {info['finished']}; {info['tracks']} tracks of 1 s per row, alternating 44.1 and "
        "48 kHz (the first at the rate the sink is not at), each launched once the previous one's stream is gone.", "",
        f"Command: `{info['command']}`", "",
        f"Machine: {info['machine']['cpu']}, {info['machine']['cores']} cores, {info['machine']['os']}, kernel {info['machine']['kernel']}; {info['pipewire']}; load average at start {info['load_start']}, at end {info['load_end']}.", "",
        "| beside the track | tracks at their own rate | ms from launching paplay to the sink at the track's rate: median | min–max |",
        "| --- | ---: | ---: | ---: |",
    ]
    for label, values in rows:
        median, span = summary(values)
        lines.append(f"| {label} | {sum(v is not None for v in values)} of {len(values)} | {median} | {span} |")
    before, after = memory
    lines += [
        "",
        f"keepalived's private memory: RssAnon {before.get('RssAnon', 0) / 1024:.2f} → {after.get('RssAnon', 0) / 1024:.2f} MB, "
        f"Private_Dirty {before.get('Private_Dirty', 0) / 1024:.2f} → {after.get('Private_Dirty', 0) / 1024:.2f} MB "
        f"(before its first track, after its last), threads {before.get('Threads', 0)} → {after.get('Threads', 0)}.",
        "",
    ]
    return "\n".join(lines)


def write_section(section):
    bench.replace_section(BEGIN_MARK, END_MARK, "Rate switching beside keepalived (`bench/run --rates`)", section)


def main():
    parser = argparse.ArgumentParser(prog="bench/run --rates", description=__doc__.split("\n\n")[0])
    parser.add_argument("--tracks", type=int, default=20, help="tracks per row (alternating rates)")
    parser.add_argument("--keepalived", metavar="PATH", default=os.environ.get("BENCH_KEEPALIVED"))
    parser.add_argument("--no-write", dest="write", action="store_false", help="print only")
    args = parser.parse_args()
    keepalived = os.path.abspath(args.keepalived) if args.keepalived else bench.build_keepalived()
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    server = RatedPipeWire()
    rows = []
    try:
        server.start()
        tracks = {rate: os.path.join(server.dir, f"track{rate}.wav") for rate in RATES}
        for rate, path in tracks.items():
            make_track(path, rate)

        def order():
            first = RATES[1] if server.sink()[0] == RATES[0] else RATES[0]
            return [first if i % 2 == 0 else (RATES[0] if first == RATES[1] else RATES[1]) for i in range(args.tracks)]

        alone = []
        for rate in order():
            if not server.until(lambda: server.sink()[1] == "SUSPENDED" and not server.inputs(), 10):
                raise RuntimeError("the sink did not suspend between tracks")
            alone.append(play(server, tracks[rate], rate))
        rows.append(("nothing (the sink suspended between tracks)", alone))
        bench.log(f"alone: {alone}")

        socket = os.path.join(server.dir, "k.sock")
        daemon = server.spawn("keepalived", [keepalived, "run", "-d", f"pulse:DEVICE={SINK}", "--socket", socket])
        if not server.until(lambda: server.sink()[1] == "RUNNING" and len(server.inputs()) == 1, 10):
            raise RuntimeError(f"keepalived's stream did not start; log: {server.dir}/keepalived.log")
        time.sleep(1)
        before = bench.memory(daemon.pid)
        beside = []
        for rate in order():
            if not server.until(lambda: len(server.inputs()) == 1, 10):
                raise RuntimeError("the last track's stream stayed")
            beside.append(play(server, tracks[rate], rate))
        time.sleep(1)
        after = bench.memory(daemon.pid)
        rows.append(("`keepalived run -d pulse:DEVICE=tv` (the sink running)", beside))
        bench.log(f"beside keepalived: {beside}")
        info = {"started": started, "finished": datetime.datetime.now().astimezone().strftime("%H:%M:%S"),
                "load_start": load_start, "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
                "machine": bench.machine(), "pipewire": server.versions()["pipewire"], "tracks": args.tracks,
                "command": "bench/run --rates" + ("" if len(sys.argv) == 1 else " " + shlex.join(sys.argv[1:]))}
    finally:
        server.stop()
        server.cleanup()
    section = render(rows, (before, after), info)
    print(section)
    if args.write:
        write_section(section)


if __name__ == "__main__":
    main()
