#!/usr/bin/env python3
"""Lightness benchmark: keepalived against aplay, sox's play and mpv on real sound servers.

Run through bench/run; BENCHMARKS.md explains what is measured and how. Standard library only.
"""

import argparse
import concurrent.futures
import datetime
import glob
import json
import os
import platform
import select
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "bench", "out")
CACHE = os.path.join(OUT, "cache")
SCRATCH = os.path.join(ROOT, ".build-bench")
BENCHMARKS = os.path.join(ROOT, "BENCHMARKS.md")
BEGIN_MARK = "<!-- bench/run results: begin (generated, do not edit by hand) -->"
END_MARK = "<!-- bench/run results: end -->"

REQUIRED_PACKAGES = [
    "alsa-utils", "libasound2-plugins", "pulseaudio", "pulseaudio-utils",
    "pipewire", "pipewire-bin", "wireplumber", "dbus-daemon", "sox", "libsox-fmt-alsa",
]

SAMPLE_EVERY = 0.25      # s between /proc samples during the window (catches threads that exit)
PLAY_TIMEOUT = 10.0      # s to wait for a stream to show up playing
STOP_TIMEOUT = 5.0       # s to wait for a process to go after SIGTERM before SIGKILL

T0 = time.monotonic()


def log(message):
    print(f"[bench {time.monotonic() - T0:7.1f}s] {message}", file=sys.stderr, flush=True)


def die(message, code=1):
    log(f"error: {message}")
    sys.exit(code)


def clean_env(**extra):
    """The caller's environment without anything that could point a client at another server."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PULSE_", "PIPEWIRE_", "ALSA_", "AUDIO"))}
    for key in ("XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS", "XDG_CONFIG_HOME", "DISPLAY", "WAYLAND_DISPLAY"):
        env.pop(key, None)
    env["LANG"] = env.get("LANG", "C.UTF-8")
    env.update(extra)
    return env


def _die_with_parent():
    """Runs in each long-lived child before exec: SIGTERM it if the benchmark itself dies."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def output(cmd, env=None, timeout=20):
    try:
        return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout).stdout
    except (OSError, subprocess.SubprocessError):
        return None


# ---------------------------------------------------------------------------------------------
# Preparation: packages, the PipeWire ALSA plug-in, the keepalived build


def dpkg_installed(package):
    text = output(["dpkg-query", "-W", "-f=${Status}", package])
    return text is not None and "install ok installed" in text


def dpkg_version(package):
    text = output(["dpkg-query", "-W", "-f=${Version}", package])
    return text.strip() if text and text.strip() else None


def apt(args, check=True):
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    result = subprocess.run(sudo + ["apt-get"] + args, env=env, capture_output=True, text=True)
    if check and result.returncode != 0:
        raise RuntimeError(f"apt-get {' '.join(args)} failed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return result.returncode == 0


def ensure_packages(want_mpv):
    """Installs what is missing; returns a note when mpv cannot be installed."""
    missing = [p for p in REQUIRED_PACKAGES if not dpkg_installed(p)]
    if missing:
        log(f"installing {' '.join(missing)} (apt-get --no-install-recommends)")
        apt(["update", "-qq"])
        apt(["install", "-y", "-qq", "--no-install-recommends"] + missing)
    if not want_mpv:
        return "mpv skipped (--no-mpv)"
    if shutil.which("mpv"):
        return None
    log("installing mpv (apt-get install --no-install-recommends mpv)")
    try:
        if not apt(["install", "-y", "-qq", "--no-install-recommends", "mpv"], check=False):
            apt(["update", "-qq"], check=False)
            apt(["install", "-y", "-qq", "--no-install-recommends", "mpv"])
    except RuntimeError as error:
        return f"mpv skipped: it could not be installed ({str(error).splitlines()[0]})"
    return None if shutil.which("mpv") else "mpv skipped: installed but not on PATH"


def pipewire_alsa_plugin():
    """Unpacks pipewire-alsa (which conflicts with pulseaudio on Debian 12) into the cache.

    Returns (directory, pcm plug-in path, ctl plug-in path, 50-pipewire.conf path, version).
    """
    root = os.path.join(CACHE, "pipewire-alsa")
    found = glob.glob(os.path.join(root, "usr/lib/*/alsa-lib/libasound_module_pcm_pipewire.so"))
    if not found:
        os.makedirs(CACHE, exist_ok=True)
        for old in glob.glob(os.path.join(CACHE, "pipewire-alsa_*.deb")):
            os.remove(old)
        # The plug-in must match the installed libpipewire; ask for that version first.
        version = dpkg_version("libpipewire-0.3-0")
        attempts = ([f"pipewire-alsa={version}"] if version else []) + ["pipewire-alsa"]
        done = False
        for refresh in (False, True):
            if refresh:
                apt(["update", "-qq"], check=False)
            for spec in attempts:
                # (As root, apt warns that it downloads unsandboxed: harmless.)
                result = subprocess.run(["apt-get", "download", spec], cwd=CACHE, capture_output=True, text=True)
                if result.returncode == 0:
                    done = True
                    break
            if done:
                break
        debs = glob.glob(os.path.join(CACHE, "pipewire-alsa_*.deb"))
        if not done or not debs:
            raise RuntimeError("apt-get download pipewire-alsa failed")
        shutil.rmtree(root, ignore_errors=True)
        subprocess.run(["dpkg-deb", "-x", debs[0], root], check=True)
        found = glob.glob(os.path.join(root, "usr/lib/*/alsa-lib/libasound_module_pcm_pipewire.so"))
        if not found:
            raise RuntimeError(f"{debs[0]} has no libasound_module_pcm_pipewire.so")
    pcm = found[0]
    ctl = os.path.join(os.path.dirname(pcm), "libasound_module_ctl_pipewire.so")
    conf = os.path.join(root, "usr/share/alsa/alsa.conf.d/50-pipewire.conf")
    debs = glob.glob(os.path.join(CACHE, "pipewire-alsa_*.deb"))
    version = os.path.basename(debs[0]).split("_")[1] if debs else "?"
    return root, pcm, ctl, conf, version


def build_keepalived():
    """swift build -c release --static-swift-stdlib into .build-bench; returns the binary's path."""
    if not shutil.which("swift"):
        die("no swift on PATH (see README.md)", 69)
    command = ["swift", "build", "-c", "release", "--static-swift-stdlib", "--product", "keepalived",
               "--scratch-path", SCRATCH]
    log(f"building: {shlex.join(command)}")
    build_log = os.path.join(OUT, "build.log")
    with open(build_log, "w") as handle:
        result = subprocess.run(command, cwd=ROOT, stdout=handle, stderr=subprocess.STDOUT)
    if result.returncode != 0:
        with open(build_log) as handle:
            tail = handle.read()[-3000:]
        die(f"build failed (full log: {build_log}):\n{tail}")
    binary = os.path.join(SCRATCH, "release", "keepalived")
    bin_path = output(command[:-2] + ["--scratch-path", SCRATCH, "--show-bin-path"], timeout=120)
    if bin_path and bin_path.strip():
        binary = os.path.join(bin_path.strip().splitlines()[-1], "keepalived")
    if not os.access(binary, os.X_OK):
        die(f"build succeeded but {binary} is missing")
    return binary


# ---------------------------------------------------------------------------------------------
# Sound servers. Each keeps a monitor that timestamps every change, so that "playing" is dated
# when the server reported it, not when a poll happened to look.


class Server:
    key = ""
    title = ""
    device = ""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix=f"keepalived-bench-{self.key}.")
        os.chmod(self.dir, 0o700)
        self.env = {}
        self.processes = []          # (name, Popen) in start order
        self.condition = threading.Condition()
        self.snapshot = None         # the server's latest view: {"sink": state, "streams": [...]}
        self.snapshot_time = 0.0
        self.generation = 0
        self.monitor = None
        self.stopping = False
        self.waiters = 0             # threads in wait_for: only then does a monitor also poll

    def spawn(self, name, command, **kwargs):
        log_file = open(os.path.join(self.dir, f"{name}.log"), "w")
        process = subprocess.Popen(command, env=self.env, cwd=self.dir, stdin=subprocess.DEVNULL,
                                   stdout=kwargs.pop("stdout", log_file), stderr=log_file,
                                   preexec_fn=_die_with_parent, **kwargs)
        self.processes.append((name, process))
        return process

    def alive(self):
        dead = [name for name, process in self.processes if process.poll() is not None]
        return (not dead), dead

    def publish(self, snapshot, when):
        with self.condition:
            self.snapshot = snapshot
            self.snapshot_time = when
            self.generation += 1
            self.condition.notify_all()

    def wait_for(self, predicate, timeout):
        """Waits until predicate(snapshot) holds; returns the monotonic time the server showed it."""
        deadline = time.monotonic() + timeout
        with self.condition:
            self.waiters += 1
            try:
                while True:
                    if self.snapshot is not None and predicate(self.snapshot):
                        return self.snapshot_time
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return None
                    self.condition.wait(min(remaining, 0.5))
            finally:
                self.waiters -= 1

    @staticmethod
    def playing(pid):
        def check(snapshot):
            return snapshot["sink"] == "running" and any(
                s["running"] and (s["pid"] in (None, pid)) for s in snapshot["streams"])
        return check

    @staticmethod
    def quiet(snapshot):
        return not snapshot["streams"] and snapshot["sink"] == "suspended"

    @staticmethod
    def no_streams(snapshot):
        return not snapshot["streams"] and snapshot["sink"] != "running"

    def stop(self):
        self.stopping = True
        for name, process in reversed(self.processes):
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(3)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self.monitor:
            self.monitor.join(2)

    def cleanup(self):
        shutil.rmtree(self.dir, ignore_errors=True)


