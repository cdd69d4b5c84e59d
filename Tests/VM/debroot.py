"""A minimal Debian 12 root for the VM rig: a box that is not a developer's.

The other scenarios boot over this machine's own root, with every tool installed and the sound
drivers loaded by the rig before systemd starts. These boot a root made by debootstrap
(`--variant=minbase` plus systemd-sysv, udev, dbus and kmod: what a minimal server has), with
the package installed by `apt-get install ./keepalived-audio_*.deb` as a user would, and systemd
as PID 1 over it. Nothing loads a sound driver but udev during boot, so units start in the
order a real box starts them.

    base = debroot.ensure_base()                      # cached: .build/vm-cache/debian-root-base
    debroot.make_root(dest, kernel, deb, recommends=True)

The root is writable by the guest (the 9p share is not read-only and has no overlay), so what a
boot changes is still there after a reboot.
"""

import shlex
import shutil
import subprocess
from pathlib import Path

import vmrig

SUITE = "bookworm"
INCLUDE = "systemd-sysv,udev,dbus,kmod"
STAMP = f"minbase {SUITE} {INCLUDE}\n"


def _sh(script, timeout=900):
    r = subprocess.run(["sh", "-euc", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=timeout)
    if r.returncode != 0:
        raise vmrig.RigError(f"{script.strip().splitlines()[0]} ...: exit {r.returncode}: {r.stdout[-1500:]}")
    return r.stdout


def mirror():
    """The Debian mirror this machine's apt uses (debootstrap's source)."""
    for p in sorted(Path("/etc/apt/sources.list.d").glob("*.sources")) + [Path("/etc/apt/sources.list")]:
        try:
            text = p.read_text()
        except OSError:
            continue
        for line in text.splitlines():
            words = line.split()
            if line.startswith("URIs:") and len(words) > 1 and words[1].rstrip("/").endswith("/debian"):
                return words[1]
            if words[:1] == ["deb"]:
                uri = next((w for w in words[1:] if "://" in w), "")
                if uri.rstrip("/").endswith("/debian"):
                    return uri
    return "http://deb.debian.org/debian"


def ensure_base():
    """debootstrap's minimal root with apt's lists, made once and kept in the cache (under the
    cache's lock: scenarios run side by side)."""
    with vmrig._cache_lock():
        return _ensure_base()


def _ensure_base():
    base = vmrig.cache_dir() / "debian-root-base"
    stamp = base / ".vm-rig-base"
    if stamp.exists() and stamp.read_text() == STAMP:
        return base
    if not shutil.which("debootstrap"):
        raise vmrig.RigError("no debootstrap: apt-get install debootstrap")
    tmp = base.with_name(base.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(base, ignore_errors=True)
    vmrig.log(f"debootstrap --variant=minbase --include={INCLUDE} {SUITE} (about a minute)")
    _sh(f"debootstrap --variant=minbase --include={INCLUDE} {SUITE} {shlex.quote(str(tmp))} {shlex.quote(mirror())}")
    # The same suites as this machine (updates and security): the package's shared-library
    # dependencies come from the libraries it was built against.
    for p in Path("/etc/apt/sources.list.d").glob("*.sources"):
        shutil.copy(p, tmp / "etc/apt/sources.list.d" / p.name)
    if list(Path("/etc/apt/sources.list.d").glob("*.sources")):
        (tmp / "etc/apt/sources.list").write_text("")
    _in_root(tmp, "apt-get update -qq")
    stamp_tmp = tmp / ".vm-rig-base"
    stamp_tmp.write_text(STAMP)
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


def make_root(dest, kernel, deb, recommends=True, enable=True, options=None):
    """A fresh copy of the base at `dest` with the kernel's modules, `deb` installed with apt
    (recommends or not) and, with `enable`, the system service enabled. Returns `dest`."""
    base = ensure_base()
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
