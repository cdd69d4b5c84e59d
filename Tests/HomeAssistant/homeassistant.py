#!/usr/bin/env python3
"""Home Assistant core against an MQTT broker, for checking keepalived's MQTT discovery.

Runs the real Home Assistant core (PyPI `homeassistant`, which needs Python >= 3.13.2) in a
minimal Debian 13 root (this machine is Debian 12, Python 3.11), chrooted, sharing this
machine's network: a broker on 127.0.0.1 here is 127.0.0.1 there. Everything is done through
Home Assistant's own REST API: onboarding (owner user, token), the MQTT config entry (config
flow), entity states and service calls.

    python3 homeassistant.py prepare
    python3 homeassistant.py start --broker 127.0.0.1:1883 --config-dir /tmp/ha [--port 8123]
    python3 homeassistant.py --config-dir /tmp/ha states --match keepalived
    python3 homeassistant.py --config-dir /tmp/ha wait-state sensor.x playing --timeout 60
    python3 homeassistant.py --config-dir /tmp/ha call homeassistant update_entity sensor.x
    python3 homeassistant.py stop --config-dir /tmp/ha

From Python: `import homeassistant as ha` (this file; put its directory on sys.path) and use
prepare(), start(), states(), wait_state(), call_service(), stop(), or HomeAssistant(config_dir).

Only the standard library; must run as root (debootstrap, chroot, mount namespaces).
"""

import argparse
import contextlib
import fcntl
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

HA_VERSION = os.environ.get("HA_VERSION", "2026.2.3")
SUITE = "trixie"
# What the root holds besides minbase: Python 3.13 with venv/ensurepip, CA certificates (pip
# over HTTPS while preparing), and a C compiler with Python's headers: homeassistant 2026.2.3
# pins lru-dict==1.3.0, which has no cp313 wheel on PyPI (Home Assistant's own images take it
# from their musllinux wheel index, useless on glibc), so pip builds it from its sdist.
INCLUDE = "python3,python3-venv,ca-certificates,gcc,libc6-dev,python3-dev"
VENV = "/opt/homeassistant"          # inside the root
CONFIG_MOUNT = "/config"             # where the config directory is bind-mounted inside the root
# Integrations the configuration.yaml written by start() names (besides what Home Assistant
# always loads: bootstrap's CORE_INTEGRATIONS and DEFAULT_INTEGRATIONS).
CONFIGURED = ("api", "config", "http", "logger", "onboarding", "mqtt")
CLIENT_ID = "http://127.0.0.1/"      # the OAuth client id (any URL; the token is bound to it)
OWNER = {"name": "Harness", "username": "harness", "password": "harness-password"}
START_TIMEOUT = 300


class HarnessError(Exception):
    pass


