"""Debian suites and architectures other than this machine's, through a private apt.

The rig boots Debian 12 (this machine's suite, through its own apt) and also Debian 13 for amd64
and arm64: their kernels, the arm64 busybox of the initramfs and the package lists of their
roots come from a private apt configuration in the cache (`apt/<suite>/`: its own sources.list
naming the suite for amd64 and arm64, its own lists and an empty dpkg status). Nothing touches
this machine's apt.

    apt = suites.private_apt("trixie")
    apt.depends("linux-image-arm64", "arm64")     # "linux-image-6.12.…-arm64"
    apt.download(["busybox-static:arm64"], dest)   # the .deb files, in dest
"""

import os
import re
import subprocess
import time
from pathlib import Path

import vmrig

# Debian's release number of each suite the rig boots (what the scenarios' lines say).
RELEASES = {"bookworm": 12, "trixie": 13}
ARCHITECTURES = ("amd64", "arm64")
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
LISTS_MAX_AGE = 7 * 24 * 3600  # a week: a point release moves the kernel's version


def host_suite():
    """This machine's suite (its /etc/os-release), e.g. bookworm."""
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return "bookworm"
    m = re.search(r"^VERSION_CODENAME=(\S+)", text, re.M)
    return m.group(1) if m else "bookworm"


def host_arch():
    try:
        return subprocess.run(["dpkg", "--print-architecture"], stdout=subprocess.PIPE, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "amd64"


def _host_uris():
    for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]:
        try:
            text = p.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if line.startswith("URIs:"):
                yield from words[1:]
            elif words[:1] == ["deb"]:
                yield from (w for w in words[1:] if "://" in w)


def mirror():
    """The Debian mirror this machine's apt uses (debootstrap's source)."""
    for uri in _host_uris():
        if uri.rstrip("/").endswith("/debian"):
            return uri
    return "http://deb.debian.org/debian"


def security_mirror():
    for uri in _host_uris():
        if uri.rstrip("/").endswith("/debian-security"):
            return uri
    return "http://deb.debian.org/debian-security"


def sources(suite, archs=None):
    """A sources.list for `suite` (its updates and security suites too) from this machine's mirrors."""
    opt = f"[{'arch=' + ','.join(archs) + ' ' if archs else ''}signed-by={KEYRING}]"
    return (f"deb {opt} {mirror()} {suite} main\n"
            f"deb {opt} {mirror()} {suite}-updates main\n"
            f"deb {opt} {security_mirror()} {suite}-security main\n")


class PrivateApt:
    def __init__(self, suite):
        self.suite = suite
        self.dir = vmrig.cache_dir() / "apt" / suite
        self.options = [
            "-o", f"Dir::Etc::sourcelist={self.dir / 'sources.list'}", "-o", "Dir::Etc::sourceparts=-",
            "-o", f"Dir::State::Lists={self.dir / 'lists'}", "-o", f"Dir::Cache={self.dir / 'cache'}",
            "-o", f"Dir::State::status={self.dir / 'status'}", "-o", "Debug::NoLocking=1",
            "-o", "APT::Sandbox::User=root",
            *[x for a in ARCHITECTURES for x in ("-o", f"APT::Architectures::={a}")],
        ]

    def _apt(self, tool, *args, cwd=None):
        return subprocess.run([tool, *self.options, *args], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, cwd=cwd)

    def update(self, force=False):
        """Fetches the lists when they are missing or a week old (`force`: now), under a lock of
        their own (guests start side by side)."""
        stamp = self.dir / ".updated"
        fresh = lambda: stamp.exists() and time.time() - stamp.stat().st_mtime < LISTS_MAX_AGE  # noqa: E731
        if not force and fresh():
            return
        since = stamp.stat().st_mtime if stamp.exists() else 0
        with vmrig._cache_lock(f"apt-{self.suite}"):
            if (fresh() and not force) or (force and stamp.exists() and stamp.stat().st_mtime > since):
                return  # another guest fetched them meanwhile
            self._update()

    def _update(self):
        stamp = self.dir / ".updated"
        for d in ("lists/partial", "cache/archives/partial"):
            (self.dir / d).mkdir(parents=True, exist_ok=True)
        (self.dir / "sources.list").write_text(sources(self.suite, ARCHITECTURES))
        (self.dir / "status").touch()
        vmrig.log(f"apt-get update ({self.suite}, private lists in {self.dir})")
        r = self._apt("apt-get", "-q", "update")
        if r.returncode != 0 or re.search(r"^(E:|Err:)", r.stdout, re.M):
            raise vmrig.RigError(f"apt-get update of {self.suite} failed:\n{r.stdout[-1500:]}")
        stamp.touch()

    def depends(self, package, arch):
        """The first package `package` (for `arch`) depends on, e.g. the kernel image behind
        linux-image-arm64."""
        self.update()
        r = self._apt("apt-cache", "depends", f"{package}:{arch}")
        m = re.search(r"Depends:\s*(\S+?)(:\S+)?$", r.stdout, re.M)
        if r.returncode != 0 or not m:
            raise vmrig.RigError(f"apt-cache depends {package}:{arch} ({self.suite}): {r.stdout[-500:]}")
        return m.group(1)

    def download(self, packages, dest):
        """apt-get download `packages` (NAME:ARCH) into dest; lists refreshed once if one is not
        found (a point release replaced it)."""
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        self.update()
        r = self._apt("apt-get", "-q", "download", *packages, cwd=dest)
        if r.returncode != 0:
            self.update(force=True)
            r = self._apt("apt-get", "-q", "download", *packages, cwd=dest)
        if r.returncode != 0:
            raise vmrig.RigError(f"apt-get download {' '.join(packages)} ({self.suite}) failed:\n{r.stdout[-1500:]}")


def private_apt(suite):
    return PrivateApt(suite)


def ensure_binfmt(arch):
    """Lets this machine run `arch` binaries (a foreign root's chroot): binfmt_misc mounted and
    Debian's qemu-user-static registered by hand (update-binfmts is not installed), with the
    flags F (the interpreter is opened now, so it works inside any chroot) and P. A registration
    already there (made by anyone) is left as it is; none is ever removed."""
    if arch == host_arch():
        return
    names = {"arm64": "aarch64"}
    name = names.get(arch, arch)
    reg = Path("/proc/sys/fs/binfmt_misc")
    if not (reg / "register").exists():
        r = subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", str(reg)], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
        if r.returncode != 0 and not (reg / "register").exists():
            raise vmrig.RigError(f"cannot mount binfmt_misc (needs root): {r.stdout.strip()}")
    entry = reg / f"qemu-{name}"
    if entry.exists() and "enabled" in entry.read_text():
        return
    spec = Path(f"/usr/share/binfmts/qemu-{name}")
    if not spec.exists():
        raise vmrig.RigError(f"no {spec}: apt-get install qemu-user-static")
    fields = dict(line.split(None, 1) for line in spec.read_text().splitlines() if len(line.split(None, 1)) == 2)
    interp = fields.get("interpreter", f"/usr/libexec/qemu-binfmt/{name}-binfmt-P")
    if not Path(interp).exists():
        raise vmrig.RigError(f"no {interp}: apt-get install qemu-user-static")
    if entry.exists():  # registered but disabled
        entry.write_text("1")
        return
    line = f":qemu-{name}:M:{fields.get('offset', '0')}:{fields['magic']}:{fields['mask']}:{interp}:PF"
    try:
        (reg / "register").write_text(line)
    except OSError as e:
        if not entry.exists():
            raise vmrig.RigError(f"cannot register qemu-{name} with binfmt_misc: {e}")
    os.sync()