class PulseServer(Server):
    key = "pulse"
    title = "PulseAudio"
    device = "pulse"

    def start(self):
        self.env = clean_env(XDG_RUNTIME_DIR=self.dir, HOME=self.dir,
                             PULSE_SERVER=f"unix:{self.dir}/pulse/native", PULSE_RUNTIME_PATH=f"{self.dir}/pulse")
        self.command = ["pulseaudio", "-n", "--daemonize=no", "--exit-idle-time=-1", "--log-target=stderr",
                        "-L", "module-null-sink sink_name=keep",
                        "-L", "module-native-protocol-unix",
                        "-L", "module-suspend-on-idle timeout=1"]
        self.spawn("pulseaudio", self.command)
        deadline = time.monotonic() + 15
        while self.query() is None:
            ok, dead = self.alive()
            if not ok or time.monotonic() > deadline:
                raise RuntimeError(f"pulseaudio did not come up; log: {self.dir}/pulseaudio.log")
            time.sleep(0.05)
        subscriber = self.spawn("pactl-subscribe", ["pactl", "subscribe"], stdout=subprocess.PIPE)
        self.monitor = threading.Thread(target=self.watch, args=(subscriber,), daemon=True)
        self.monitor.start()
        if self.wait_for(lambda s: True, 5) is None:
            raise RuntimeError("PulseAudio monitor did not start")

    def query(self):
        sinks = output(["pactl", "-f", "json", "list", "sinks"], env=self.env, timeout=5)
        inputs = output(["pactl", "-f", "json", "list", "sink-inputs"], env=self.env, timeout=5)
        try:
            sinks, inputs = json.loads(sinks), json.loads(inputs)
        except (TypeError, ValueError):
            return None
        sink = next((s for s in sinks if s.get("name") == "keep"), None)
        if sink is None:
            return None
        streams = []
        for item in inputs:
            if item.get("sink") != sink.get("index"):
                continue
            pid = item.get("properties", {}).get("application.process.id")
            streams.append({"pid": int(pid) if pid and pid.isdigit() else None,
                            "running": not item.get("corked", False),
                            "name": item.get("properties", {}).get("application.process.binary", "?")})
        return {"sink": str(sink.get("state", "")).lower(), "streams": streams}

    def watch(self, subscriber):
        """On each sink or sink-input event (our own pactl queries only make client events), asks
        the server for its state; a change is dated by the last event read before the query."""
        stream = subscriber.stdout
        fd = stream.fileno()
        buffer = b""
        last_event = time.monotonic()
        pending = True
        next_poll = 0.0
        while not self.stopping:
            readable, _, _ = select.select([fd], [], [], 0.25)
            now = time.monotonic()
            if readable:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if b" on sink " in line or b" on sink-input " in line:
                        last_event = now
                        pending = True
            # While someone waits for a state, also poll now and then in case an event was missed;
            # in the steady state nothing runs pactl.
            if pending or (self.waiters and now >= next_poll) or self.snapshot is None:
                dated = last_event if pending else now
                pending = False
                snapshot = self.query()
                next_poll = time.monotonic() + 0.5
                if snapshot is not None and snapshot != self.snapshot:
                    self.publish(snapshot, dated)

    def versions(self):
        return {"pulseaudio": first_line(output(["pulseaudio", "--version"]))}


