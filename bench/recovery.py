#!/usr/bin/env python3
"""Recovery: how soon keepalived plays again after each kind of fault of its device.

The integration tests (InterruptionTests) check the shape of every recovery (in place or reopened,
the retries) and bound it only by the docs' requirement (2 s); how fast a recovery is on a quiet
machine is measured here, where a rerun can compare it (CONTRIBUTING, "What a test may bound in
time"). The device is the tests' fault-injecting ALSA plug-in (Tests/Fixtures/faulty-pcm), loaded
by the real alsa-lib into the release binary: it consumes audio in real time, logs every call with
its CLOCK_MONOTONIC time, and fails on command. Each fault is made N times, each time on a
`keepalived run -d faulty` of its own after 0.5 s of steady playback (a fault within the retry
policy's stable period of the last continues that one's backoff, by design), and measured twice:
  - the device's downtime: from the fault (the failing call; the device coming back, for a wait)
    to the first write that went through after it, both as the device logged them;
  - keepalived's own, from its `recovered` line.
Run through `bench/run --recovery`; it writes its own section of BENCHMARKS.md. Standard library
only; needs a C compiler and libasound2-dev (what the tests need) to build the plug-in.
"""

import argparse
import datetime
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

BEGIN_MARK = "<!-- bench/run --recovery results: begin (generated, do not edit by hand) -->"
END_MARK = "<!-- bench/run --recovery results: end -->"
PLUGIN = os.path.join(bench.ROOT, "Tests", "Fixtures", "faulty-pcm")

# (label, keepalived's reason, extra arguments, how the fault is made, where the downtime starts)
FAULTS = [
    ("underrun (`fail-write EPIPE`)", "underrun", [], "fail-write EPIPE", "fault"),
    ("suspend (`fail-write ESTRPIPE`)", "suspended", [], "fail-write ESTRPIPE", "fault"),
    ("sound server gone (`fail-write EIO`)", "server-gone", ["--buffer", "0.4"], "fail-write EIO", "fault"),
    ("unknown error (`fail-write EACCES`)", "unknown", [], "fail-write EACCES", "fault"),
    ("silent stall (`stall`), from the stall", "stalled", ["--buffer", "0.2", "--retry-max", "0.2"], "stall", "stalled"),
    ("unplugged (`vanish`), from the device coming back", "unplugged", ["--retry-max", "0.2"], "vanish", "appear"),
]


class Device:
    """The plug-in built into a scratch directory, a HOME whose .asoundrc defines `faulty`, and its
    state directory (events.log, control)."""

    def __init__(self, scratch):
        self.dir = scratch
        self.home = os.path.join(scratch, "home")
        self.state = os.path.join(scratch, "state")
        os.makedirs(self.home)
        library_dir = os.path.join(scratch, "plugin")
        result = subprocess.run([os.path.join(PLUGIN, "build.sh"), library_dir], capture_output=True, text=True)
        if result.returncode != 0:
            bench.die(f"cannot build the faulty-pcm plug-in (a C compiler and libasound2-dev are needed):\n{result.stderr}", 69)
        with open(os.path.join(self.home, ".asoundrc"), "w") as handle:
            handle.write(f'pcm_type.faulty {{ lib "{library_dir}/libasound_module_pcm_faulty.so" }}\n'
                         f'pcm.faulty {{ type faulty state "{self.state}" }}\n')
        self.env = bench.clean_env(HOME=self.home, XDG_RUNTIME_DIR=scratch, KEEPALIVED_SOCKET=os.path.join(scratch, "k.sock"))

    def control(self, command):
        """Drops a command for the plug-in (atomically, as it asks); returns CLOCK_MONOTONIC ns."""
        staging = os.path.join(self.state, "control.tmp")
        with open(staging, "w") as handle:
            handle.write(command + "\n")
        sent = time.monotonic_ns()
        os.rename(staging, os.path.join(self.state, "control"))
        return sent

    def events(self):
        """[(ns, name, args, pid, handle)] from events.log."""
        try:
            with open(os.path.join(self.state, "events.log")) as handle:
                lines = handle.read().splitlines()
        except FileNotFoundError:
            return []
        events = []
        for line in lines:
            words = line.split()
            if len(words) < 3 or not words[0].isdigit():
                continue
            fields = dict(word.split("=", 1) for word in words if "=" in word and word.split("=", 1)[0] in ("pid", "h"))
            args = [word for word in words[2:] if not (word.startswith("pid=") or word.startswith("h="))]
            events.append((int(words[0]), words[1], args, fields.get("pid"), fields.get("h")))
        return events