def log(msg):
    print(f"[ha-harness {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# The cached root and venv

def cache_dir():
    return Path(os.environ.get("HA_HARNESS_CACHE",
                               Path.home() / ".cache/keepalived-test/home-assistant"))


def root_dir():
    return cache_dir() / f"debian-{SUITE}-root"


def mirror():
    """The Debian mirror this machine's apt uses: the VM rig's one reading of it (debootstrap's
    source there too)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "VM"))
    import suites
    return suites.mirror()


def _sh(script, timeout=1800, quiet=False):
    """Runs a shell script; output goes to stderr as it comes (unless quiet). Raises with the
    output's tail on failure."""
    p = subprocess.Popen(["sh", "-euc", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         text=True, errors="replace", start_new_session=True)
    out = []
    # Bounded even when the script prints nothing; the whole process group (pip under chroot).
    timer = threading.Timer(timeout, lambda: os.killpg(p.pid, signal.SIGKILL))
    timer.start()
    try:
        for line in p.stdout:
            out.append(line)
            if not quiet:
                sys.stderr.write("    " + line)
        p.wait()
    finally:
        timer.cancel()
    if p.returncode == -signal.SIGKILL:
        raise HarnessError(f"timed out after {timeout} s: {script.strip().splitlines()[0]}\n"
                           + "".join(out[-40:]))
    if p.returncode != 0:
        raise HarnessError(f"exit {p.returncode}: {script.strip().splitlines()[0]} ...\n" + "".join(out[-40:]))
    return "".join(out)


def _in_root(script, timeout=1800, network=False, quiet=False):
    """Runs `script` chrooted in the root, /proc /sys /dev mounted in a private mount namespace
    (nothing shows in this machine's mounts; all goes with the namespace)."""
    root = root_dir()
    if network:
        shutil.copy("/etc/resolv.conf", root / "etc/resolv.conf")
        # This machine's CA bundle: it may trust a TLS-intercepting proxy's CA that the root's
        # own ca-certificates does not (pip then fails with CERTIFICATE_VERIFY_FAILED).
        host_ca = os.environ.get("PIP_CERT") or "/etc/ssl/certs/ca-certificates.crt"
        if Path(host_ca).is_file():
            shutil.copy(host_ca, root / "tmp/ha-harness-ca.crt")
            script = "export PIP_CERT=/tmp/ha-harness-ca.crt SSL_CERT_FILE=/tmp/ha-harness-ca.crt\n" + script
    (root / "tmp/ha-harness-setup.sh").write_text(script)
    r = shlex.quote(str(root))
    try:
        return _sh(f"""exec unshare --mount --propagation private sh -euc "
mount -t proc proc {r}/proc
mount -t sysfs sysfs {r}/sys
mount --bind /dev {r}/dev
exec chroot {r} /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive /bin/sh -eu /tmp/ha-harness-setup.sh
" """, timeout, quiet)
    finally:
        (root / "tmp/ha-harness-setup.sh").unlink(missing_ok=True)


@contextlib.contextmanager
def _lock(name):
    cache_dir().mkdir(parents=True, exist_ok=True)
    with open(cache_dir() / f".{name}.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _root_stamp():
    return f"debootstrap --variant=minbase --include={INCLUDE} {SUITE} {mirror()}\n"


def ensure_root():
    """debootstrap's minimal Debian 13 root with Python 3.13, made once (stamp-checked)."""
    root = root_dir()
    stamp = root / ".ha-harness-root"
    want = _root_stamp()
    if stamp.exists() and stamp.read_text() == want:
        return root, False
    if not shutil.which("debootstrap"):
        raise HarnessError("no debootstrap: apt-get install --no-install-recommends debootstrap")
    tmp = root.with_name(root.name + ".tmp")
    _sh(f"rm -rf {shlex.quote(str(tmp))} {shlex.quote(str(root))}")
    t0 = time.monotonic()
    log(f"debootstrap --variant=minbase --include={INCLUDE} {SUITE} {tmp} {mirror()}")
    _sh(f"debootstrap --variant=minbase --include={INCLUDE} {SUITE} {shlex.quote(str(tmp))} "
        f"{shlex.quote(mirror())}", timeout=1800, quiet=True)
    (tmp / "etc/apt/sources.list").write_text(f"deb {mirror()} {SUITE} main\n")
    (tmp / CONFIG_MOUNT.lstrip("/")).mkdir(exist_ok=True)
    log(f"root made in {time.monotonic() - t0:.0f} s")
    (tmp / ".ha-harness-root").write_text(want)
    tmp.rename(root)
    return root, True


# Run with the venv's Python inside the root: the requirements of every integration Home
# Assistant will load (bootstrap's always-loaded sets, the configured ones, and what they depend
# on), pinned by Home Assistant's own package_constraints.txt. Prints one requirement a line.
_REQUIREMENTS_SCRIPT = r'''
import json, sys
from pathlib import Path
import homeassistant, homeassistant.bootstrap as b
comps = Path(homeassistant.__file__).parent / "components"
want = set(sys.argv[1:]) | set(b.CORE_INTEGRATIONS) | set(b.DEFAULT_INTEGRATIONS)
# These load only when configured (sentry: a config entry); a superset costs two small wheels.
want |= set(getattr(b, "LOGGING_AND_HTTP_DEPS_INTEGRATIONS", ()))
def manifest(d):
    return json.loads((comps / d / "manifest.json").read_text())
todo, seen = list(want), set()
while todo:
    d = todo.pop()
    if d in seen or not (comps / d / "manifest.json").exists():
        continue
    seen.add(d)
    todo += manifest(d).get("dependencies", [])
# after_dependencies are set up first only when they are set up anyway: no new domains.
reqs = []
for d in sorted(seen):
    for r in manifest(d).get("requirements", []):
        if r not in reqs:
            reqs.append(r)
print(json.dumps({"domains": sorted(seen), "requirements": reqs}))
'''


def _venv_stamp():
    return f"homeassistant=={HA_VERSION} integrations={','.join(CONFIGURED)} v1\n"


def ensure_venv():
    """The venv in the root with homeassistant and the requirements of every integration it
    will load, installed once (stamp-checked): Home Assistant runs with --skip-pip."""
    root = root_dir()
    stamp = root / VENV.lstrip("/") / ".ha-harness-venv"
    want = _venv_stamp()
    if stamp.exists() and stamp.read_text() == want:
        return False
    t0 = time.monotonic()
    log(f"venv {VENV} in the root: pip install homeassistant=={HA_VERSION}")
    pip = f"{VENV}/bin/pip --disable-pip-version-check --no-input"
    _in_root(f"""rm -rf {VENV}
python3 -m venv {VENV}
{pip} install -q --progress-bar off --upgrade pip
{pip} install --progress-bar off homeassistant=={HA_VERSION} >/var/log/ha-harness-pip.log 2>&1 \
    || {{ tail -40 /var/log/ha-harness-pip.log; exit 1; }}
grep -E '^ *(Building wheel for|Created wheel for)' /var/log/ha-harness-pip.log || true
""", timeout=2400, network=True)
    (root / "tmp/ha-harness-reqs.py").write_text(_REQUIREMENTS_SCRIPT)
    out = _in_root(f"{VENV}/bin/python /tmp/ha-harness-reqs.py {' '.join(CONFIGURED)}", quiet=True)
    info = json.loads(out.strip().splitlines()[-1])
    log(f"{len(info['domains'])} integrations load: {' '.join(info['domains'])}")
    log(f"their requirements: {' '.join(info['requirements'])}")
    (root / "tmp/ha-harness-reqs.txt").write_text("\n".join(info["requirements"]) + "\n")
    _in_root(f"""C=$({VENV}/bin/python -c 'import homeassistant, os; print(os.path.dirname(homeassistant.__file__))')/package_constraints.txt
{pip} install --progress-bar off -r /tmp/ha-harness-reqs.txt -c "$C" >/var/log/ha-harness-pip-reqs.log 2>&1 \
    || {{ tail -40 /var/log/ha-harness-pip-reqs.log; exit 1; }}
grep -E '^ *(Building wheel for|Created wheel for)' /var/log/ha-harness-pip-reqs.log || true
{VENV}/bin/pip check || true
""", timeout=2400, network=True)
    log(f"venv made in {time.monotonic() - t0:.0f} s")
    stamp.write_text(want)
    return True


def prepare():
    """Makes or reuses the cached root and venv. Returns the root's path."""
    if os.geteuid() != 0:
        raise HarnessError("must run as root (debootstrap, chroot, mount namespaces)")
    t0 = time.monotonic()
    with _lock("prepare"):
        root, made_root = ensure_root()
        made_venv = ensure_venv()
    took = time.monotonic() - t0
    what = "made" if made_root else ("venv made" if made_venv else "cached, reused")
    print(f"root: {root} ({what}); venv: {root}{VENV}; homeassistant {HA_VERSION}; {took:.1f} s")
    return root


# ---------------------------------------------------------------------------------------------
# Running Home Assistant

CONFIGURATION_YAML = """\
# Written by Tests/HomeAssistant/homeassistant.py: a minimal core (no default_config).
homeassistant:
  name: keepalived harness
  latitude: 52.52
  longitude: 13.40
  elevation: 0
  unit_system: metric
  time_zone: UTC
  country: DE
  currency: EUR
http:
  server_host: 127.0.0.1
  server_port: {port}
api:
config:
onboarding:
logger:
  default: info
"""


def _state_file(config_dir):
    return Path(config_dir) / "harness.json"


def _read_state(config_dir):
    try:
        return json.loads(_state_file(config_dir).read_text())
    except (OSError, ValueError):
        return {}


def _write_state(config_dir, **kw):
    st = _read_state(config_dir)
    st.update(kw)
    p = _state_file(config_dir)
    p.write_text(json.dumps(st, indent=2) + "\n")
    p.chmod(0o600)
    return st


def log_tail(config_dir, lines=60):
    """The tail of Home Assistant's log file; of its stdout/stderr (hass.out, the same lines
    but also what comes before logging is set up, e.g. an import error) when that is empty."""
    out = []
    for name in ("home-assistant.log", "hass.out"):
        p = Path(config_dir) / name
        if p.exists() and p.stat().st_size and not out:
            text = p.read_text(errors="replace").splitlines()
            out.append(f"--- {p} (last {min(lines, len(text))} of {len(text)} lines) ---")
            out += text[-lines:]
    return "\n".join(out) or f"(no log in {config_dir})"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (our own unreaped child) is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except OSError:
        return False


class HomeAssistant:
    """A client of one running instance: its REST API, with the token onboarding stored."""

    def __init__(self, config_dir):
        self.config_dir = Path(config_dir).resolve()
        st = _read_state(self.config_dir)
        if "port" not in st:
            raise HarnessError(f"no harness.json in {self.config_dir}: start first")
        self.port = st["port"]
        self.base = f"http://127.0.0.1:{self.port}"

    # -- HTTP
    def request(self, method, path, body=None, form=None, auth=True, timeout=30):
        headers = {}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        elif form is not None:
            data = urllib.parse.urlencode(form).encode()
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        for attempt in (0, 1):
            if auth:
                headers["Authorization"] = f"Bearer {self._token(refresh=attempt == 1)}"
            req = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout) as r:
                    raw = r.read()
                    return json.loads(raw) if raw else None
            except urllib.error.HTTPError as e:
                text = e.read().decode(errors="replace")
                if e.code == 401 and auth and attempt == 0:
                    continue
                raise HarnessError(f"{method} {path}: HTTP {e.code}: {text[:800]}") from None
        raise AssertionError

    def _token(self, refresh=False):
        st = _read_state(self.config_dir)
        if "refresh_token" not in st:
            raise HarnessError(f"no token in {_state_file(self.config_dir)}: start (onboarding) first")
        if not refresh and st.get("access_token") and st.get("expires_at", 0) > time.time() + 60:
            return st["access_token"]
        tok = self.request("POST", "/auth/token", auth=False, form={
            "grant_type": "refresh_token", "refresh_token": st["refresh_token"], "client_id": CLIENT_ID})
        _write_state(self.config_dir, access_token=tok["access_token"],
                     expires_at=time.time() + tok.get("expires_in", 1800))
        return tok["access_token"]

    # -- the API
    def states(self, match=None):
        states = self.request("GET", "/api/states")
        return sorted((s for s in states if match is None or match in s["entity_id"]),
                      key=lambda s: s["entity_id"])

    def state(self, entity_id):
        try:
            return self.request("GET", f"/api/states/{entity_id}")
        except HarnessError as e:
            if "HTTP 404" in str(e):
                return None
            raise

    def wait_state(self, entity_id, value, timeout=60):
        deadline = time.monotonic() + timeout
        last = None
        while True:
            s = self.state(entity_id)
            last = s and s["state"]
            if last == value:
                return s
            if time.monotonic() > deadline:
                now = "no such entity" if s is None else f"state {last!r}"
                raise HarnessError(f"{entity_id}: {now}, not {value!r} after {timeout} s")
            time.sleep(0.5)

    def call_service(self, domain, service, entity_id=None, data=None):
        body = dict(data or {})
        if entity_id:
            body["entity_id"] = entity_id
        return self.request("POST", f"/api/services/{domain}/{service}", body=body)

    def config_entries(self, domain=None):
        q = f"?domain={domain}" if domain else ""
        return self.request("GET", f"/api/config/config_entries/entry{q}")

    def log_tail(self, lines=60):
        return log_tail(self.config_dir, lines)


def _free_port():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_get(url, timeout=5):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.status, r.read()


def start(broker, config_dir, port=None, username=None, password=None, timeout=START_TIMEOUT):
    """Starts Home Assistant in the background (log and state in config_dir), onboards the
    owner, and sets up the MQTT config entry against `broker` ("host:port"). Returns a
    HomeAssistant client."""
    if os.geteuid() != 0:
        raise HarnessError("must run as root (chroot, mount namespaces)")
    root = root_dir()
    if not (root / ".ha-harness-root").exists() or not (root / VENV.lstrip("/") / ".ha-harness-venv").exists():
        raise HarnessError(f"no prepared root at {root}: run prepare first")
    config_dir = Path(config_dir).resolve()
    config_dir.mkdir(parents=True, exist_ok=True)
    st = _read_state(config_dir)
    if st.get("pid") and _alive(st["pid"]):
        raise HarnessError(f"already running in {config_dir} (pid {st['pid']}): stop first")
    port = port or st.get("port") or _free_port()
    (config_dir / "configuration.yaml").write_text(CONFIGURATION_YAML.format(port=port))
    for name in ("home-assistant.log", "hass.out"):
        (config_dir / name).unlink(missing_ok=True)
    r, c = shlex.quote(str(root)), shlex.quote(str(config_dir))
    # unshare and chroot exec: the pid is Home Assistant's own. The mounts are in its private
    # mount namespace and go with it.
    script = f"""
mount -t proc proc {r}/proc
mount -t sysfs sysfs {r}/sys
mount --bind /dev {r}/dev
mount --bind {c} {r}{CONFIG_MOUNT}
exec chroot {r} /usr/bin/env -i PATH={VENV}/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 TZ=UTC \
    {VENV}/bin/python -m homeassistant --config {CONFIG_MOUNT} --skip-pip
"""
    t0 = time.monotonic()
    with open(config_dir / "hass.out", "w") as out:
        p = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-euc", script],
                             stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                             start_new_session=True)
    _write_state(config_dir, pid=p.pid, port=port, root=str(root), started=time.time())
    log(f"Home Assistant {HA_VERSION} starting, pid {p.pid}, http://127.0.0.1:{port}, config {config_dir}")
    try:
        ha = HomeAssistant(config_dir)
        _wait_http(ha, p, t0, timeout)
        log(f"HTTP API answers after {time.monotonic() - t0:.1f} s")
        _onboard(ha)
        _wait_running(ha, p, t0, timeout)
        log(f"core running after {time.monotonic() - t0:.1f} s")
        _setup_mqtt(ha, broker, username, password)
        took = time.monotonic() - t0
        _write_state(config_dir, broker=broker, start_seconds=round(took, 1))
        log(f"ready after {took:.1f} s")
        return ha
    except BaseException:
        if p.poll() is not None:
            log(f"Home Assistant exited with {p.returncode}")
        log("start failed; log tail:\n" + log_tail(config_dir))
        with contextlib.suppress(Exception):
            stop(config_dir, timeout=30)
        raise


def _wait_http(ha, p, t0, timeout):
    last = 0
    while True:
        try:
            status, body = _http_get(ha.base + "/api/onboarding", timeout=5)
            if status == 200:
                return json.loads(body)
        except urllib.error.HTTPError:
            pass
        except (OSError, ValueError):
            pass
        el = time.monotonic() - t0
        if p.poll() is not None:
            raise HarnessError(f"Home Assistant exited ({p.returncode}) after {el:.0f} s before its API answered")
        if el > timeout:
            raise HarnessError(f"Home Assistant's API did not answer within {timeout} s")
        if el - last >= 10:
            last = el
            log(f"waiting for http://127.0.0.1:{ha.port}/api/onboarding ({el:.0f} s)")
        time.sleep(1)


def _wait_running(ha, p, t0, timeout):
    last = 0
    while True:
        cfg = ha.request("GET", "/api/config")
        if cfg.get("state") == "RUNNING":
            return cfg
        el = time.monotonic() - t0
        if p.poll() is not None:
            raise HarnessError(f"Home Assistant exited ({p.returncode})")
        if el > timeout:
            raise HarnessError(f"Home Assistant not RUNNING within {timeout} s (state {cfg.get('state')})")
        if el - last >= 10:
            last = el
            log(f"core state {cfg.get('state')} ({el:.0f} s)")
        time.sleep(1)


def _onboard(ha):
    """Onboarding through its REST API (homeassistant/components/onboarding/views.py): the
    owner user (returns an auth code), the code exchanged for tokens at /auth/token
    (homeassistant/components/auth/__init__.py), then the remaining steps marked done."""
    steps = {s["step"]: s["done"] for s in ha.request("GET", "/api/onboarding", auth=False)}
    st = _read_state(ha.config_dir)
    if not steps.get("user"):
        r = ha.request("POST", "/api/onboarding/users", auth=False,
                       body={"client_id": CLIENT_ID, "language": "en", **OWNER})
        tok = ha.request("POST", "/auth/token", auth=False, form={
            "grant_type": "authorization_code", "code": r["auth_code"], "client_id": CLIENT_ID})
        _write_state(ha.config_dir, access_token=tok["access_token"], refresh_token=tok["refresh_token"],
                     expires_at=time.time() + tok.get("expires_in", 1800))
        log(f"onboarded: owner {OWNER['username']!r}, token in {_state_file(ha.config_dir)}")
    elif "refresh_token" not in st:
        raise HarnessError(f"{ha.config_dir} was onboarded but holds no token: use a fresh config dir")
    # Not core_config: finishing it starts config flows for google_translate, met, radio_browser
    # and shopping_list (onboarding/views.py), whose requirements are not installed (--skip-pip)
    # and which want the internet. Onboarding stays unfinished on that step; the API does not care.
    for step, path, body in (
            ("analytics", "/api/onboarding/analytics", {}),
            ("integration", "/api/onboarding/integration",
             {"client_id": CLIENT_ID, "redirect_uri": CLIENT_ID})):
        if step in steps and not steps[step]:
            ha.request("POST", path, body=body)
    left = [s["step"] for s in ha.request("GET", "/api/onboarding", auth=False) if not s["done"]]
    if left:
        log(f"onboarding steps left undone on purpose: {left}")


def _flow_step(ha, path, result, user_input):
    return ha.request("POST", f"{path}/{result['flow_id']}", body=user_input)


def _setup_mqtt(ha, broker, username=None, password=None):
    """The MQTT config entry through the config-flow REST API (the `broker` step of
    homeassistant/components/mqtt/config_flow.py), then its options flow to make sure
    discovery is on with the prefix `homeassistant`. An entry for another broker is replaced."""
    host, _, port = broker.rpartition(":")
    if not host or not port.isdigit():
        raise HarnessError(f"--broker {broker!r}: want HOST:PORT")
    st = _read_state(ha.config_dir)
    want = {"broker": broker, "username": username}
    for e in ha.config_entries("mqtt"):
        if st.get("mqtt") == want and e["state"] == "loaded":
            log(f"MQTT config entry {e['entry_id']} ({broker}) already loaded")
            return e
        log(f"removing MQTT config entry {e['entry_id']} (state {e['state']}, was {st.get('mqtt')})")
        ha.request("DELETE", f"/api/config/config_entries/entry/{e['entry_id']}")
    flows = "/api/config/config_entries/flow"
    r = ha.request("POST", flows, body={"handler": "mqtt", "show_advanced_options": False})
    data = {"broker": host, "port": int(port)}
    if username:
        data["username"] = username
    if password:
        data["password"] = password
    for _ in range(5):
        if r["type"] == "menu":
            r = _flow_step(ha, flows, r, {"next_step_id": "broker" if "broker" in r["menu_options"]
                                          else r["menu_options"][0]})
        elif r["type"] == "form" and r["step_id"] == "broker":
            r = _flow_step(ha, flows, r, data)
            if r["type"] == "form" and r.get("errors"):
                raise HarnessError(f"MQTT broker step: errors {r['errors']} (broker {broker})")
        else:
            break
    if r["type"] != "create_entry":
        raise HarnessError(f"MQTT config flow did not create an entry: {json.dumps(r)[:800]}")
    entry = r["result"]
    log(f"MQTT config entry {entry['entry_id']} created: {r.get('title')}")
    _write_state(ha.config_dir, mqtt=want)
    _mqtt_discovery_on(ha, entry["entry_id"])
    deadline = time.monotonic() + 60
    while True:
        e = next((e for e in ha.config_entries("mqtt") if e["entry_id"] == entry["entry_id"]), None)
        if e and e["state"] == "loaded":
            return e
        if time.monotonic() > deadline:
            raise HarnessError(f"MQTT config entry not loaded within 60 s: {e}")
        time.sleep(0.5)


def _mqtt_discovery_on(ha, entry_id):
    """Options flow: the broker step unchanged, then the options step with discovery on and the
    default prefix (the defaults already; this makes sure and shows it in the log)."""
    opts = "/api/config/config_entries/options/flow"
    r = ha.request("POST", opts, body={"handler": entry_id, "show_advanced_options": False})
    for _ in range(5):
        if r["type"] == "menu":
            r = _flow_step(ha, opts, r, {"next_step_id": "options" if "options" in r["menu_options"]
                                         else r["menu_options"][0]})
        elif r["type"] == "form" and r["step_id"] == "options":
            was = {f["name"]: f.get("default") for f in r.get("data_schema", [])
                   if f["name"] in ("discovery", "discovery_prefix")}
            r = _flow_step(ha, opts, r, {"discovery": True, "discovery_prefix": "homeassistant"})
            log(f"MQTT options: discovery on, prefix 'homeassistant' (the form's values were {was})")
        elif r["type"] == "form":
            defaults = {f["name"]: f["default"] for f in r.get("data_schema", []) if "default" in f}
            r = _flow_step(ha, opts, r, defaults)
        else:
            break
    if r["type"] != "create_entry":
        raise HarnessError(f"MQTT options flow did not finish: {json.dumps(r)[:800]}")


def _root_mounts(root):
    root = str(root)
    mounts = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            mp = line.split()[4].replace("\\040", " ")
            if mp == root or mp.startswith(root + "/"):
                mounts.append(mp)
    return mounts


def stop(config_dir, timeout=60):
    """SIGTERM, SIGKILL after `timeout` s; then makes sure no mount of the root is left here
    (start's mounts live in Home Assistant's own mount namespace and go with it)."""
    config_dir = Path(config_dir).resolve()
    st = _read_state(config_dir)
    pid = st.get("pid")
    if pid and _alive(pid) and Path(f"/proc/{pid}/cmdline").read_bytes().find(b"homeassistant") < 0:
        log(f"pid {pid} is not Home Assistant now; not signalling it")
        pid = None
    if pid and _alive(pid):
        t0 = time.monotonic()
        os.kill(pid, signal.SIGTERM)
        log(f"SIGTERM to {pid}")
        while _alive(pid) and time.monotonic() - t0 < timeout:
            time.sleep(0.3)
        if _alive(pid):
            log(f"still running after {timeout} s: SIGKILL")
            os.kill(pid, signal.SIGKILL)
            while _alive(pid) and time.monotonic() - t0 < timeout + 10:
                time.sleep(0.2)
        log(f"stopped in {time.monotonic() - t0:.1f} s")
    else:
        log("not running")
    root = st.get("root") or str(root_dir())
    for mp in sorted(_root_mounts(root), key=len, reverse=True):
        log(f"unmounting leftover {mp}")
        subprocess.run(["umount", "-l", mp], check=False)
    _write_state(config_dir, pid=None)


# ---------------------------------------------------------------------------------------------
# CLI

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--config-dir", default=os.environ.get("HA_HARNESS_CONFIG_DIR"),
                    help="Home Assistant's config directory (its log, harness.json with port and token)")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("prepare", help="make or reuse the cached Debian 13 root and venv")
    s = sub.add_parser("start", help="start Home Assistant, onboard, set up MQTT")
    s.add_argument("--broker", required=True, help="HOST:PORT of the MQTT broker")
    s.add_argument("--username")
    s.add_argument("--password")
    s.add_argument("--config-dir", dest="config_dir_sub")
    s.add_argument("--port", type=int, help="HTTP port (default: a free one)")
    s.add_argument("--timeout", type=float, default=START_TIMEOUT)
    s = sub.add_parser("states", help="JSON of GET /api/states")
    s.add_argument("--match", help="only entity ids containing this")
    s.add_argument("--config-dir", dest="config_dir_sub")
    s = sub.add_parser("wait-state", help="poll until ENTITY_ID's state is VALUE")
    s.add_argument("entity_id")
    s.add_argument("value")
    s.add_argument("--timeout", type=float, default=60)
    s.add_argument("--config-dir", dest="config_dir_sub")
    s = sub.add_parser("call", help="POST /api/services/DOMAIN/SERVICE")
    s.add_argument("domain")
    s.add_argument("service")
    s.add_argument("entity_id", nargs="?")
    s.add_argument("--data", help="JSON object of further service data")
    s.add_argument("--config-dir", dest="config_dir_sub")
    s = sub.add_parser("stop", help="stop Home Assistant")
    s.add_argument("--config-dir", dest="config_dir_sub")
    s.add_argument("--timeout", type=float, default=60)
    s = sub.add_parser("log", help="tail of Home Assistant's log")
    s.add_argument("--lines", type=int, default=60)
    s.add_argument("--config-dir", dest="config_dir_sub")
    a = ap.parse_args(argv)
    config_dir = getattr(a, "config_dir_sub", None) or a.config_dir
    if a.cmd != "prepare" and not config_dir:
        ap.error("--config-dir is needed (or HA_HARNESS_CONFIG_DIR)")
    try:
        if a.cmd == "prepare":
            prepare()
        elif a.cmd == "start":
            ha = start(a.broker, config_dir, a.port, a.username, a.password, a.timeout)
            print(json.dumps({"url": ha.base, "config_dir": str(ha.config_dir),
                              "pid": _read_state(ha.config_dir)["pid"],
                              "start_seconds": _read_state(ha.config_dir)["start_seconds"]}))
        elif a.cmd == "states":
            print(json.dumps(HomeAssistant(config_dir).states(a.match), indent=2))
        elif a.cmd == "wait-state":
            ha = HomeAssistant(config_dir)
            try:
                print(json.dumps(ha.wait_state(a.entity_id, a.value, a.timeout), indent=2))
            except HarnessError:
                log("log tail:\n" + ha.log_tail())
                raise
        elif a.cmd == "call":
            data = json.loads(a.data) if a.data else None
            print(json.dumps(HomeAssistant(config_dir).call_service(a.domain, a.service, a.entity_id, data),
                             indent=2))
        elif a.cmd == "stop":
            stop(config_dir, a.timeout)
        elif a.cmd == "log":
            print(log_tail(config_dir, a.lines))
    except HarnessError as e:
        print(f"error: {e}", file=sys.stderr)
        if a.cmd in ("states", "call") and config_dir and Path(config_dir).exists():
            print(log_tail(config_dir, 30), file=sys.stderr)
        return 1
    return 0


# Public names for importing code.
states = lambda config_dir, match=None: HomeAssistant(config_dir).states(match)  # noqa: E731
wait_state = lambda config_dir, entity_id, value, timeout=60: \
    HomeAssistant(config_dir).wait_state(entity_id, value, timeout)  # noqa: E731
call_service = lambda config_dir, domain, service, entity_id=None, data=None: \
    HomeAssistant(config_dir).call_service(domain, service, entity_id, data)  # noqa: E731

if __name__ == "__main__":
    sys.exit(main())