def start_pipewire_session(server):
    """A private session bus, PipeWire and WirePlumber, in `server`'s directory and environment."""
    bus = server.spawn("dbus-daemon", ["dbus-daemon", "--session", "--nofork", "--print-address"],
                       stdout=subprocess.PIPE)
    ready, _, _ = select.select([bus.stdout], [], [], 10)
    address = bus.stdout.readline().decode().strip() if ready else ""
    if not address:
        raise RuntimeError("dbus-daemon printed no address")
    server.env["DBUS_SESSION_BUS_ADDRESS"] = address
    server.spawn("pipewire", ["pipewire"])
    deadline = time.monotonic() + 10
    while not os.path.exists(os.path.join(server.dir, "pipewire-0")):
        if not server.alive()[0] or time.monotonic() > deadline:
            raise RuntimeError(f"pipewire did not come up; log: {server.dir}/pipewire.log")
        time.sleep(0.05)
    server.spawn("wireplumber", ["wireplumber"])


def start_pipewire_pulse(server):
    """`start_pipewire_session`, then PipeWire's pulse server (Tests/Fixtures/pipewire-pulse: Debian
    12's pipewire-pulse package conflicts with pulseaudio), with `server`'s environment a libpulse
    client's of it; returns once it answers."""
    server.env = clean_env(XDG_RUNTIME_DIR=server.dir, HOME=server.dir, PIPEWIRE_RUNTIME_DIR=server.dir,
                           PULSE_SERVER=f"unix:{server.dir}/pulse/native", PULSE_RUNTIME_PATH=f"{server.dir}/pulse")
    start_pipewire_session(server)
    server.spawn("pipewire-pulse", ["pipewire", "-c", os.path.join(ROOT, "Tests", "Fixtures", "pipewire-pulse", "pipewire-pulse.conf")])
    deadline = time.monotonic() + 10
    while output(["pactl", "info"], env=server.env, timeout=2) is None:
        if not server.alive()[0] or time.monotonic() > deadline:
            raise RuntimeError(f"PipeWire's pulse server did not answer; logs in {server.dir}")
        time.sleep(0.1)


class PipeWireServer(Server):
    key = "pipewire"
    title = "PipeWire"
    device = "pipewire"

    def __init__(self, plugin):
        super().__init__()
        self.plugin = plugin
        self.objects = {}

    def start(self):
        _, pcm, ctl, conf, _ = self.plugin
        # A private ALSA configuration: alsa.conf loads ~/.asoundrc, HOME is this directory.
        with open(conf) as handle:
            definition = handle.read()
        with open(os.path.join(self.dir, ".asoundrc"), "w") as handle:
            handle.write(f'pcm_type.pipewire {{ lib "{pcm}" }}\n')
            if os.path.exists(ctl):
                handle.write(f'ctl_type.pipewire {{ lib "{ctl}" }}\n')
            handle.write(f"# from pipewire-alsa's 50-pipewire.conf\n{definition}")
        self.env = clean_env(XDG_RUNTIME_DIR=self.dir, HOME=self.dir, PIPEWIRE_RUNTIME_DIR=self.dir)
        start_pipewire_session(self)
        monitor = self.spawn("pw-dump", ["pw-dump", "--monitor", "--no-colors"], stdout=subprocess.PIPE)
        self.monitor = threading.Thread(target=self.watch, args=(monitor,), daemon=True)
        self.monitor.start()
        # session.suspend-timeout-seconds=1 mirrors PulseAudio's module-suspend-on-idle timeout=1.
        self.sink_props = ("{ factory.name=support.null-audio-sink node.name=keep media.class=Audio/Sink "
                           "object.linger=true audio.position=[FL FR] session.suspend-timeout-seconds=1 }")
        self.command = ["pw-cli", "create-node", "adapter", self.sink_props]
        # wireplumber must be up before the sink appears, or nothing makes it the default target.
        if self.wait_for(lambda s: s.get("session", False), 15) is None:
            raise RuntimeError(f"wireplumber did not connect; log: {self.dir}/wireplumber.log")
        result = subprocess.run(self.command, env=self.env, capture_output=True, text=True, timeout=10)
        if result.returncode != 0:
            raise RuntimeError(f"pw-cli create-node failed: {result.stderr}")
        if self.wait_for(lambda s: s["sink"] is not None, 15) is None:
            raise RuntimeError("the PipeWire null sink did not appear")
        # pw-dump --monitor can miss metadata set before it bound the object: ask pw-metadata.
        deadline = time.monotonic() + 15
        while True:
            text = output(["pw-metadata", "-n", "default", "0", "default.audio.sink"], env=self.env, timeout=5) or ""
            if "default.audio.sink" in text and '"keep"' in text:
                break
            if time.monotonic() > deadline:
                raise RuntimeError("wireplumber did not make the null sink the default sink")
            time.sleep(0.1)

    def watch(self, monitor):
        """pw-dump --monitor prints one JSON array per batch of changes; each batch is dated by
        the moment its closing bracket arrives."""
        fd = monitor.stdout.fileno()
        buffer = b""
        lines = []
        while not self.stopping:
            readable, _, _ = select.select([fd], [], [], 0.25)
            if not readable:
                continue
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                break
            now = time.monotonic()
            buffer += chunk
            *complete, buffer = buffer.split(b"\n")
            changed = False
            for line in complete:
                lines.append(line)
                if line == b"]":
                    try:
                        batch = json.loads(b"\n".join(lines))
                    except ValueError:
                        batch = []
                    lines = []
                    for item in batch:
                        ident = item.get("id")
                        if "metadata" in item:
                            continue
                        elif item.get("info") is None:
                            self.objects.pop(ident, None)
                        else:
                            self.objects[ident] = item
                    changed = True
            if changed:
                snapshot = self.derive()
                if snapshot != self.snapshot:
                    self.publish(snapshot, now)

    def derive(self):
        nodes = {i: o for i, o in self.objects.items() if o.get("type", "").endswith(":Node") and o.get("info")}
        sink_id, sink_state = None, None
        for i, node in nodes.items():
            props = node["info"].get("props", {})
            if props.get("node.name") == "keep" and props.get("media.class") == "Audio/Sink":
                sink_id, sink_state = i, node["info"].get("state")
        links = [o["info"] for o in self.objects.values() if o.get("type", "").endswith(":Link") and o.get("info")]
        streams = []
        for i, node in nodes.items():
            props = node["info"].get("props", {})
            if not str(props.get("media.class", "")).startswith("Stream/Output/Audio"):
                continue
            linked = any(l.get("output-node-id") == i and l.get("input-node-id") == sink_id and l.get("state") == "active"
                         for l in links)
            pid = props.get("application.process.id")
            streams.append({"pid": int(pid) if str(pid).isdigit() else None,
                            "running": linked and node["info"].get("state") == "running",
                            "name": props.get("application.process.binary") or props.get("application.name", "?")})
        session = False
        for o in self.objects.values():
            if o.get("type", "").endswith(":Client") and o.get("info"):
                if "wireplumber" in str(o["info"].get("props", {}).get("application.name", "")).lower():
                    session = True
        return {"sink": sink_state, "streams": streams, "session": session}

    def versions(self):
        text = output(["pipewire", "--version"]) or ""
        linked = [l for l in text.splitlines() if "Linked with" in l or "Compiled with" in l]
        version = linked[-1].split()[-1] if linked else first_line(text)
        return {"pipewire": f"pipewire {version}",
                "wireplumber": first_line(output(["wireplumber", "--version"]) or "").replace("\n", " ")}