def until(predicate, timeout, step=0.005):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = predicate()
        if found:
            return found
        time.sleep(step)
    return None


def stop(process):
    """SIGTERM, then SIGKILL after 5 s: what a benchmark leaves running spoils the next row."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def recovered_lines(log_path, reason):
    with open(log_path, errors="replace") as handle:
        text = handle.read()
    downtimes = []
    for line in text.splitlines():
        if " recovered " in line and f"reason={reason}" in line:
            match = re.search(r"downtime=([0-9.]+)s", line)
            if match:
                downtimes.append(float(match.group(1)) * 1000)
    return downtimes


def measure(device, keepalived, fault, repeats, log_dir):
    """`repeats` faults of one kind, each on a keepalived of its own after 0.5 s of steady
    playback: a fault within `RetryPolicy.stablePeriod` (10 s) of the last one would continue its
    backoff (50 ms, 100 ms, … up to --retry-max), which is by design, not a recovery's speed.
    Returns ([device ms], [keepalived ms])."""
    label, reason, arguments, command, start = fault
    device_ms, reported_ms = [], []
    for repeat in range(repeats):
        log_path = os.path.join(log_dir, f"keepalived-{reason}-{repeat + 1}.log")
        seen = len(device.events())
        with open(log_path, "w") as log:
            daemon = subprocess.Popen([keepalived, "run", "-d", "faulty"] + arguments, env=device.env, stdout=log,
                                      stderr=subprocess.STDOUT, preexec_fn=bench._die_with_parent)
        try:
            if not until(lambda: any(e[1] == "write" for e in device.events()[seen:]), 10):
                raise RuntimeError(f"keepalived never wrote to the device; log: {log_path}")
            time.sleep(0.5)  # steady playback before the fault
            seen = len(device.events())
            if start == "appear":
                device.control(command)
                if not until(lambda: sum(e[1] == "open-refused" for e in device.events()[seen:]) >= 3, 10):
                    raise RuntimeError("opens were not refused while the device was gone")
                began = device.control("appear")
            else:
                device.control(command)
                began = None

            def first_write_after():
                events = device.events()[seen:]
                marks = [i for i, e in enumerate(events) if e[1] == start]
                if began is None and not marks:
                    return None
                since = began if began is not None else events[marks[0]][0]
                after = marks[0] if marks else 0
                if start == "stalled":
                    # A stalled handle still takes writes while its buffer has room: the audio is
                    # back with the first write of the handle opened after it.
                    opens = [i for i, e in enumerate(events) if i > after and e[1] == "open"]
                    if not opens:
                        return None
                    after = opens[0]
                writes = [e for e in events[after:] if e[1] == "write" and e[0] > since]
                return (since, writes[0][0]) if writes else None

            got = until(first_write_after, 10)
            if not got:
                raise RuntimeError(f"{label}: no write after the fault within 10 s; log: {log_path}")
            device_ms.append((got[1] - got[0]) / 1e6)
            if not until(lambda: recovered_lines(log_path, reason), 10, 0.02):
                raise RuntimeError(f"{label}: no recovered line with reason={reason}; log: {log_path}")
            reported_ms.append(recovered_lines(log_path, reason)[0])
        finally:
            stop(daemon)
    return device_ms, reported_ms


def measure_server_restart(keepalived, repeats, log_dir):
    """A private PulseAudio restarted `repeats` times under `keepalived run -d pulse`: from the new
    server's socket appearing to keepalived's stream on its sink again (listed by `pactl`, polled),
    and keepalived's own `recovered` downtime (from the loss)."""
    scratch = tempfile.mkdtemp(prefix="keepalived-recovery-pulse-")
    env = bench.clean_env(XDG_RUNTIME_DIR=scratch, HOME=scratch, PULSE_SERVER=f"unix:{scratch}/pulse/native",
                          PULSE_RUNTIME_PATH=f"{scratch}/pulse", KEEPALIVED_SOCKET=os.path.join(scratch, "k.sock"))
    socket_path = os.path.join(scratch, "pulse", "native")
    command = ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--log-target=stderr",
               "-L", "module-null-sink sink_name=keep", "-L", "module-native-protocol-unix"]
    server_log = open(os.path.join(log_dir, "pulseaudio.log"), "w")

    def start_server():
        return subprocess.Popen(command, env=env, cwd=scratch, stdin=subprocess.DEVNULL, stdout=server_log, stderr=server_log,
                                preexec_fn=bench._die_with_parent)

    def inputs():
        text = bench.output(["pactl", "list", "short", "sink-inputs"], env=env, timeout=2)
        return [line for line in (text or "").splitlines() if line.strip()]

    log_path = os.path.join(log_dir, "keepalived-server-gone.log")
    server = start_server()
    daemon = None
    device_ms = []
    try:
        if not until(lambda: bench.output(["pactl", "info"], env=env, timeout=2), 15, 0.05):
            raise RuntimeError(f"pulseaudio did not come up; log: {server_log.name}")
        with open(log_path, "w") as log:
            daemon = subprocess.Popen([keepalived, "run", "-d", "pulse"], env=env, stdout=log, stderr=subprocess.STDOUT,
                                      preexec_fn=bench._die_with_parent)
        if not until(lambda: len(inputs()) == 1, 15, 0.05):
            raise RuntimeError(f"keepalived's stream did not reach the sink; log: {log_path}")
        for _ in range(repeats):
            time.sleep(0.5)
            server.terminate()
            server.wait(timeout=10)
            if os.path.exists(socket_path):
                os.unlink(socket_path)
            server = start_server()
            if not until(lambda: os.path.exists(socket_path), 15, 0.001):
                raise RuntimeError("the restarted pulseaudio made no socket")
            appeared = time.monotonic()
            if not until(lambda: len(inputs()) == 1, 15, 0.005):
                raise RuntimeError(f"keepalived's stream did not come back; log: {log_path}")
            device_ms.append((time.monotonic() - appeared) * 1000)
            count = len(device_ms)
            if not until(lambda: len(recovered_lines(log_path, "server-gone")) >= count, 10, 0.02):
                raise RuntimeError(f"no recovered line with reason=server-gone; log: {log_path}")
        return device_ms, recovered_lines(log_path, "server-gone")[:repeats]
    finally:
        for process in (daemon, server):
            if process is not None:
                stop(process)
        server_log.close()
        shutil.rmtree(scratch, ignore_errors=True)


