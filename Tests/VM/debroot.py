"""Minimal Debian roots for the VM rig: boxes that are not a developer's.

The other scenarios boot over this machine's own root, with every tool installed and the sound
drivers loaded by the rig before systemd starts. These boot a root made by debootstrap
(`--variant=minbase` plus systemd-sysv, udev, dbus and kmod: what a minimal server has), with
the package installed by `apt-get install ./keepalived-audio_*.deb` as a user would, and systemd
as PID 1 over it. Nothing loads a sound driver but udev during boot, so units start in the
order a real box starts them.

Four roots: Debian 12 amd64 (this machine's suite), Debian 13 amd64, and Debian 12 and 13 arm64
(the bases of Raspberry Pi OS Bookworm and Trixie). All but the first also hold what the package
depends on and recommends (libasound2 or libasound2t64, polkitd) and alsa-utils, so that `apt-get
install ./deb` resolves everything from the root itself. The arm64 roots are made by mmdebstrap
(this machine's apt resolves and downloads; dpkg, apt and the maintainer scripts run in the root
under qemu-user-static, binfmt_misc: suites.ensure_binfmt), as is every later command in them
(the package's installation).

    base = debroot.ensure_base()                      # cached: .build/vm-cache/debian-root-base
    base = debroot.ensure_base("trixie", "arm64")     # .build/vm-cache/debian-trixie-arm64-root-base
    debroot.make_root(dest, kernel, deb, recommends=True, suite="trixie", arch="arm64")

The root is writable by the guest (the 9p share is not read-only and has no overlay), so what a
boot changes is still there after a reboot.
"""

import shlex
import shutil
import subprocess
import time
from pathlib import Path

import suites
import vmrig

SUITE = "bookworm"
INCLUDE = "systemd-sysv,udev,dbus,kmod"
# The other roots: also what the package depends on and recommends (apt then finds every
# dependency in the root: no download at install time, and the guest has no network), and
# alsa-utils (aplay, a player). Debian 12 arm64 has them under their old names (libasound2).
INCLUDES = {
    ("bookworm", "amd64"): INCLUDE,
    ("bookworm", "arm64"): "systemd-sysv,udev,dbus,kmod,libpam-systemd,libasound2,polkitd,alsa-utils",
    ("trixie", "amd64"): "systemd-sysv,udev,dbus,kmod,libpam-systemd,libasound2t64,polkitd,alsa-utils",
    ("trixie", "arm64"): "systemd-sysv,udev,dbus,kmod,libpam-systemd,libasound2t64,polkitd,alsa-utils",
}
# Every root the scenarios boot: (suite, architecture).
ROOTS = tuple(INCLUDES)


def _stamp(suite, arch):
    return f"minbase {suite} {INCLUDES[suite, arch]}\n" if (suite, arch) == (SUITE, "amd64") \
        else f"minbase {suite} {arch} {INCLUDES[suite, arch]}\n"


def base_dir(suite=SUITE, arch="amd64"):
    name = "debian-root-base" if (suite, arch) == (SUITE, "amd64") else f"debian-{suite}-{arch}-root-base"
    return vmrig.cache_dir() / name