def first_line(text):
    return (text or "").strip().splitlines()[0].strip() if text and text.strip() else "?"


# ---------------------------------------------------------------------------------------------
# Per-process accounting from /proc


class Tasks:
    """Per-thread CPU time (schedstat, ns) and context switches (status), remembering threads that
    exit: a thread's last sample stands for it once it is gone."""

    def __init__(self, pid):
        self.pid = pid
        self.baseline = {}
        self.last = {}
        self.max_threads = 0

    def read(self):
        current = {}
        try:
            tids = os.listdir(f"/proc/{self.pid}/task")
        except OSError:
            return current
        for tid in tids:
            try:
                with open(f"/proc/{self.pid}/task/{tid}/schedstat") as handle:
                    cpu = int(handle.read().split()[0])
                voluntary = involuntary = 0
                name = "?"
                with open(f"/proc/{self.pid}/task/{tid}/status") as handle:
                    for line in handle:
                        if line.startswith("voluntary_ctxt_switches:"):
                            voluntary = int(line.split()[1])
                        elif line.startswith("nonvoluntary_ctxt_switches:"):
                            involuntary = int(line.split()[1])
                        elif line.startswith("Name:"):
                            name = line.split(None, 1)[1].strip() if len(line.split()) > 1 else "?"
            except (OSError, ValueError, IndexError):
                continue
            current[tid] = (cpu, voluntary, involuntary, name)
        self.last.update(current)
        self.max_threads = max(self.max_threads, len(current))
        return current

    def start_window(self):
        self.baseline = self.read()
        self.last = dict(self.baseline)
        self.window_start = time.monotonic()

    def end_window(self):
        end = self.read()
        elapsed = time.monotonic() - self.window_start
        cpu = switches = 0
        per_thread = []
        for tid, (c, v, i, name) in self.last.items():
            b = self.baseline.get(tid, (0, 0, 0, name))
            dc, dv, di = c - b[0], v - b[1], i - b[2]
            cpu += dc
            switches += dv + di
            per_thread.append({"tid": int(tid), "name": name, "cpu_ns": dc, "voluntary": dv, "involuntary": di,
                               "exited": tid not in end, "new": tid not in self.baseline})
        return {"seconds": elapsed, "cpu_ns": cpu, "switches": switches, "threads": len(end),
                "max_threads": self.max_threads, "exited_threads": sum(1 for t in per_thread if t["exited"]),
                "per_thread": sorted(per_thread, key=lambda t: -t["cpu_ns"])}


def memory(pid):
    fields = {}
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile", "RssShmem", "Threads"):
                    fields[key] = int(value.split()[0])
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                if key in ("Private_Dirty", "Private_Clean", "Pss", "Shared_Clean", "Shared_Dirty"):
                    fields[key] = int(value.split()[0])
    except (OSError, ValueError, IndexError):
        pass
    return fields


# ---------------------------------------------------------------------------------------------
# Contenders


def contenders(keepalived, device, mpv_available):
    pcm = ["-f", "S16_LE", "-c", "1", "-r", "44100"]   # keepalived's own stream format
    rows = [
        ("keepalived", "keepalived", [keepalived, "run", "-d", device], {}),
        ("aplay", "aplay (default buffer)", ["aplay", "-q", "-D", device, "-t", "raw"] + pcm + ["/dev/zero"], {}),
        ("aplay-tuned", "aplay (4 s buffer, 2 s period)",
         ["aplay", "-q", "-D", device, "-t", "raw"] + pcm + ["--buffer-time=4000000", "--period-time=2000000", "/dev/zero"], {}),
        ("sox", "sox play (sine)", ["play", "-q", "-n", "synth", "sine", "440", "vol", "0.01"],
         {"AUDIODRIVER": "alsa", "AUDIODEV": device}),
    ]
    if mpv_available:
        rows.append(("mpv", "mpv (anoisesrc)",
                     ["mpv", "--no-config", "--no-terminal", "--no-video", "--ao=alsa", f"--audio-device=alsa/{device}",
                      "av://lavfi:anoisesrc=a=0.01"], {}))
    return rows


def wait_gone(process, timeout):
    """Returns the monotonic time the process exited (None if it did not within timeout)."""
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):
        pidfd = None
    deadline = time.monotonic() + timeout
    if pidfd is not None:
        try:
            poller = select.poll()
            poller.register(pidfd, select.POLLIN)
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                if poller.poll(remaining * 1000):
                    return time.monotonic()
        finally:
            os.close(pidfd)
    while time.monotonic() < deadline:
        if process.poll() is not None:
            return time.monotonic()
        time.sleep(0.001)
    return None


