"""A minimal SlimProto server for squeezelite, in Python's standard library (carry-players).

Debian packages no Squeezebox server (Lyrion/LMS), so the test is squeezelite's server: it takes
the player's HELO on TCP 3483, sets its output on (`aude`) at unity gain (`audg` 0x10000 on both
channels, adjusted: squeezelite then skips its volume multiply), and starts a track with `strm s`
whose HTTP request squeezelite sends to this same object's HTTP port, where the file is served
as it is (raw S16_LE stereo PCM: the format is given in the `strm` itself, so squeezelite's pcm
decoder reads nothing from the data). What the player reports (`STAT` events: STMs a track
started, STMd its decoder done, STMu its output ran dry, ...) is kept, with the elapsed
milliseconds of its last STAT, for the scenario to wait on.

Wire format (squeezelite's slimproto.c/slimproto.h): the server's frames are a 16-bit big-endian
length (of what follows), a 4-byte opcode and the fields; the player's are the opcode, a 32-bit
big-endian length and the fields. Only what the test needs is here: one player, one track at a
time, no metadata, no sync groups, no discovery (squeezelite is given `-s 127.0.0.1`).

    server = SlimServer()                    # listens on 3483 and on a free HTTP port
    server.wait_player(30)                   # squeezelite's HELO
    server.play("/tmp/a.raw", 44100)         # strm s, then the player fetches it over HTTP
    server.wait_event("STMs", 30)            # the track started at the output
    server.pause(); server.unpause()         # strm p, strm u: its output stops and goes on
    server.stop()                            # strm q: the output stops and flushes
    server.off()                             # aude 0 0: squeezelite closes its output
    server.on()                              # aude 1 1: on again for the next track
"""

import http.server
import os
import socket
import struct
import threading
import time

SLIMPROTO_PORT = 3483
UNITY = 0x10000  # squeezelite's FIXED_ONE: 16.16 fixed point gain of 1.0
# strm's pcm_sample_rate code (squeezelite's pcm.c table: '3' 44.1 kHz, '4' 48 kHz, '9' 96 kHz).
RATE_CODES = {11025: b"0", 22050: b"1", 32000: b"2", 44100: b"3", 48000: b"4", 96000: b"9"}


class SlimServer:
    def __init__(self, host="127.0.0.1"):
        self.host = host
        self.lock = threading.Condition()
        self.events = []  # (monotonic time, event, elapsed ms) of every STAT
        self.conn = None
        self.files = {}
        self.listener = socket.create_server((host, SLIMPROTO_PORT), reuse_port=False)
        files = self.files

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def do_GET(self):
                data = files.get(self.path)
                if data is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "audio/L16")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.http = http.server.ThreadingHTTPServer((host, 0), Handler)
        self.http_port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            conn, _ = self.listener.accept()
            with self.lock:
                self.conn = conn
                self.lock.notify_all()
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        buf = b""
        while True:
            try:
                chunk = conn.recv(4096)
            except OSError:
                chunk = b""
            if not chunk:
                return
            buf += chunk
            while len(buf) >= 8:
                opcode, length = buf[:4], struct.unpack(">I", buf[4:8])[0]
                if len(buf) < 8 + length:
                    break
                data, buf = buf[8:8 + length], buf[8 + length:]
                self._received(opcode, data)

    def _received(self, opcode, data):
        with self.lock:
            if opcode == b"HELO":
                self.events.append((time.monotonic(), "HELO", 0))
                self._send(b"aude", struct.pack("BB", 1, 1))
                self._send(b"audg", struct.pack(">IIBBII", 0, 0, 1, 255, UNITY, UNITY))
            elif opcode == b"STAT" and len(data) >= 47:
                event = data[:4].decode("ascii", "replace")
                elapsed = struct.unpack(">I", data[43:47])[0]
                self.events.append((time.monotonic(), event, elapsed))
            self.lock.notify_all()

    def _send(self, opcode, fields):
        self.conn.sendall(struct.pack(">H", 4 + len(fields)) + opcode + fields)

    def _strm(self, command, autostart=b"0", rate=44100, port=0, request=b"", gain=0):
        # command, autostart, format 'p' (PCM), 16 bits ('1'), rate, 2 channels, little-endian
        # ('1'), threshold 1 kB, spdif '0', no transition, flags 0, output threshold 0.1 s,
        # no slaves, replay gain (or, for 't' and 'u', the server's timestamp), port, ip 0 (this
        # server's own address).
        fields = (command + autostart + b"p1" + RATE_CODES.get(rate, b"3") + b"21"
                  + struct.pack(">BcBcBBBIHI", 1, b"0", 0, b"0", 0, 1, 0, gain, port, 0) + request)
        self._send(b"strm", fields)

    def wait_player(self, timeout):
        """True once squeezelite has said HELO (and been set to unity gain)."""
        return self.wait_event("HELO", timeout)

    def play(self, path, rate):
        """Starts the raw S16_LE stereo file at `rate` now (autostart), replacing what plays."""
        name = f"/{os.path.basename(path)}"
        with open(path, "rb") as f:
            self.files[name] = f.read()
        with self.lock:
            self._strm(b"s", b"1", rate, self.http_port, f"GET {name} HTTP/1.0\r\n\r\n".encode())

    def stop(self):
        """strm q: stop the output and flush what is buffered (squeezelite's "stop")."""
        with self.lock:
            self._strm(b"q")

    def off(self):
        """aude 0 0: the player's output off (squeezelite closes its device at once)."""
        with self.lock:
            self._send(b"aude", struct.pack("BB", 0, 0))

    def on(self):
        """aude 1 1: the player's output on again (its device opened at the next track)."""
        with self.lock:
            self._send(b"aude", struct.pack("BB", 1, 1))

    def pause(self):
        """strm p with no interval: squeezelite stops its output where it is (writing its own
        silence until its idle time, -C, closes the device) and says STMp."""
        with self.lock:
            self._strm(b"p")

    def unpause(self):
        """strm u with no start time: squeezelite's output runs on from where it paused."""
        with self.lock:
            self._strm(b"u")

    def heartbeat(self):
        """strm t: the player answers with a STMt carrying its elapsed milliseconds."""
        with self.lock:
            self._strm(b"t")

    def count(self, event):
        with self.lock:
            return sum(1 for _, e, _ in self.events if e == event)

    def wait_event(self, event, timeout, after=0):
        """True once `event` has come more than `after` times (bounded by `timeout` s)."""
        deadline = time.monotonic() + timeout
        with self.lock:
            while sum(1 for _, e, _ in self.events if e == event) <= after:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(left)
            return True

    def elapsed_ms(self):
        """The elapsed milliseconds of the player's last STAT (0 before any)."""
        with self.lock:
            return self.events[-1][2] if self.events else 0