def percentile(values, fraction):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(fraction * (len(ordered) - 1))))]


def render(rows, info):
    lines = [
        f"Run {info['started']} → {info['finished']}; {info['repeats']} faults per row, each on a `keepalived run -d "
        "faulty` of its own (the tests' fault-injecting plug-in, Tests/Fixtures/faulty-pcm, loaded by the real alsa-lib) "
        "after 0.5 s of steady playback: a fault within 10 s of the last continues that one's backoff, by design. The "
        "PulseAudio row restarts one server under one keepalived, 0.5 s apart.", "",
        f"Command: `{info['command']}`; keepalived: {info['keepalived']}", "",
        f"Machine: {info['machine']['cpu']}, {info['machine']['cores']} cores, {info['machine']['os']}, kernel "
        f"{info['machine']['kernel']}; load average at start {info['load_start']}, at end {info['load_end']}.", "",
        "| fault | device's downtime, ms: median | p90 | max | keepalived's `recovered` downtime, ms: median | max |",
        "| --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for label, device_ms, reported_ms in rows:
        lines.append(f"| {label} | {statistics.median(device_ms):.1f} | {percentile(device_ms, 0.9):.1f} | {max(device_ms):.1f} | "
                     f"{statistics.median(reported_ms):.1f} | {max(reported_ms):.1f} |")
    lines += [
        "",
        "The device's downtime runs from the failing call (the stall; the device coming back, for an unplug) to the "
        "first write that went through after it. keepalived's starts at the failing call as it saw it, or at the first "
        "refused open of a wait, which is why an unplug's is the whole time the device was gone. For the PulseAudio "
        "restart the first column runs from the new server's socket to keepalived's stream listed on its sink (the "
        "server's own start, and `pactl`'s, are not keepalived's); keepalived's own runs from when its playback thread "
        "saw the stream fail, which can be up to a sleep (at most a period) after its connection saw the server go.",
        "",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(prog="bench/run --recovery", description=__doc__.split("\n\n")[0])
    parser.add_argument("-r", "--repeats", type=int, default=20, help="faults of each kind (default 20)")
    parser.add_argument("--keepalived", metavar="PATH", default=os.environ.get("BENCH_KEEPALIVED"),
                        help="use this keepalived binary instead of building one (env BENCH_KEEPALIVED)")
    parser.add_argument("--only", default=None, help="comma-separated: " + ",".join(f[1] for f in FAULTS) + ",pulseaudio")
    parser.add_argument("--no-write", dest="write", action="store_false", help="print only")
    args = parser.parse_args()
    if args.repeats < 1:
        bench.die("--repeats takes a positive whole number", 64)
    faults = FAULTS
    if args.only:
        wanted = args.only.split(",")
        unknown = [w for w in wanted if w not in {f[1] for f in FAULTS} | {"pulseaudio"}]
        if unknown:
            bench.die(f"--only: no fault named {', '.join(unknown)}; use " + ",".join(f[1] for f in FAULTS) + ",pulseaudio", 64)
        faults = [f for f in FAULTS if f[1] in wanted]
    keepalived = os.path.abspath(args.keepalived) if args.keepalived else bench.build_keepalived()
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    log_dir = os.path.join(bench.OUT, "recovery")
    os.makedirs(log_dir, exist_ok=True)
    rows = []
    with tempfile.TemporaryDirectory(prefix="keepalived-recovery-") as scratch:
        for fault in faults:
            device = Device(os.path.join(scratch, fault[1]))
            device_ms, reported_ms = measure(device, keepalived, fault, args.repeats, log_dir)
            bench.log(f"{fault[1]}: device {[round(v, 1) for v in device_ms]}, keepalived {[round(v, 1) for v in reported_ms]}")
            rows.append((fault[0], device_ms, reported_ms))
    if not args.only or "pulseaudio" in args.only.split(","):
        device_ms, reported_ms = measure_server_restart(keepalived, args.repeats, log_dir)
        bench.log(f"pulseaudio restarted: stream back {[round(v, 1) for v in device_ms]}, keepalived {[round(v, 1) for v in reported_ms]}")
        rows.append(("PulseAudio restarted under `-d pulse`, from its socket's appearance to keepalived's stream on its sink (`pactl`, polled)",
                     device_ms, reported_ms))
    info = {"started": started, "finished": datetime.datetime.now().astimezone().strftime("%H:%M:%S"),
            "load_start": load_start, "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "machine": bench.machine(), "repeats": args.repeats, "keepalived": bench.describe_binary(keepalived),
            "command": "bench/run --recovery" + ("" if len(sys.argv) == 1 else " " + shlex.join(sys.argv[1:]))}
    section = render(rows, info)
    print(section)
    if args.write:
        bench.replace_section(BEGIN_MARK, END_MARK, "Recovery: how soon keepalived plays again after a fault (`bench/run --recovery`)", section)


if __name__ == "__main__":
    main()