def run_one(server, key, label, command, extra_env, seconds, warmup, log_dir):
    result = {"key": key, "label": label, "command": command, "env": extra_env, "server": server.key}
    ok, dead = server.alive()
    if not ok:
        result["error"] = f"sound server process(es) gone: {', '.join(dead)}"
        return result
    # Every program starts on the same quiet sink: no stream left, sink suspended again.
    settle = time.monotonic()
    if server.wait_for(Server.quiet, 10) is None:
        result["note"] = "sink was not suspended at launch"
    result["settle_s"] = time.monotonic() - settle
    env = dict(server.env, **extra_env)
    log_path = os.path.join(log_dir, f"{server.key}-{key}.log")
    with open(log_path, "w") as log_file:
        launched = time.monotonic()
        process = subprocess.Popen(command, env=env, cwd=server.dir, stdin=subprocess.DEVNULL,
                                   stdout=log_file, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent)
    result["pid"] = process.pid
    tasks = Tasks(process.pid)
    playing_at = None
    deadline = launched + PLAY_TIMEOUT
    while playing_at is None and time.monotonic() < deadline:
        playing_at = server.wait_for(server.playing(process.pid), min(0.2, max(0.0, deadline - time.monotonic())))
        if playing_at is None and process.poll() is not None:
            break
    if playing_at is None:
        result["error"] = (f"exited with status {process.poll()} before playing" if process.poll() is not None
                           else f"not playing after {PLAY_TIMEOUT:.0f} s")
    else:
        result["launch_to_playing_ms"] = max(0.0, (playing_at - launched) * 1000)
    if process.poll() is None:
        # The window opens at the warm-up mark (or when it plays, if later) and closes at N.
        window_open = max(launched + warmup, playing_at or launched + warmup)
        window_close = max(launched + seconds, window_open + 0.5)
        time.sleep(max(0.0, window_open - time.monotonic()))
        tasks.start_window()
        while True:
            remaining = window_close - time.monotonic()
            if remaining <= 0:
                break
            time.sleep(min(SAMPLE_EVERY, remaining))
            tasks.read()
        result["memory"] = memory(process.pid)
        window = tasks.end_window()
        result["window"] = window
        result["cpu_ms"] = window["cpu_ns"] / 1e6
        result["cpu_us_per_s"] = window["cpu_ns"] / 1e3 / window["seconds"]
        result["wakeups_per_s"] = window["switches"] / window["seconds"]
        result["threads"] = window["threads"]
        still = server.wait_for(server.playing(process.pid), 0)
        if playing_at is not None and still is None:
            result["note"] = (result.get("note", "") + "; " if result.get("note") else "") + "not playing at the end of the window"
        signalled = time.monotonic()
        process.send_signal(signal.SIGTERM)
        gone = wait_gone(process, STOP_TIMEOUT)
        if gone is None:
            process.kill()
            result["stop_to_gone_ms"] = None
            result["note"] = (result.get("note", "") + "; " if result.get("note") else "") + f"still running {STOP_TIMEOUT:.0f} s after SIGTERM (killed)"
        else:
            result["stop_to_gone_ms"] = (gone - signalled) * 1000
    process.wait()
    result["exit"] = process.returncode
    # Leave the server as we found it before the next program.
    server.wait_for(Server.no_streams, 5)
    return result


# ---------------------------------------------------------------------------------------------
# Report


COLUMNS = [
    # (title, result key or function, format, lower is better)
    ("launch→playing ms", "launch_to_playing_ms", "{:.0f}"),
    ("CPU ms in window", "cpu_ms", "{:.2f}"),
    ("CPU µs/s", "cpu_us_per_s", "{:.1f}"),
    ("wakeups/s", "wakeups_per_s", "{:.2f}"),
    ("threads", "threads", "{:d}"),
    ("VmRSS MB", lambda r: kb_to_mb(r.get("memory", {}).get("VmRSS")), "{:.2f}"),
    ("RssAnon MB", lambda r: kb_to_mb(r.get("memory", {}).get("RssAnon")), "{:.2f}"),
    ("Private_Dirty MB", lambda r: kb_to_mb(r.get("memory", {}).get("Private_Dirty")), "{:.2f}"),
    ("stop→gone ms", "stop_to_gone_ms", "{:.1f}"),
]


def kb_to_mb(kb):
    return None if kb is None else kb * 1024 / 1e6


def value(result, column):
    getter = column[1]
    return getter(result) if callable(getter) else result.get(getter)


def fmt(number, pattern):
    if number is None:
        return "—"
    try:
        return pattern.format(number)
    except (ValueError, TypeError):
        return str(number)


def table(results):
    lines = ["| program | " + " | ".join(c[0] for c in COLUMNS) + " |",
             "|---|" + "---:|" * len(COLUMNS)]
    for r in results:
        if "error" in r and "window" not in r:
            lines.append(f"| {r['label']} | " + " | ".join("—" for _ in COLUMNS) + " |")
            continue
        label = r["label"] + (" (see note)" if r.get("error") else "")
        lines.append(f"| {label} | " + " | ".join(fmt(value(r, c), c[2]) for c in COLUMNS) + " |")
    return lines


def ratios(results):
    """keepalived / the best (lowest) other program, per figure: below 1 means keepalived is lighter."""
    keep = next((r for r in results if r["key"] == "keepalived"), None)
    others = [r for r in results if r["key"] != "keepalived" and "window" in r and not r.get("error")]
    if keep is None or "window" not in keep or not others:
        return ["(no ratios: keepalived or every other program has no measurement)"]
    lines = ["| figure | keepalived | best other | keepalived / best other |", "|---|---:|---|---:|"]
    for column in COLUMNS:
        if column[1] == "cpu_ms":
            continue
        mine = value(keep, column)
        candidates = [(value(r, column), r["label"]) for r in others if value(r, column) is not None]
        if mine is None or not candidates:
            lines.append(f"| {column[0]} | {fmt(mine, column[2])} | — | — |")
            continue
        best, who = min(candidates)
        ratio = "∞" if not best and mine else f"{(mine / best) if best else 1.0:.2f}"
        lines.append(f"| {column[0]} | {fmt(mine, column[2])} | {fmt(best, column[2])} ({who}) | {ratio} |")
    return lines