def _sh(script, timeout=900):
    r = subprocess.run(["sh", "-euc", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise vmrig.RigError(f"{script.strip().splitlines()[0]} ...: exit {r.returncode}: {r.stdout[-1500:]}")
    return r.stdout


mirror = suites.mirror


def ensure_base(suite=SUITE, arch="amd64"):
    """debootstrap's minimal root with apt's lists, made once and kept in the cache (under a
    lock of its own: scenarios run side by side, and scripts/test makes the roots while the
    builds run)."""
    with vmrig._cache_lock(f"root-{suite}-{arch}"):
        return _ensure_base(suite, arch)


def ensure_bases():
    """Every root the scenarios boot (what scripts/test makes while the builds run)."""
    return [ensure_base(suite, arch) for suite, arch in ROOTS]


def _ensure_base(suite, arch):
    base = base_dir(suite, arch)
    stamp = base / ".vm-rig-base"
    want = _stamp(suite, arch)
    if stamp.exists() and stamp.read_text() == want:
        return base
    tmp = base.with_name(base.name + ".tmp")
    _sh(f"rm -rf {shlex.quote(str(tmp))} {shlex.quote(str(base))}")
    include = INCLUDES[suite, arch]
    foreign = arch != suites.host_arch()
    t0 = time.monotonic()
    if foreign:
        # mmdebstrap, not debootstrap --foreign: debootstrap's second stage resolves packages with
        # the root's own perl and grep over the suite's Packages file, which under qemu-user took
        # 30 s of CPU a call and most of an hour in all on two busy cores. mmdebstrap resolves
        # with this machine's apt and runs only dpkg, apt and the maintainer scripts in the root,
        # under qemu-user-static.
        if not shutil.which("mmdebstrap") or not shutil.which("arch-test"):
            raise vmrig.RigError("no mmdebstrap or arch-test: apt-get install mmdebstrap arch-test qemu-user-static")
        suites.ensure_binfmt(arch)
        vmrig.log(f"mmdebstrap --variant=minbase --architectures={arch} --include={include} {suite} (under qemu-user-static)")
        _sh(f"mmdebstrap --quiet --mode=root --variant=minbase --architectures={arch} --include={include} {suite} "
            f"{shlex.quote(str(tmp))} {shlex.quote(mirror())}", timeout=3600)
    else:
        if not shutil.which("debootstrap"):
            raise vmrig.RigError("no debootstrap: apt-get install debootstrap")
        vmrig.log(f"debootstrap --variant=minbase --include={include} {suite}")
        _sh(f"debootstrap --variant=minbase --include={include} {suite} {shlex.quote(str(tmp))} {shlex.quote(mirror())}",
            timeout=1800)
    if (suite, arch) == (SUITE, "amd64") and suite == suites.host_suite():
        # The same suites as this machine (updates and security): the package's shared-library
        # dependencies come from the libraries it was built against.
        for p in Path("/etc/apt/sources.list.d").glob("*.sources"):
            shutil.copy(p, tmp / "etc/apt/sources.list.d" / p.name)
        if list(Path("/etc/apt/sources.list.d").glob("*.sources")):
            (tmp / "etc/apt/sources.list").write_text("")
        _in_root(tmp, "apt-get update -qq")
    else:
        # The suite's own sources, as on an installed box; no lists (the root holds what the
        # package needs: apt resolves it offline, and the guest has no network anyway).
        (tmp / "etc/apt/sources.list").write_text(suites.sources(suite))
    vmrig.log(f"{suite} {arch} root made in {time.monotonic() - t0:.0f} s")
    stamp_tmp = tmp / ".vm-rig-base"
    stamp_tmp.write_text(want)
    tmp.rename(base)
    return base


def _in_root(root, script, timeout=900):
    """Runs `script` chrooted in `root` with /proc, /sys and /dev mounted in a private mount
    namespace (nothing leaks into this machine's mounts)."""
    root = Path(root)
    shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
    (root / "tmp/vm-rig-setup.sh").write_text(script)
    r = shlex.quote(str(root))
    try:
        return _sh(f"""unshare --mount --propagation private sh -euc "
mount -t proc proc {r}/proc
mount -t sysfs sysfs {r}/sys
mount --bind /dev {r}/dev
mount --bind /dev/pts {r}/dev/pts
chroot {r} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 /bin/sh -eu /tmp/vm-rig-setup.sh
" """, timeout)
    finally:
        (root / "tmp/vm-rig-setup.sh").unlink(missing_ok=True)


def make_root(dest, kernel, deb, recommends=True, enable=True, options=None, suite=SUITE, arch="amd64"):
    """A fresh copy of the (suite, arch) base at `dest` with the kernel's modules, `deb`
    installed with apt (recommends or not) and, with `enable`, the system service enabled.
    Returns `dest`."""
    base = ensure_base(suite, arch)
    suites.ensure_binfmt(arch)
    dest = Path(dest)
    if dest.exists():
        _sh(f"rm -rf {shlex.quote(str(dest))}")
    dest.parent.mkdir(parents=True, exist_ok=True)
    _sh(f"cp -a --reflink=auto {shlex.quote(str(base))} {shlex.quote(str(dest))}")
    mods = dest / "lib/modules" / kernel.version
    mods.parent.mkdir(parents=True, exist_ok=True)
    # Hard links: the tree is the cache's (same file system), copied in a moment, never changed.
    _sh(f"cp -al {shlex.quote(str(kernel.modules))} {shlex.quote(str(mods))} 2>/dev/null"
        f" || cp -a {shlex.quote(str(kernel.modules))} {shlex.quote(str(mods))}")
    shutil.copy(deb, dest / "tmp" / Path(deb).name)
    flags = "" if recommends else "--no-install-recommends"
    script = f"apt-get install -y -qq {flags} /tmp/{Path(deb).name} >/tmp/apt.log 2>&1 || {{ tail -20 /tmp/apt.log; exit 1; }}\n"
    if options is not None:
        line = shlex.quote(f'KEEPALIVED_OPTIONS="{options}"')
        script += f"printf '%s\\n' {line} >/etc/keepalived-audio/keepalived-audio.conf\n"
    if enable:
        script += "systemctl enable keepalived-audio.service >/dev/null 2>&1\n"
    script += f"rm -f /tmp/{Path(deb).name}\n"
    _in_root(dest, script)
    return dest
