"""The VM test rig: run a command inside QEMU on the Debian kernel's real sound drivers.

Standard library only.  Used by Tests/VM/vm (command line) and Tests/VM/run (the scenario
runner); other scripts can import it:

    sys.path.insert(0, "Tests/VM"); import vmrig
    result = vmrig.run_vm(["Tests/VM/scenarios/10-hda-aplay.py"], devices=["hda"],
                          power_save=1, hda_wav="/tmp/out.wav", timeout=120)
    result.exit_code     # the guest command's exit code (None: no @@EXIT, see .error)

How it works (Tests/VM/README.md has the whole story):
- The kernel is the .deb `linux-image-amd64` depends on, fetched with `apt-get download` into
  the cache (.build/vm-cache, or $KEEPALIVED_VM_CACHE), unpacked with dpkg-deb -x, depmod'ed.
- The initramfs (busybox-static, the root modules, Tests/VM/initramfs/init) is built here as a
  newc cpio and cached under a hash of everything in it.
- The guest mounts the host's / read-only over 9p with a tmpfs overlay and runs
  Tests/VM/guest/stage2 as PID 1, which loads the sound modules, waits for the cards, and runs
  the job's command (or execs systemd, which runs it as a oneshot unit).
- Serial port 0 (ttyS0) is the kernel console, kept in a log file.  Serial port 1 (ttyS1) carries
  the command's output, streamed here line by line.  Marker lines on it:
      @@EXIT n              the command's exit code
      @@HOST id verb args   a request to the host (see HOST_VERBS), answered by writing
                            io/.ack/<id> (the guest helper Tests/VM/guest/vmhost waits for it)
      @@T uptime what       a trace stamp from stage 2 (kept in the log, not streamed)
- A writable 9p share (the "io" directory, /run/vm-io in the guest, $VM_IO) passes files out.
- QMP (qmp.sock) and a human monitor (monitor.sock) sockets live in the run directory.
"""

import contextlib
import ctypes
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
VMDIR = REPO / "Tests" / "VM"
GUEST_DIR = VMDIR / "guest"
INIT_SCRIPT = VMDIR / "initramfs" / "init"
STAGE2 = GUEST_DIR / "stage2"
BUSYBOX = Path("/bin/busybox")
ROOT_MODULES = ["virtio_pci", "9pnet_virtio", "9p", "overlay"]

# Units masked in systemd mode: slow or pointless in a throwaway guest over the host's root.
DEFAULT_SYSTEMD_MASK = [
    "systemd-tmpfiles-setup.service", "systemd-tmpfiles-clean.timer", "tmp.mount",
    "getty.target", "serial-getty@ttyS0.service", "serial-getty@ttyS1.service",
    "console-getty.service", "timers.target", "apt-daily.timer", "apt-daily-upgrade.timer",
    "e2scrub_all.timer", "fstrim.timer", "man-db.timer", "dpkg-db-backup.timer",
    "ldconfig.service", "systemd-hwdb-update.service", "systemd-journal-catalog-update.service",
    "systemd-update-done.service", "systemd-firstboot.service", "systemd-machine-id-commit.service",
    "systemd-random-seed.service", "systemd-timesyncd.service", "systemd-networkd.service",
    "systemd-resolved.service", "networking.service", "ssh.service", "cron.service",
    "postgresql.service", "mariadb.service", "mysql.service", "redis-server.service",
    "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount", "sys-kernel-tracing.mount",
    "sys-kernel-config.mount", "sys-fs-fuse-connections.mount", "systemd-pstore.service",
    "systemd-update-utmp.service", "systemd-update-utmp-runlevel.service", "remote-fs.target",
    "cryptsetup.target", "veritysetup.target", "integritysetup.target", "swap.target",
    "systemd-boot-update.service", "systemd-journal-flush.service",
    # Players and a server that Debian's packages enable (scripts/setup --test installs them for
    # carry-players, which starts its own): none may take a card or a port in another scenario.
    # Avahi came with shairport-sync (its only mDNS backend): carry-players runs its own daemon.
    "snapclient.service", "snapserver.service", "squeezelite.service", "shairport-sync.service",
    "avahi-daemon.service", "avahi-daemon.socket",
]

# Generators kept in systemd mode (the others are masked: they scan the host's configuration
# over 9p, slowly, for things a test guest does not have).
SYSTEMD_GENERATORS_KEPT = {"systemd-debug-generator", "systemd-run-generator"}

DEVICE_KINDS = ("hda", "usb", "aloop", "dummy")

# How far ahead of the host's time a guest's uptime may be before its clock counts as broken. Seen
# once in a full run on a loaded host (ci2 of stop 63, keepalived-hda): the guest's uptime 136.7 s
# when its command began 17.1 s after QEMU started, 213 s at power-off after 27.5 s (its TSC
# calibrated wrong at boot, and `tsc=reliable` leaves it the clocksource), so a 15 s timeout in
# the guest lasted 2 s. A healthy guest's uptime is below the host's seconds (QEMU starts first).
FAST_CLOCK = 2.0

# What differs between the guests' architectures. arm64: QEMU's `virt` board (TCG; a Cortex-A72
# reaches init sooner than `max`), Debian's arm64 kernel, the same PCI sound devices.
ARCHES = {
    "amd64": {"qemu": "qemu-system-x86_64", "qemu_package": "qemu-system-x86", "console": "ttyS0",
              "kernel_args": ["mitigations=off", "tsc=reliable"]},
    "arm64": {"qemu": "qemu-system-aarch64", "qemu_package": "qemu-system-arm", "console": "ttyAMA0",
              "kernel_args": ["mitigations=off"], "machine": "virt", "cpu": "cortex-a72"},
}
DEVICE_MODULES = {"hda": "snd_hda_intel", "usb": "snd_usb_audio", "aloop": "snd_aloop",
                  "dummy": "snd_dummy"}


class RigError(Exception):
    """The rig itself could not do its part (no kernel, no QEMU, bad arguments)."""


# Host environment variables a guest scenario reads (see the scenarios' docstrings).
GUEST_KNOBS = ("KEEPALIVED_VM_SECONDS",)


def log(msg):
    print(f"vm: {msg}", file=sys.stderr, flush=True)


def cache_dir():
    return Path(os.environ.get("KEEPALIVED_VM_CACHE") or REPO / ".build" / "vm-cache")