def targets(by_server):
    """One line per target: MET only when it holds on every server measured."""
    def get(results, key):
        return next((r for r in results if r["key"] == key and "window" in r and not r.get("error")), None)

    rules = []

    def wakeups(results):
        k, t = get(results, "keepalived"), get(results, "aplay-tuned")
        if not k or not t:
            return None, "no measurement"
        return k["wakeups_per_s"] <= t["wakeups_per_s"], f"{k['wakeups_per_s']:.2f} vs tuned aplay {t['wakeups_per_s']:.2f} /s"
    rules.append(("wakeups/s ≤ tuned aplay's", wakeups))

    def cpu(results):
        k, a = get(results, "keepalived"), get(results, "aplay")
        if not k or not a:
            return None, "no measurement"
        return k["cpu_us_per_s"] <= a["cpu_us_per_s"] / 2, f"{k['cpu_us_per_s']:.1f} vs ½ × default aplay {a['cpu_us_per_s'] / 2:.1f} µs/s"
    rules.append(("CPU time ≤ ½ default aplay's", cpu))

    def private(results):
        k = get(results, "keepalived")
        if not k or "RssAnon" not in k.get("memory", {}):
            return None, "no measurement"
        anon = kb_to_mb(k["memory"]["RssAnon"])
        dirty = kb_to_mb(k["memory"].get("Private_Dirty", k["memory"]["RssAnon"]))
        return max(anon, dirty) < 1.6, f"RssAnon {anon:.2f} MB, Private_Dirty {dirty:.2f} MB (both must be < 1.60)"
    rules.append(("private memory < 1.6 MB", private))

    def rss(results):
        k = get(results, "keepalived")
        aplays = [r for r in (get(results, "aplay"), get(results, "aplay-tuned")) if r and "VmRSS" in r.get("memory", {})]
        if not k or not aplays or "VmRSS" not in k.get("memory", {}):
            return None, "no measurement"
        smallest = min(kb_to_mb(r["memory"]["VmRSS"]) for r in aplays)
        mine = kb_to_mb(k["memory"]["VmRSS"])
        return mine <= smallest, f"{mine:.2f} vs aplay {smallest:.2f} MB"
    rules.append(("VmRSS ≤ aplay's", rss))

    def launch(results):
        k = next((r for r in results if r["key"] == "keepalived"), None)
        if not k or k.get("launch_to_playing_ms") is None:
            return False if k else None, "never seen playing" if k else "no measurement"
        return k["launch_to_playing_ms"] < 200, f"{k['launch_to_playing_ms']:.0f} ms (must be < 200)"
    rules.append(("launch-to-playing < 200 ms", launch))

    def stop(results):
        k = get(results, "keepalived")
        if not k or k.get("stop_to_gone_ms") is None:
            return (False, "did not exit within 5 s") if k else (None, "no measurement")
        return k["stop_to_gone_ms"] < 300, f"{k['stop_to_gone_ms']:.1f} ms (must be < 300)"
    rules.append(("stop-to-gone < 300 ms", stop))

    lines = []
    for title, rule in rules:
        verdicts, details = [], []
        for server, results in by_server:
            broken = next((r for r in results if r["key"] == "keepalived" and r.get("error")), None)
            if broken:
                verdicts.append(False)
                details.append(f"{server.title} keepalived: {broken['error']}")
                continue
            verdict, detail = rule(results)
            verdicts.append(verdict)
            details.append(f"{server.title} {detail}")
        met = all(v is True for v in verdicts) and verdicts
        word = "MET" if met else ("MISSED" if any(v is False for v in verdicts) else "UNMEASURED")
        lines.append(f"{word}: {title} — " + "; ".join(details))
    return lines


def machine():
    model = "?"
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": model, "cores": os.cpu_count(), "kernel": platform.release(), "os": os_name()}


def os_name():
    try:
        with open("/etc/os-release") as handle:
            for line in handle:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "?"


def versions(plugin_version, keepalived):
    def version_of(command, marker=None):
        text = output(command) or ""
        for line in text.splitlines():
            if marker is None or marker in line:
                words = [w for w in line.replace(",", " ").split() if any(ch.isdigit() for ch in w)]
                if words:
                    return words[0].lstrip("v")
        return "?"

    swift = output(["swift", "--version"]) or ""
    swift_line = next((l.strip() for l in swift.splitlines() if "Swift version" in l), "?")
    return {
        "swift": swift_line.replace("Swift version ", ""),
        "alsa-lib": dpkg_version("libasound2") or "?",
        "libasound2-plugins (pulse plug-in)": dpkg_version("libasound2-plugins") or "?",
        "pulseaudio": version_of(["pulseaudio", "--version"]),
        "pipewire": version_of(["pipewire", "--version"], "Linked with"),
        "wireplumber": version_of(["wireplumber", "--version"], "Linked with"),
        "pipewire-alsa (unpacked)": plugin_version or "not used",
        "aplay": version_of(["aplay", "--version"]),
        "sox": version_of(["sox", "--version"]),
        "mpv": version_of(["mpv", "--version"], "mpv") if shutil.which("mpv") else "not installed",
        "keepalived binary": describe_binary(keepalived),
    }


def describe_binary(path):
    try:
        size = os.path.getsize(path)
    except OSError:
        return path
    libs = output(["ldd", path]) or ""
    swift_libs = [l.split()[0] for l in libs.splitlines() if "swift" in l.lower() or "Foundation" in l]
    linkage = "Swift runtime dynamically linked: " + ", ".join(swift_libs) if swift_libs else "Swift runtime statically linked"
    shown = os.path.relpath(path, ROOT) if path.startswith(ROOT + "/") else path
    return f"{shown}, {size / 1e6:.1f} MB on disk, {linkage}"


def render(args, by_server, notes, info, started, finished):
    lines = []
    lines.append(f"Run {started} → {finished}, N = {args.seconds:g} s per program, steady-state window "
                 f"from t = {args.warmup:g} s to t = N (CPU, wakeups); memory and threads read at t = N.")
    lines.append("")
    lines.append(f"Command: `{info['command']}`")
    lines.append("")
    m = info["machine"]
    lines.append(f"Machine: {m['cpu']}, {m['cores']} cores, kernel {m['kernel']}, {m['os']}; "
                 f"load average at start {info['load_start']}, at end {info['load_end']}.")
    lines.append("")
    lines.append("Versions: " + "; ".join(f"{k}: {v}" for k, v in info["versions"].items()) + ".")
    lines.append("")
    for server, results in by_server:
        lines.append(f"### {server.title}")
        lines.append("")
        lines.extend(table(results))
        lines.append("")
        keep = next((r for r in results if r["key"] == "keepalived" and "window" in r), None)
        if keep:
            seconds = keep["window"]["seconds"]
            busy = [t for t in keep["window"]["per_thread"] if t["voluntary"] + t["involuntary"] or t["cpu_ns"]]
            idle = len(keep["window"]["per_thread"]) - len(busy)
            parts = [f"{t['name']} {(t['voluntary'] + t['involuntary']) / seconds:.2f}/s "
                     f"({t['involuntary'] / seconds:.2f} involuntary), {t['cpu_ns'] / 1e3 / seconds:.1f} µs/s"
                     for t in busy]
            lines.append("- keepalived by thread (wakeups, CPU): " + "; ".join(parts)
                         + (f"; {idle} more thread(s) never ran" if idle else ""))
        for r in results:
            extra = []
            if r.get("error"):
                extra.append(f"**{r['error']}**")
            if r.get("note"):
                extra.append(r["note"])
            if r.get("window", {}).get("exited_threads"):
                extra.append(f"{r['window']['exited_threads']} thread(s) exited during the window (counted to their last sample)")
            if r["key"] == "keepalived" and r.get("exit") not in (0, None) and "stop_to_gone_ms" in r:
                extra.append(f"exit status {r['exit']} after SIGTERM (expected 0)")
            if extra:
                lines.append(f"- {r['label']}: " + "; ".join(extra))
        lines.append("")
    lines.append("Programs, as run (each with `-d`/`-D`/`AUDIODEV`/`--audio-device` set to the server's ALSA device):")
    lines.append("")
    seen = set()
    for server, results in by_server:
        for r in results:
            if r["key"] in seen:
                continue
            seen.add(r["key"])
            env = " ".join(f"{k}={v}" for k, v in r["env"].items())
            command = shlex.join(r["command"]).replace(ROOT + "/", "")
            lines.append(f"- {r['label']}: `{(env + ' ') if env else ''}{command}`")
    lines.append("")
    lines.append("Sound servers, as started:")
    lines.append("")
    for server, _ in by_server:
        lines.append(f"- {server.title}: `{shlex.join(server.command)}`"
                     + (" (after `dbus-daemon --session`, `pipewire`, `wireplumber`)" if server.key == "pipewire" else ""))
    lines.append("")
    for note in notes:
        lines.append(f"Note: {note}")
        lines.append("")
    lines.append("### keepalived / best other program")
    lines.append("")
    for server, results in by_server:
        lines.append(f"{server.title}:")
        lines.append("")
        lines.extend(ratios(results))
        lines.append("")
    lines.append("### Targets")
    lines.append("")
    measured = [server.title for server, _ in by_server]
    if len(measured) < 2:
        lines.append(f"This run measured {', '.join(measured) or 'no server'} only; a target holds only when "
                     "it is met on PulseAudio and on PipeWire in the same run.")
    else:
        lines.append("MET only when it holds on both servers in this run.")
    lines.append("")
    for line in targets(by_server):
        lines.append(f"- {line}")
    return "\n".join(lines) + "\n"


def write_benchmarks(section):
    text = ""
    if os.path.exists(BENCHMARKS):
        with open(BENCHMARKS) as handle:
            text = handle.read()
    block = f"{BEGIN_MARK}\n{section}{END_MARK}\n"
    if BEGIN_MARK in text and END_MARK in text:
        before = text.split(BEGIN_MARK)[0]
        after = text.split(END_MARK, 1)[1].lstrip("\n")
        text = before + block + (("\n" + after) if after else "")
    else:
        text = (text.rstrip("\n") + "\n\n## Results\n\n" if text else "# Benchmarks\n\n## Results\n\n") + block
    with open(BENCHMARKS, "w") as handle:
        handle.write(text)


def replace_section(begin, end, heading, section):
    """Puts `section` between BENCHMARKS.md's `begin` and `end` markers (an extra run's own
    section: --sinks, --rates), or appends it under `heading` when the markers are not there."""
    with open(BENCHMARKS) as handle:
        text = handle.read()
    block = f"{begin}\n{section}{end}"
    if begin in text and end in text:
        text = text[:text.index(begin)] + block + text[text.index(end) + len(end):]
    else:
        text = text.rstrip("\n") + f"\n\n## {heading}\n\n" + block + "\n"
    with open(BENCHMARKS, "w") as handle:
        handle.write(text)


# ---------------------------------------------------------------------------------------------


def parse_args():
    parser = argparse.ArgumentParser(
        prog="bench/run",
        description="Benchmark keepalived against aplay, sox's play and mpv on a private PulseAudio "
                    "null sink, then a private PipeWire null sink (see BENCHMARKS.md).")
    parser.add_argument("-n", "--seconds", type=float, default=None,
                        help="seconds each program runs (env BENCH_SECONDS; default 60, 2 with --smoke)")
    parser.add_argument("--warmup", type=float, default=None,
                        help="seconds after launch before the CPU/wakeup window opens (env BENCH_WARMUP; "
                             "default 2, at most N/2)")
    parser.add_argument("--smoke", action="store_true",
                        help="quick check: N=2, PulseAudio only, results to bench/out/ only")
    parser.add_argument("--servers", default=None,
                        help="comma-separated: pulse,pipewire (default both; pulse with --smoke)")
    parser.add_argument("--only", default=None,
                        help="comma-separated subset of keepalived,aplay,aplay-tuned,sox,mpv")
    parser.add_argument("--keepalived", metavar="PATH", default=os.environ.get("BENCH_KEEPALIVED"),
                        help="use this keepalived binary instead of building one (env BENCH_KEEPALIVED)")
    parser.add_argument("--sequential", action="store_true",
                        help="measure the servers one after the other instead of side by side (twice as long)")
    parser.add_argument("--no-mpv", action="store_true", help="do not install or run mpv")
    parser.add_argument("--no-install", action="store_true", help="never run apt-get")
    parser.add_argument("--write", dest="write", action="store_true", default=None,
                        help="write the results into BENCHMARKS.md (the default without --smoke)")
    parser.add_argument("--no-write", dest="write", action="store_false",
                        help="print only (results still go to bench/out/)")
    args = parser.parse_args()
    if args.seconds is None:
        env = os.environ.get("BENCH_SECONDS")
        args.seconds = float(env) if env else (2.0 if args.smoke else 60.0)
    if args.warmup is None:
        env = os.environ.get("BENCH_WARMUP")
        args.warmup = float(env) if env else 2.0
    if args.seconds <= 0:
        parser.error("N must be positive")
    args.warmup = min(args.warmup, args.seconds / 2)
    if args.servers is None:
        args.servers = "pulse" if args.smoke else "pulse,pipewire"
    args.servers = [s.strip() for s in args.servers.split(",") if s.strip()]
    for s in args.servers:
        if s not in ("pulse", "pipewire"):
            parser.error(f"unknown server {s!r}")
    if args.only:
        args.only = [s.strip() for s in args.only.split(",") if s.strip()]
    if args.write is None:
        args.write = not args.smoke
    return args