@contextlib.contextmanager
def _cache_lock(name=""):
    """An exclusive lock on the cache, or on one thing in it (`name`: a kernel, a root), so that
    guests started side by side, and the run's preparation, make each thing once."""
    d = cache_dir()
    d.mkdir(parents=True, exist_ok=True)
    with open(d / (f".lock-{name}" if name else ".lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _run(cmd, **kw):
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, **kw)


# ---------------------------------------------------------------------------------------------
# Kernel


class Kernel:
    def __init__(self, version, root, arch="amd64"):
        self.version = version
        self.root = Path(root)
        self.arch = arch
        self.vmlinuz = self.root / "boot" / f"vmlinuz-{version}"
        self.modules = self.root / "lib" / "modules" / version
        # The uncompressed ELF kernel, booted through its PVH entry: saves the ~5 s the bzImage
        # spends decompressing itself under TCG.
        self.vmlinux = self.root / "vmlinux"

    @property
    def boot_image(self):
        return self.vmlinux if self.vmlinux.exists() else self.vmlinuz

    def __repr__(self):
        return f"Kernel({self.version}, {self.arch}, {self.root})"


def _foreign(arch, suite):
    """Whether (arch, suite) is not this machine's: its kernel comes from the private apt."""
    import suites
    return (arch or "amd64") != suites.host_arch() or (suite is not None and suite != suites.host_suite())


def kernel_version(arch="amd64", suite=None):
    """The kernel release to use: for this machine's suite and architecture $KEEPALIVED_VM_KERNEL,
    else what linux-image-amd64 depends on, else the newest one already in the cache; for another
    suite or architecture what its linux-image-ARCH depends on (the private apt of suites.py)."""
    if _foreign(arch, suite):
        import suites
        dep = suites.private_apt(suite or suites.host_suite()).depends(f"linux-image-{arch}", arch)
        return dep[len("linux-image-"):]
    v = os.environ.get("KEEPALIVED_VM_KERNEL")
    if v:
        return v
    try:
        out = _run(["apt-cache", "depends", "linux-image-amd64"]).stdout
        m = re.search(r"Depends:\s*linux-image-(\S+)", out)
        if m:
            return m.group(1)
    except (subprocess.CalledProcessError, FileNotFoundError):
        pass
    kroot = cache_dir() / "kernel"
    have = sorted(p.name for p in kroot.glob("*-amd64") if (p / ".ready").exists()) if kroot.exists() else []
    if have:
        return have[-1]
    raise RigError("cannot tell which kernel to use (apt-cache depends linux-image-amd64 failed "
                   "and none is cached); set KEEPALIVED_VM_KERNEL")


def ensure_kernel(version=None, arch="amd64", suite=None):
    """Download (apt-get download), unpack (dpkg-deb -x) and depmod the kernel into the cache.
    Idempotent; returns at once when it is there. `suite` None: this machine's (its apt);
    another suite or architecture: Debian's, through the private apt (suites.py)."""
    arch = arch or "amd64"
    version = version or kernel_version(arch, suite)
    kdir = cache_dir() / "kernel" / version
    k = Kernel(version, kdir, arch)
    if (kdir / ".ready").exists():
        return k
    with _cache_lock(f"kernel-{version}"):
        if (kdir / ".ready").exists():
            return k
        _unpack_kernel(k, suite if _foreign(arch, suite) else None)
    return k


def _extract_vmlinux(vmlinuz, dest):
    """Write the ELF kernel inside a bzImage (xz-, gzip- or zstd-compressed) to dest."""
    import lzma
    data = Path(vmlinuz).read_bytes()
    for magic, make in ((b"\xfd7zXZ\x00", lambda: lzma.LZMADecompressor(format=lzma.FORMAT_XZ)),
                        (b"\x1f\x8b\x08", lambda: __import__("zlib").decompressobj(31))):
        i = data.find(magic)
        while i >= 0:
            try:
                out = make().decompress(data[i:])
                if out[:4] == b"\x7fELF":
                    tmp = Path(str(dest) + ".tmp")
                    tmp.write_bytes(out)
                    tmp.rename(dest)
                    return True
            except (lzma.LZMAError, ValueError, EOFError, __import__("zlib").error):
                pass
            i = data.find(magic, i + 1)
    # zstd (Debian 13's kernels): the zstd command, when this machine has it.
    i = data.find(b"\x28\xb5\x2f\xfd")
    while i >= 0 and shutil.which("zstd"):
        r = subprocess.run(["zstd", "-dc"], input=data[i:], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        if r.stdout[:4] == b"\x7fELF":
            tmp = Path(str(dest) + ".tmp")
            tmp.write_bytes(r.stdout)
            tmp.rename(dest)
            return True
        i = data.find(b"\x28\xb5\x2f\xfd", i + 1)
    return False


def _unpack_kernel(k, suite=None):
    version, kdir = k.version, k.root
    debs = cache_dir() / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    pkg = f"linux-image-{version}"
    found = sorted(debs.glob(f"{pkg}_*.deb"))
    if not found and suite:
        import suites
        log(f"downloading {pkg} ({suite}, {k.arch}; private apt)")
        suites.private_apt(suite).download([f"{pkg}:{k.arch}"], debs)
        found = sorted(debs.glob(f"{pkg}_*.deb"))
    if not found:
        log(f"downloading {pkg} (apt-get download)")
        try:
            _run(["apt-get", "download", pkg], cwd=debs)
        except subprocess.CalledProcessError as e:
            if os.geteuid() != 0:
                raise RigError(f"apt-get download {pkg} failed:\n{e.stdout}")
            log("apt-get download failed; running apt-get update and trying again")
            _run(["apt-get", "update"])
            _run(["apt-get", "download", pkg], cwd=debs)
        found = sorted(debs.glob(f"{pkg}_*.deb"))
        if not found:
            raise RigError(f"apt-get download {pkg} left no .deb in {debs}")
    tmp = kdir.with_name(version + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"unpacking {found[-1].name}")
    _run(["dpkg-deb", "-x", str(found[-1]), str(tmp)])
    # Debian 13's kernel packages put the modules under /usr (merged /usr): the tree is read
    # through lib/modules, as depmod -b and the rest of the rig do.
    if not (tmp / "lib").exists() and (tmp / "usr/lib/modules").is_dir():
        (tmp / "lib").symlink_to("usr/lib")
    _run(["depmod", "-b", str(tmp), version])
    # arm64's vmlinuz is already an uncompressed Image (an EFI stub that QEMU's -kernel boots).
    if k.arch == "amd64" and not _extract_vmlinux(tmp / "boot" / f"vmlinuz-{version}", tmp / "vmlinux"):
        log("could not extract vmlinux from the bzImage; booting the bzImage (about 5 s slower)")
    shutil.rmtree(kdir, ignore_errors=True)
    tmp.rename(kdir)
    (kdir / ".ready").write_text(found[-1].name + "\n")


def _builtin_modules(kernel):
    try:
        text = (kernel.modules / "modules.builtin").read_text()
    except OSError:
        return set()
    return {os.path.basename(l).split(".ko")[0].replace("-", "_") for l in text.split()}


def module_load_order(kernel, names):
    """Module files (relative to the module tree) in dependency order for `names` (those built
    into the kernel left out)."""
    deps = {}
    byname = {}
    builtin = _builtin_modules(kernel)
    for line in (kernel.modules / "modules.dep").read_text().splitlines():
        if ":" not in line:
            continue
        path, rest = line.split(":", 1)
        deps[path] = rest.split()
        base = os.path.basename(path).split(".ko")[0].replace("-", "_")
        byname[base] = path
    order = []

    def visit(path, stack=()):
        if path in order:
            return
        if path in stack:
            raise RigError(f"module dependency loop at {path}")
        for d in deps.get(path, []):
            visit(d, stack + (path,))
        order.append(path)

    for n in names:
        p = byname.get(n.replace("-", "_"))
        if not p and n.replace("-", "_") in builtin:
            continue
        if not p:
            raise RigError(f"module {n} not in {kernel.modules}")
        visit(p)
    return order


# ---------------------------------------------------------------------------------------------
# Initramfs


class _Cpio:
    """A newc cpio archive, written by hand (no cpio on the host)."""

    def __init__(self):
        self.parts = []
        self.ino = 1000

    def _entry(self, name, mode, data=b"", rdev=(0, 0), nlink=1):
        name_b = name.encode() + b"\0"
        self.ino += 1
        fields = [self.ino, mode, 0, 0, nlink, 0, len(data), 0, 0, rdev[0], rdev[1], len(name_b), 0]
        hdr = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.parts.append(hdr + name_b)
        self.parts.append(b"\0" * ((4 - (len(hdr) + len(name_b)) % 4) % 4))
        self.parts.append(data)
        self.parts.append(b"\0" * ((4 - len(data) % 4) % 4))

    def dir(self, name):
        self._entry(name, stat.S_IFDIR | 0o755, nlink=2)

    def file(self, name, data, mode=0o644):
        self._entry(name, stat.S_IFREG | mode, data)

    def chardev(self, name, major, minor, mode=0o600):
        self._entry(name, stat.S_IFCHR | mode, rdev=(major, minor))

    def bytes(self):
        self._entry("TRAILER!!!", 0)
        return b"".join(self.parts)


def ensure_busybox(arch="amd64", suite=None):
    """busybox-static for the initramfs: this machine's /bin/busybox for its own architecture,
    else Debian's busybox-static for `arch` (from `suite`, through the private apt), unpacked
    into the cache."""
    import suites
    if arch == suites.host_arch():
        if not BUSYBOX.exists():
            raise RigError("no /bin/busybox: apt-get install busybox-static")
        return BUSYBOX
    suite = suite or suites.host_suite()
    d = cache_dir() / "busybox" / f"{suite}-{arch}"
    bb = d / "busybox"
    if bb.exists():
        return bb
    with _cache_lock(f"busybox-{suite}-{arch}"):
        if bb.exists():
            return bb
        tmp = d.with_name(d.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        suites.private_apt(suite).download([f"busybox-static:{arch}"], tmp)
        debs = sorted(tmp.glob("busybox-static_*.deb"))
        if not debs:
            raise RigError(f"apt-get download busybox-static:{arch} left no .deb")
        _run(["dpkg-deb", "-x", str(debs[-1]), str(tmp / "root")])
        found = [p for p in (tmp / "root/usr/bin/busybox", tmp / "root/bin/busybox") if p.is_file()]
        if not found:
            raise RigError(f"no busybox in {debs[-1].name}")
        shutil.copy(found[0], tmp / "busybox")
        shutil.rmtree(tmp / "root")
        shutil.rmtree(d, ignore_errors=True)
        tmp.rename(d)
    return bb


def _module_bytes(path):
    """A module file's contents, decompressed (busybox's insmod takes plain .ko files)."""
    data = Path(path).read_bytes()
    if str(path).endswith(".xz"):
        import lzma
        data = lzma.decompress(data)
    return data


def ensure_initramfs(kernel, suite=None):
    """Build (or reuse) the initramfs for `kernel`; rebuilt whenever its content changes."""
    busybox = ensure_busybox(kernel.arch, suite)
    mods = module_load_order(kernel, ROOT_MODULES)
    init = INIT_SCRIPT.read_bytes()
    h = hashlib.sha256()
    h.update(init)
    h.update(kernel.version.encode())
    h.update(("\n".join(mods)).encode())
    st = busybox.stat()
    h.update(f"{st.st_size}:{st.st_mtime_ns}".encode())
    path = cache_dir() / f"initramfs-{kernel.version}-{h.hexdigest()[:16]}.cpio"
    if path.exists():
        return path
    with _cache_lock(f"initramfs-{kernel.version}"):
        if not path.exists():
            _write_initramfs(path, kernel, busybox, mods, init)
    return path


def _write_initramfs(path, kernel, busybox, mods, init):
    c = _Cpio()
    for d in ("bin", "dev", "proc", "sys", "mnt", "modules"):
        c.dir(d)
    c.chardev("dev/console", 5, 1)
    c.file("init", init, 0o755)
    c.file("bin/busybox", busybox.read_bytes(), 0o755)
    names = []
    for m in mods:
        base = os.path.basename(m).removesuffix(".xz")
        c.file(f"modules/{base}", _module_bytes(kernel.modules / m))
        names.append(base)
    c.file("modules.order", ("\n".join(names) + "\n").encode())
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(c.bytes())
    tmp.rename(path)
    for old in cache_dir().glob(f"initramfs-{kernel.version}-*.cpio"):
        if old != path:
            old.unlink(missing_ok=True)
    return path


# ---------------------------------------------------------------------------------------------
# Out-of-tree kernel modules (Tests/Fixtures/NAME: a Kbuild and its sources), built against the
# guest kernel's own headers


FIXTURES = REPO / "Tests" / "Fixtures"


def _download_debs(packages, dest):
    """apt-get download PACKAGES into dest (apt-get update once if one is not found)."""
    try:
        _run(["apt-get", "download", *packages], cwd=dest)
    except subprocess.CalledProcessError as e:
        if os.geteuid() != 0:
            raise RigError(f"apt-get download {' '.join(packages)} failed:\n{e.stdout}")
        log("apt-get download failed; running apt-get update and trying again")
        _run(["apt-get", "update"])
        _run(["apt-get", "download", *packages], cwd=dest)


def ensure_headers(kernel):
    """The kernel's headers (linux-headers-VER, its -common and linux-kbuild), unpacked into the
    cache with dpkg-deb -x: a tree to run `make -C … M=…` in. This machine's suite only: another
    suite's kernel is built with another compiler."""
    if _foreign(kernel.arch, None) or kernel.arch != "amd64":
        raise RigError(f"headers for {kernel} are not this machine's suite's")
    hdir = cache_dir() / "headers" / kernel.version
    build = hdir / "usr/src" / f"linux-headers-{kernel.version}"
    if (hdir / ".ready").exists():
        return build
    with _cache_lock(f"headers-{kernel.version}"):
        if (hdir / ".ready").exists():
            return build
        pkg = f"linux-headers-{kernel.version}"
        out = _run(["apt-cache", "depends", pkg]).stdout
        wanted = [pkg] + re.findall(r"Depends:\s*(linux-(?:headers-\S+-common|kbuild-\S+))", out)
        debs = cache_dir() / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        missing = [p for p in wanted if not list(debs.glob(f"{p}_*.deb"))]
        if missing:
            log(f"downloading {' '.join(missing)} (apt-get download)")
            _download_debs(missing, debs)
        tmp = hdir.with_name(hdir.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for p in wanted:
            _run(["dpkg-deb", "-x", str(sorted(debs.glob(f"{p}_*.deb"))[-1]), str(tmp)])
        # The flavour's Makefile includes the common tree by its installed, absolute path.
        mk = tmp / "usr/src" / f"linux-headers-{kernel.version}" / "Makefile"
        mk.write_text(re.sub(r"/usr/src/(linux-headers-\S+-common)", str(hdir / "usr/src") + r"/\1", mk.read_text()))
        shutil.rmtree(hdir, ignore_errors=True)
        tmp.rename(hdir)
        (hdir / ".ready").write_text(" ".join(wanted) + "\n")
    return build


def ensure_kmod(name, kernel):
    """Tests/Fixtures/NAME built for `kernel` (cached under a hash of its sources); the .ko's path."""
    src = FIXTURES / name
    files = sorted(p for p in src.iterdir() if p.is_file() and (p.suffix in (".c", ".h") or p.name == "Kbuild"))
    h = hashlib.sha256(kernel.version.encode())
    for p in files:
        h.update(p.name.encode() + b"\0" + p.read_bytes())
    out = cache_dir() / "kmod" / f"{name}-{kernel.version}-{h.hexdigest()[:16]}"
    kos = sorted(out.glob("*.ko")) if out.exists() else []
    if kos:
        return kos[0]
    build = ensure_headers(kernel)
    with _cache_lock(f"kmod-{name}-{kernel.version}"):
        kos = sorted(out.glob("*.ko")) if out.exists() else []
        if kos:
            return kos[0]
        tmp = out.with_name(out.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for p in files:
            shutil.copy(p, tmp / p.name)
        log(f"building {name} for {kernel.version}")
        try:
            _run(["nice", "-n", "10", "make", "-C", str(build), f"M={tmp}", "modules"])
        except subprocess.CalledProcessError as e:
            raise RigError(f"building {name} for {kernel.version} failed:\n{e.stdout[-3000:]}")
        built = sorted(tmp.glob("*.ko"))
        if not built:
            raise RigError(f"building {name} left no .ko in {tmp}")
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        for ko in built:
            shutil.copy(ko, out / ko.name)
        shutil.rmtree(tmp, ignore_errors=True)
    return sorted(out.glob("*.ko"))[0]


# ---------------------------------------------------------------------------------------------
# QMP


class QMPError(Exception):
    pass


class QMP:
    """A minimal QMP client: commands from any thread, events recorded with host timestamps."""

    def __init__(self, path, timeout=15.0):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                self.sock.connect(str(path))
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise RigError(f"cannot connect to QMP at {path}")
                time.sleep(0.05)
        self.rfile = self.sock.makefile("rb")
        self.lock = threading.Lock()
        self.cond = threading.Condition()
        self.replies = {}
        self.events = []  # (host monotonic time, event name, data)
        self.event_hooks = []
        self.next_id = 0
        self.closed = False
        json.loads(self.rfile.readline())  # greeting
        self.thread = threading.Thread(target=self._reader, daemon=True)
        self.thread.start()
        self.cmd("qmp_capabilities")

    def _reader(self):
        try:
            for raw in self.rfile:
                try:
                    msg = json.loads(raw)
                except ValueError:
                    continue
                if "event" in msg:
                    ev = (time.monotonic(), msg["event"], msg.get("data", {}))
                    with self.cond:
                        self.events.append(ev)
                        self.cond.notify_all()
                    for hook in list(self.event_hooks):
                        try:
                            hook(*ev)
                        except Exception as e:  # a hook must not kill the reader
                            log(f"QMP event hook failed: {e!r}")
                elif "id" in msg:
                    with self.cond:
                        self.replies[msg["id"]] = msg
                        self.cond.notify_all()
        except OSError:
            pass
        with self.cond:
            self.closed = True
            self.cond.notify_all()

    def cmd(self, execute, timeout=30.0, **arguments):
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            msg = {"execute": execute, "id": rid}
            if arguments:
                msg["arguments"] = arguments
            self.sock.sendall(json.dumps(msg).encode() + b"\n")
        deadline = time.monotonic() + timeout
        with self.cond:
            while rid not in self.replies:
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    raise QMPError(f"no reply to {execute}")
                self.cond.wait(left)
            reply = self.replies.pop(rid)
        if "error" in reply:
            raise QMPError(f"{execute}: {reply['error'].get('desc', reply['error'])}")
        return reply.get("return")

    def hmp(self, command_line):
        return self.cmd("human-monitor-command", **{"command-line": command_line})

    def wait_event(self, name, since=0.0, pred=None, timeout=10.0):
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for ev in self.events:
                    if ev[0] >= since and ev[1] == name and (pred is None or pred(ev[2])):
                        return ev
                left = deadline - time.monotonic()
                if self.closed or left <= 0:
                    return None
                self.cond.wait(left)

    def close(self):
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            self.sock.close()


# ---------------------------------------------------------------------------------------------
# Running a VM


class Result:
    def __init__(self):
        self.exit_code = None   # the guest command's exit code (from @@EXIT)
        self.timed_out = False
        self.error = None       # why there is no exit code, if there is none
        self.duration = 0.0     # seconds, QEMU start to exit
        self.boot_seconds = None  # QEMU start to the command starting (guest trace)
        self.lines = []         # the guest command's output lines (markers removed)
        self.traces = []        # (host seconds since start, guest uptime, what) from @@T lines
        self.host_requests = []  # (host seconds since start, request line, reply code)
        self.qmp_events = []    # (host seconds since start, name, data)
        self.log_path = None    # serial line 1 (the command's output), whole
        self.console_path = None  # serial line 0 (kernel console)
        self.io_dir = None      # the guest's $VM_IO, when kept
        self.hda_wav = None
        self.usb_wav = None
        self.qemu_returncode = None
        self.qemu_cpu = 0.0     # QEMU's CPU seconds (user + system), last read while it ran
        # The guest's uptime over the host's seconds since QEMU started, when the guest's clock
        # ran fast (see FAST_CLOCK); the guest was stopped before its command's first result.
        self.clock_fast = None

    @property
    def ok(self):
        return self.exit_code == 0

    def console_tail(self, n=40):
        try:
            return Path(self.console_path).read_text(errors="replace").splitlines()[-n:]
        except (OSError, TypeError):
            return []


def _pdeathsig():
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: QEMU dies with the rig
    except Exception:
        pass
    os.setpgid(0, 0)


def _q(s):
    return shlex.quote(str(s))


class VM:
    """One boot.  Use run_vm() unless you need the running VM (host_handlers get it)."""

    def __init__(self, command, *, devices=(), power_save=None, hda_wav=None, usb_wav=None,
                 module_options=None, env=None, mode="initramfs", timeout=180.0, smp=1,
                 memory=1024, machine="pc", io_dir=None, log_path=None, prefix="",
                 on_line=None, on_console=None, host_handlers=None, qemu_args=(),
                 kernel_args=(), extra_modules=(), systemd_mask=None, systemd_after="",
                 cwd="/", trace=True, kernel_version_=None, exit_grace=None, bzimage=False, s3=False,
                 root=None, reboot=False, late=(), arch="amd64", suite=None):
        if isinstance(devices, str):
            devices = [d for d in re.split(r"[,\s]+", devices) if d]
        for d in devices:
            if d not in DEVICE_KINDS:
                raise RigError(f"unknown device {d!r} (known: {', '.join(DEVICE_KINDS)})")
        if len(set(devices)) != len(devices):
            raise RigError("each device kind at most once")
        if mode not in ("initramfs", "systemd"):
            raise RigError(f"unknown mode {mode!r}")
        if not command:
            raise RigError("no guest command")
        self.command = [str(c) for c in command]
        self.devices = list(devices)
        self.power_save = power_save
        self.hda_wav = hda_wav
        self.usb_wav = usb_wav
        self.module_options = dict(module_options or {})
        self.env = dict(env or {})
        self.mode = mode
        self.timeout = timeout
        self.smp = smp
        self.memory = memory
        self.machine = machine
        self.io_dir = io_dir
        self.log_path = log_path
        self.prefix = prefix
        self.on_line = on_line if on_line is not None else self._print_line
        self.on_console = on_console
        self.host_handlers = dict(host_handlers or {})
        self.qemu_args = list(qemu_args)
        self.kernel_args = list(kernel_args)
        self.extra_modules = list(extra_modules)
        self.systemd_mask = DEFAULT_SYSTEMD_MASK if systemd_mask is None else list(systemd_mask)
        self.systemd_after = systemd_after
        self.cwd = cwd
        self.trace = trace
        self.kver = kernel_version_
        # S3 (suspend to RAM): enabled in the ACPI PM device; resuming from it needs the kernel
        # booted from the bzImage (a PVH-booted kernel does not come back: QEMU exits).
        self.s3 = s3
        self.bzimage = bzimage or s3  # boot the compressed bzImage instead of the PVH ELF (slower)
        self.exit_grace = exit_grace if exit_grace is not None else (30.0 if mode == "systemd" else 10.0)
        # A root of its own (debroot.make_root): booted writable with systemd as PID 1 and no
        # stage 2, so udev alone loads the sound drivers, during boot, as on a real box. The
        # guest may reboot (`reboot`): what it wrote is still there in the next boot.
        self.root = Path(root) if root else None
        self.reboot = reboot
        # Devices whose controller is there at boot but the device itself only after a `replug`
        # (a USB DAC plugged in later).
        if isinstance(late, str):
            late = [d for d in re.split(r"[,\s]+", late) if d]
        self.late = list(late)
        if self.root and mode != "systemd":
            raise RigError("a root of its own boots with systemd (mode systemd)")
        # The guest's architecture and Debian suite (its kernel's: None is this machine's). A
        # foreign architecture boots only a root of its own (this machine's root is amd64).
        if arch not in ARCHES:
            raise RigError(f"unknown architecture {arch!r} (known: {', '.join(ARCHES)})")
        if arch != "amd64" and not self.root:
            raise RigError(f"an {arch} guest boots a root of its own (root=debian)")
        if arch != "amd64" and (s3 or bzimage or machine != "pc"):
            raise RigError("s3, bzimage and machine= are amd64's")
        self.arch = arch
        self.suite = suite
        self.qmp = None
        self.proc = None
        self.t0 = None
        self.hotplug = {}  # device id -> device_add arguments
        self.cards = {d: i for i, d in enumerate(self.devices)}
        self._wake_on_suspend = None
        self._timers = []

    def _print_line(self, line):
        print(f"{self.prefix}{line}", flush=True)

    def now(self):
        return time.monotonic() - self.t0

    # -- job --------------------------------------------------------------------------------

    def _module_conf(self):
        opts = {}
        for kind, idx in self.cards.items():
            opts.setdefault(DEVICE_MODULES[kind], []).append(f"index={idx}")
        if self.power_save is not None:
            opts.setdefault("snd_hda_intel", []).append(f"power_save={int(self.power_save)}")
        for mod, o in self.module_options.items():
            opts.setdefault(mod.replace("-", "_"), []).append(o)
        return "".join(f"options {m} {' '.join(o)}\n" for m, o in opts.items())

    def _write_job(self, job, kernel):
        if self.root:
            return self._write_root_job(kernel)
        env = {
            "VM_MODE": self.mode, "VM_DEVICES": " ".join(self.devices), "VM_KVER": kernel.version,
            "VM_MODULES_DIR": str(kernel.modules), "VM_EXTRA_MODULES": " ".join(self.extra_modules),
            "VM_TRACE": "1" if self.trace else "",
        }
        for kind, idx in self.cards.items():
            env[f"VM_CARD_{kind.upper()}"] = str(idx)
        (job / "job.env").write_text("".join(f"{k}={_q(v)}\n" for k, v in env.items()))
        (job / "modprobe.conf").write_text(self._module_conf())
        cenv = {
            "VM_GUEST": str(GUEST_DIR), "VM_REPO": str(REPO), "VM_IO": "/run/vm-io",
            "VM_SERIAL": "/dev/ttyS1", "VM_DEVICES": " ".join(self.devices), "VM_MODE": self.mode,
            "PYTHONPATH": str(GUEST_DIR), "PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1",
            "HOME": "/root", "LANG": "C.UTF-8", "TERM": "dumb",
            "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        }
        for kind, idx in self.cards.items():
            cenv[f"VM_CARD_{kind.upper()}"] = str(idx)
        # The host's knobs for the guest's own scenarios (the host-side check reads them too).
        cenv.update({k: v for k, v in os.environ.items() if k in GUEST_KNOBS})
        cenv.update({k: str(v) for k, v in self.env.items()})
        prog = self.command[0]
        argv = list(self.command)
        p = Path(prog)
        if p.is_file() and not os.access(p, os.X_OK):
            argv = (["python3"] if p.suffix == ".py" else ["/bin/sh"]) + argv
        lines = ["cd " + _q(self.cwd)]
        lines += [f"export {k}={_q(v)}" for k, v in cenv.items()]
        lines.append("exec " + " ".join(_q(a) for a in argv))
        (job / "command.sh").write_text("\n".join(lines) + "\n")
        if self.mode == "systemd":
            self._write_systemd(job / "etc-systemd")

    def _write_root_job(self, kernel):
        """The test unit, its command and the guest helpers, written into the root itself (the
        guest sees nothing of this machine's files)."""
        rig = self.root / "usr/local/lib/vm-rig"
        shutil.rmtree(rig, ignore_errors=True)
        rig.mkdir(parents=True)
        for name in ("vmlib.sh", "bootlib.sh", "boxlib.sh", "vmhost"):
            shutil.copy(GUEST_DIR / name, rig / name)
        prog = Path(self.command[0])
        shutil.copy(prog, rig / prog.name)
        argv = [f"/usr/local/lib/vm-rig/{prog.name}"] + self.command[1:]
        if not os.access(prog, os.X_OK):
            argv = ["/bin/sh"] + argv
        cenv = {
            "VM_GUEST": "/usr/local/lib/vm-rig", "VM_IO": "/run/vm-io", "VM_SERIAL": "/dev/ttyS1",
            "VM_DEVICES": " ".join(self.devices), "VM_MODE": "root", "HOME": "/root", "LANG": "C.UTF-8",
            "TERM": "dumb", "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        }
        for kind, idx in self.cards.items():
            cenv[f"VM_CARD_{kind.upper()}"] = str(idx)
        cenv.update({k: v for k, v in os.environ.items() if k in GUEST_KNOBS})
        cenv.update({k: str(v) for k, v in self.env.items()})
        lines = ["cd /"] + [f"export {k}={_q(v)}" for k, v in cenv.items()]
        lines.append("exec " + " ".join(_q(a) for a in argv))
        (rig / "command.sh").write_text("\n".join(lines) + "\n")
        # Exit 99 from the command: it rebooted the guest and goes on in the next boot.
        (rig / "test-unit").write_text(
            "#!/bin/sh\n"
            "mkdir -p /run/vm-io\n"
            "mount -t 9p -o trans=virtio,version=9p2000.L,cache=none,msize=262144 vmio /run/vm-io\n"
            "echo \"@@T $(cut -d' ' -f1 /proc/uptime) test-unit\"\n"
            "/bin/sh /usr/local/lib/vm-rig/command.sh\nrc=$?\n"
            "[ $rc -eq 99 ] && exit 0\n"
            "echo \"@@EXIT $rc\"\n"
            "systemctl poweroff --no-block\n")
        units = self.root / "etc/systemd/system"
        (units / "vm-test.service").write_text(
            "[Unit]\nDescription=VM rig test command\nAfter=multi-user.target\n\n"
            "[Service]\nType=oneshot\nExecStart=/bin/sh /usr/local/lib/vm-rig/test-unit\n"
            "StandardInput=null\nStandardOutput=tty\nStandardError=inherit\nTTYPath=/dev/ttyS1\n"
            "TTYReset=no\nTTYVHangup=no\nTimeoutStartSec=infinity\n")
        wants = units / "multi-user.target.wants"
        wants.mkdir(parents=True, exist_ok=True)
        link = wants / "vm-test.service"
        if not link.is_symlink():
            link.symlink_to("/etc/systemd/system/vm-test.service")
        # Module options as an administrator writes them: card indexes, the codec's power saving.
        (self.root / "etc/modprobe.d").mkdir(parents=True, exist_ok=True)
        (self.root / "etc/modprobe.d/zz-vm-rig.conf").write_text(self._module_conf())

    def _write_systemd(self, d):
        """/etc/systemd additions for systemd mode, copied into the guest by stage 2."""
        sysd = d / "system"
        gen = d / "system-generators"
        sysd.mkdir(parents=True)
        gen.mkdir()
        for u in self.systemd_mask:
            (sysd / u).symlink_to("/dev/null")
        for g in Path("/lib/systemd/system-generators").glob("*"):
            if g.name not in SYSTEMD_GENERATORS_KEPT:
                (gen / g.name).symlink_to("/dev/null")
        (sysd / "vm.target").write_text(
            "[Unit]\nDescription=VM rig test target\nRequires=basic.target\nAfter=basic.target\n"
            "Wants=vm-test.service\nAllowIsolate=yes\n")
        (sysd / "vm-test.service").write_text(
            "[Unit]\nDescription=VM rig test command\n"
            f"After=basic.target {self.systemd_after}\n\n"
            "[Service]\nType=oneshot\nExecStart=/bin/sh /run/vm/systemd-test\n"
            "StandardInput=null\nStandardOutput=tty\nStandardError=inherit\nTTYPath=/dev/ttyS1\n"
            "TTYReset=no\nTTYVHangup=no\nTimeoutStartSec=infinity\n")
        (d.parent / "systemd-test").write_text(
            "#!/bin/sh\n"
            "echo \"@@T $(cut -d' ' -f1 /proc/uptime) test-unit\"\n"
            "/bin/sh /run/vm/command.sh\nrc=$?\necho \"@@EXIT $rc\"\n"
            "systemctl poweroff --no-block\n")

    # -- QEMU command line ------------------------------------------------------------------

    def _qemu_cmd(self, kernel, initrd, job, io):
        a = ARCHES[self.arch]
        append = [f"console={a['console']},115200", "panic=-1", "loglevel=4", *a["kernel_args"],
                  f"vm.job={job}", f"vm.stage2={STAGE2}"]
        if self.root:
            append += ["vm.root=rw"]
        if self.mode == "systemd":
            append += ["systemd.show_status=1"]
        append += self.kernel_args
        if self.arch == "amd64":
            machine = ["-cpu", "max", "-machine", self.machine]
            # ttyS0 the kernel's console, ttyS1 the command's line.
            serial = ["-serial", "chardev:con0", "-serial", "chardev:ser1"]
        else:
            machine = ["-cpu", a["cpu"], "-machine", a["machine"]]
            # The console on the machine's own UART (ttyAMA0, there from the first line), the
            # command's line on the second port of a PCI 16550 pair (8250_pci, built in): ttyS1,
            # as on amd64, so the guest's side is the same.
            serial = ["-serial", "chardev:con0", "-chardev", "null,id=ser0",
                      "-device", "pci-serial-2x,chardev1=ser0,chardev2=ser1"]
        cmd = [a["qemu"], "-accel", "tcg", *machine,
               "-m", str(self.memory), "-smp", str(self.smp), "-nodefaults", "-no-user-config",
               *([] if self.reboot else ["-no-reboot"]), "-display", "none", "-rtc", "base=utc",
               "-kernel", str(kernel.vmlinuz if self.bzimage else kernel.boot_image), "-initrd", str(initrd), "-append", " ".join(append),
               "-chardev", f"file,id=con0,path={job}/console.log",
               "-chardev", "stdio,id=ser1,signal=off", *serial,
               "-virtfs", (f"local,path={self.root},mount_tag=hostroot,security_model=none,multidevs=remap" if self.root
                           else "local,path=/,mount_tag=hostroot,security_model=none,readonly=on,multidevs=remap"),
               "-virtfs", f"local,path={io},mount_tag=vmio,security_model=none,multidevs=remap",
               "-qmp", f"unix:{job}/qmp.sock,server=on,wait=off",
               "-monitor", f"unix:{job}/monitor.sock,server=on,wait=off"]
        if "hda" in self.devices:
            if self.hda_wav:
                cmd += ["-audiodev", f"wav,id=hdaout,path={self.hda_wav}"]
            else:
                cmd += ["-audiodev", "none,id=hdaout"]
            cmd += ["-device", "intel-hda,id=hda", "-device", "hda-output,audiodev=hdaout,mixer=off"]
        if "usb" in self.devices:
            if self.usb_wav:
                cmd += ["-audiodev", f"wav,id=usbout,path={self.usb_wav}"]
            else:
                cmd += ["-audiodev", "none,id=usbout"]
            args = {"driver": "usb-audio", "id": "usbaudio", "audiodev": "usbout", "bus": "xhci.0"}
            self.hotplug["usbaudio"] = args
            cmd += ["-device", "qemu-xhci,id=xhci"]
            if "usb" not in self.late:
                cmd += ["-device", ",".join([args["driver"]] + [f"{k}={v}" for k, v in args.items() if k != "driver"])]
        if self.s3:
            cmd += ["-global", "ICH9-LPC.disable_s3=0" if self.machine.startswith("q35")
                    else "PIIX4_PM.disable_s3=0"]
        cmd += self.qemu_args
        return cmd

    # -- host requests ----------------------------------------------------------------------

    def _ack(self, io, rid, rc, text=""):
        d = Path(io) / ".ack"
        d.mkdir(exist_ok=True)
        tmp = d / f".{rid}.tmp"
        tmp.write_text(f"{rc}\n{text}")
        tmp.rename(d / rid)

    def _host_request(self, io, line):
        parts = line.split()
        rid, verb, args = (parts[1], parts[2], parts[3:]) if len(parts) >= 3 else ("0", "?", [])
        rc, text = 0, ""
        try:
            if verb in self.host_handlers:
                r = self.host_handlers[verb](self, args)
                rc, text = (r if isinstance(r, tuple) else (0, r or ""))
            elif verb == "unplug":
                since = time.monotonic()
                self.qmp.cmd("device_del", id=args[0])
                ev = self.qmp.wait_event("DEVICE_DELETED", since,
                                         lambda d: d.get("device") == args[0], timeout=20)
                rc, text = (0, "deleted") if ev else (1, "no DEVICE_DELETED within 20 s")
            elif verb == "replug":
                a = self.hotplug.get(args[0])
                if not a:
                    rc, text = 2, f"unknown device id {args[0]}"
                else:
                    self.qmp.cmd("device_add", **a)
                    text = "added"
            elif verb == "wakeup":
                delay = float(args[0]) if args else 0.0
                self._later(delay, lambda: self.qmp.cmd("system_wakeup"))
                text = f"system_wakeup in {delay} s"
            elif verb == "wake-on-suspend":
                # system_wakeup DELAY seconds after the next SUSPEND event; several delays: one
                # per coming suspend, in order; a delay ending in "+" repeats forever; "off" disarms
                if args and args[0] == "off":
                    self._wake_on_suspend = None
                else:
                    self._wake_on_suspend = list(args or ["1+"])
                    for d in self._wake_on_suspend:
                        float(d.rstrip("+"))
                text = f"armed {self._wake_on_suspend}"
            elif verb == "hmp":
                text = self.qmp.hmp(" ".join(args))
            elif verb == "qmp":
                text = json.dumps(self.qmp.cmd(args[0], **(json.loads(" ".join(args[1:])) if args[1:] else {})))
            elif verb == "events":
                text = "\n".join(f"{t - self.t0:.3f} {n} {json.dumps(d)}" for t, n, d in self.qmp.events)
            elif verb == "time":
                text = f"{self.now():.3f}"
            else:
                rc, text = 2, f"unknown host verb {verb}"
        except Exception as e:
            rc, text = 1, f"{type(e).__name__}: {e}"
        self.result.host_requests.append((self.now(), line, rc))
        self._ack(io, rid, rc, text)

    def _later(self, delay, fn):
        def go():
            try:
                fn()
            except Exception as e:
                log(f"delayed host action failed: {e!r}")
        t = threading.Timer(delay, go)
        t.daemon = True
        t.start()
        self._timers.append(t)

    def _on_event(self, t, name, data):
        self.result.qmp_events.append((t - self.t0, name, data))
        if name == "SUSPEND" and self._wake_on_suspend:
            d = self._wake_on_suspend[0]
            if not d.endswith("+"):
                self._wake_on_suspend.pop(0)

            def wake():
                if self.qmp.cmd("query-status").get("status") == "suspended":
                    self.qmp.cmd("system_wakeup")
            self._later(float(d.rstrip("+")), wake)

    # -- run --------------------------------------------------------------------------------

    def run(self):
        kernel = ensure_kernel(self.kver, self.arch, self.suite)
        initrd = ensure_initramfs(kernel, self.suite)
        qemu = ARCHES[self.arch]["qemu"]
        if not shutil.which(qemu):
            raise RigError(f"no {qemu}: apt-get install {ARCHES[self.arch]['qemu_package']}")
        res = self.result = Result()
        job = Path(tempfile.mkdtemp(prefix="kavm-"))
        own_io = self.io_dir is None
        io = Path(self.io_dir) if self.io_dir else job / "io"
        io.mkdir(parents=True, exist_ok=True)
        shutil.rmtree(io / ".ack", ignore_errors=True)
        res.io_dir = None if own_io else io
        res.hda_wav, res.usb_wav = self.hda_wav, self.usb_wav
        for w in (self.hda_wav, self.usb_wav):
            if w:
                Path(w).unlink(missing_ok=True)
        self._write_job(job, kernel)
        cmd = self._qemu_cmd(kernel, initrd, job, io)
        (job / "qemu.cmd").write_text(" ".join(_q(c) for c in cmd) + "\n")
        logf = open(self.log_path, "w") if self.log_path else None
        res.log_path = self.log_path
        self.t0 = time.monotonic()
        con_stop = threading.Event()
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=open(job / "qemu.stderr", "wb"),
                                         preexec_fn=_pdeathsig)
            try:
                self.qmp = QMP(job / "qmp.sock")
                self.qmp.event_hooks.append(self._on_event)
            except RigError as e:
                res.error = str(e)
                raise
            if self.on_console:
                threading.Thread(target=self._tail_console, args=(job / "console.log", con_stop),
                                 daemon=True).start()
            self._read_serial(res, io, logf)
        except RigError:
            pass
        finally:
            self._stop(res)
            con_stop.set()
            for t in self._timers:
                t.cancel()
            if self.qmp:
                self.qmp.close()
            res.duration = time.monotonic() - self.t0
            if logf:
                logf.close()
            res.console_path = None
            con = job / "console.log"
            keep = Path(self.log_path).with_suffix(".console.log") if self.log_path else None
            if keep and con.exists():
                shutil.copyfile(con, keep)
                res.console_path = str(keep)
            if res.exit_code is None and not res.error:
                err = (job / "qemu.stderr").read_bytes().decode(errors="replace").strip()
                res.error = ("no @@EXIT from the guest" + (f"; QEMU said: {err}" if err else "")
                             + f" (QEMU exit {res.qemu_returncode})")
            if res.exit_code is None and not keep and con.exists():
                # keep the kernel console for the post-mortem
                keep = Path(tempfile.mkstemp(prefix="kavm-console-", suffix=".log")[1])
                shutil.copyfile(con, keep)
                res.console_path = str(keep)
            shutil.rmtree(job, ignore_errors=True)
        return res

    def _tail_console(self, path, stop):
        while not path.exists() and not stop.is_set():
            time.sleep(0.05)
        with contextlib.suppress(OSError), open(path, "rb") as f:
            buf = b""
            while True:
                chunk = f.read(65536)
                if chunk:
                    buf += chunk
                    *lines, buf = buf.split(b"\n")
                    for l in lines:
                        self.on_console(l.decode(errors="replace").rstrip("\r"))
                elif stop.is_set():
                    break
                else:
                    time.sleep(0.05)

    def _read_serial(self, res, io, logf):
        out = self.proc.stdout
        fd = out.fileno()
        os.set_blocking(fd, False)
        buf = b""
        deadline = self.t0 + self.timeout
        exit_deadline = None
        import select
        while True:
            res.qemu_cpu = _cpu_seconds(self.proc.pid) or res.qemu_cpu
            now = time.monotonic()
            limit = min(deadline, exit_deadline) if exit_deadline else deadline
            if now >= limit:
                if exit_deadline and now >= exit_deadline:
                    log(f"{self.prefix}guest did not power off {self.exit_grace:.0f} s after @@EXIT; killing QEMU")
                else:
                    res.timed_out = True
                    res.error = f"timed out after {self.timeout:.0f} s"
                return
            r, _, _ = select.select([fd], [], [], min(0.5, limit - now))
            if not r:
                if self.proc.poll() is not None:
                    return
                continue
            try:
                chunk = os.read(fd, 65536)
            except BlockingIOError:
                continue
            if not chunk:
                self.proc.wait()
                return
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for raw in lines:
                line = raw.decode(errors="replace").replace("\r", "")
                if logf:
                    logf.write(line + "\n")
                    logf.flush()
                if line.startswith("@@EXIT "):
                    with contextlib.suppress(ValueError):
                        res.exit_code = int(line.split()[1])
                    exit_deadline = time.monotonic() + self.exit_grace
                elif line.startswith("@@HOST "):
                    threading.Thread(target=self._host_request, args=(io, line), daemon=True).start()
                elif line.startswith("@@T "):
                    p = line.split(None, 2)
                    with contextlib.suppress(ValueError, IndexError):
                        res.traces.append((self.now(), float(p[1]), p[2]))
                        if p[2] in ("command", "test-unit") and res.boot_seconds is None:
                            res.boot_seconds = self.now()
                            # A guest's uptime can only lag the host's time since QEMU started;
                            # one ahead of it by far has a clock that runs fast, and every bound
                            # and timeout it keeps is that much shorter in real time. Stopped here,
                            # before its command reports anything, for the runner to boot again.
                            if float(p[1]) > FAST_CLOCK * res.boot_seconds + 10:
                                res.clock_fast = float(p[1]) / res.boot_seconds
                                res.error = (f"the guest's clock ran {res.clock_fast:.1f}× fast: uptime "
                                             f"{float(p[1]):.1f} s {res.boot_seconds:.1f} s after QEMU started")
                                return
                else:
                    res.lines.append(line)
                    self.on_line(line)

    def _stop(self, res):
        p = self.proc
        if not p:
            return
        try:
            p.wait(timeout=0.1 if res.exit_code is None else 2)
        except subprocess.TimeoutExpired:
            if self.qmp and not self.qmp.closed:
                with contextlib.suppress(Exception):
                    self.qmp.cmd("quit", timeout=2)
            try:
                p.wait(timeout=3)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(p.pid, signal.SIGKILL)
                p.wait()
        res.qemu_returncode = p.returncode
        with contextlib.suppress(Exception):
            p.stdin.close()
            p.stdout.close()


_TICKS = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid):
    """A running process's CPU seconds (user + system), None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS


def run_vm(command, **kw):
    """Boot once, run `command` (a list: program on the host filesystem + arguments) in the guest
    as root, return a Result.  Keyword arguments: see VM.__init__ and Tests/VM/README.md."""
    return VM(command, **kw).run()