def main():
    args = parse_args()
    os.makedirs(OUT, exist_ok=True)
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    log_dir = os.path.join(OUT, f"run-{stamp}")
    os.makedirs(log_dir, exist_ok=True)
    load_start = " ".join(f"{x:.2f}" for x in os.getloadavg())
    if os.getloadavg()[0] >= 0.5:
        log(f"warning: load average {load_start}: other work shares the CPUs; figures will be noisy")

    notes = []
    if args.no_install:
        mpv_note = None if (shutil.which("mpv") and not args.no_mpv) else "mpv skipped (not installed, --no-install)"
        if args.no_mpv:
            mpv_note = "mpv skipped (--no-mpv)"
    else:
        mpv_note = ensure_packages(not args.no_mpv and (not args.only or "mpv" in args.only))
    if mpv_note and (not args.only or "mpv" in args.only):
        notes.append(mpv_note)
        log(mpv_note)
    mpv_available = mpv_note is None and shutil.which("mpv") is not None

    plugin = None
    if "pipewire" in args.servers:
        try:
            plugin = pipewire_alsa_plugin()
        except (RuntimeError, subprocess.SubprocessError, OSError) as error:
            die(f"cannot get the PipeWire ALSA plug-in: {error}")

    keepalived = os.path.abspath(args.keepalived) if args.keepalived else build_keepalived()
    log(f"keepalived: {keepalived}")
    # A freshly linked binary sits in the page cache as dirty pages until written back, and smaps
    # then counts its mapped text as Private_Dirty (megabytes of it). Write it back first.
    os.sync()

    programs = [c[0] for c in contenders(keepalived, "x", mpv_available) if not args.only or c[0] in args.only]
    runs = len(programs) * len(args.servers)
    rounds = runs if args.sequential else len(programs)
    log(f"{runs} runs of {args.seconds:g} s ({', '.join(programs)} on {', '.join(args.servers)}"
        f"{'' if args.sequential or len(args.servers) == 1 else ', the servers side by side'}): "
        f"about {rounds * (args.seconds + 1.5) / 60:.1f} min")

    by_server = []
    live = []

    def interrupted(signum, frame):
        raise KeyboardInterrupt

    def shut(server):
        server.stop()
        # Keep the servers' own logs next to the results.
        for name in os.listdir(server.dir) if os.path.isdir(server.dir) else []:
            if name.endswith(".log"):
                shutil.copy(os.path.join(server.dir, name), os.path.join(log_dir, f"{server.key}-server-{name}"))
        server.cleanup()
        live.remove(server)

    def measure(key):
        """One server: start it, run every program on it one after another, stop it."""
        server = PulseServer() if key == "pulse" else PipeWireServer(plugin)
        live.append(server)
        log(f"starting {server.title} in {server.dir}")
        try:
            server.start()
        except (RuntimeError, OSError, subprocess.SubprocessError) as error:
            raise RuntimeError(f"{server.title} did not start: {error} "
                               f"(server logs: {os.path.relpath(log_dir, ROOT)})") from error
        results = []
        for program, label, command, extra_env in contenders(keepalived, server.device, mpv_available):
            if args.only and program not in args.only:
                continue
            log(f"{server.title}: {label} for {args.seconds:g} s")
            result = run_one(server, program, label, command, extra_env, args.seconds, args.warmup, log_dir)
            results.append(result)
            summary = ", ".join(f"{c[0]} {fmt(value(result, c), c[2])}" for c in COLUMNS)
            log(f"  {server.title}, {label}: {result.get('error') or summary}")
        ok, dead = server.alive()
        if not ok:
            notes.append(f"{server.title}: {', '.join(dead)} exited during the run (something else killed it?); "
                         "figures measured after that are not valid")
            log(notes[-1])
        shut(server)
        return server, results

    signal.signal(signal.SIGTERM, interrupted)
    try:
        if args.sequential or len(args.servers) == 1:
            by_server = [measure(key) for key in args.servers]
        else:
            # Each server has its own sink, runtime directory and programs, and every figure is
            # the program's own (per-thread kernel counters, its own stream's events): the two
            # sequences run side by side, one per core, so the default run fits in 10 minutes.
            with concurrent.futures.ThreadPoolExecutor(max_workers=len(args.servers)) as pool:
                futures = [pool.submit(measure, key) for key in args.servers]
                by_server = [future.result() for future in futures]
    except RuntimeError as error:
        die(str(error))
    except KeyboardInterrupt:
        log("interrupted; stopping the sound servers")
        sys.exit(130)
    finally:
        for server in list(live):
            shut(server)

    finished = datetime.datetime.now().astimezone().strftime("%H:%M:%S")
    invocation = "bench/run" + ("" if len(sys.argv) == 1 else " " + shlex.join(sys.argv[1:]))
    env_used = " ".join(f"{k}={os.environ[k]}" for k in ("BENCH_SECONDS", "BENCH_WARMUP", "BENCH_KEEPALIVED")
                        if k in os.environ)
    info = {
        "command": (env_used + " " if env_used else "") + invocation,
        "machine": machine(),
        "versions": versions(plugin[4] if plugin else None, keepalived),
        "load_start": load_start,
        "load_end": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }
    section = render(args, by_server, notes, info, started, finished)
    print()
    print(section)
    with open(os.path.join(log_dir, "results.md"), "w") as handle:
        handle.write(section)
    with open(os.path.join(log_dir, "results.json"), "w") as handle:
        json.dump({"info": info, "args": vars(args), "notes": notes,
                   "servers": {s.key: r for s, r in by_server}}, handle, indent=1, default=str)
    if args.write:
        write_benchmarks(section)
        log(f"wrote {os.path.relpath(BENCHMARKS, ROOT)}; raw data in {os.path.relpath(log_dir, ROOT)}")
    else:
        log(f"results in {os.path.relpath(log_dir, ROOT)} (BENCHMARKS.md untouched)")


if __name__ == "__main__":
    main()
