#!/usr/bin/python3
"""A stand-in for keepalived that carries one player at a time (issue 60's protocol), for the
ALSA plug-in's end-to-end check: `fake_carrier.py SOCKET OUTPUT [--decline|--busy]`.

Listens on the Unix socket SOCKET. To `{"request":"carry",...}` it answers with a grant (formats
[2] = S16_LE, rates [48000], channels [2, 2], maxBufferBytes 1 MiB), or with a refusal (--decline,
as a keepalived that cannot carry) or busy (--busy); to `{"request":"release",...}` with
`{"ok":true,"released":[]}`. To `{"request":"format",...}` on a granted connection it answers
`{"ok":true}` with a memfd (the ckeepalived_carry_shared header, CKeepalivedCarry.h, and the
player's buffer at data_offset 4096) and an eventfd. Then it "plays": every 5 ms it reads the
player's counters (under player_sequence); while the player's state is RUNNING or DRAINING the
"card" has played what it took at the last look, and takes min(written, taken + 5 ms of frames
at the format's rate) now (appending every frame it takes to OUTPUT); it publishes played, queued
(taken - played) and the stamp (sequence odd while it writes). A new generation starts it over at 0 (frames
of the old one that it had not taken are dropped, as the plug-in's drop means). A player whose
counters cannot be (written behind played, or more than a buffer ahead) ends the carrying.

FAKE_CARRIER_RATES=44100,48000 grants those rates (it takes 48000 only: a format request for
another is refused, unless FAKE_CARRIER_TAKES=44100,48000 names the rates it takes);
FAKE_CARRIER_END_AFTER=FRAMES ends the carrying (the header's `ended`) once it has taken that
many frames. Prints one line per event on stderr; exits after the first carried player closes
(FAKE_CARRIER_PLAYERS=N: the Nth, 0 never; MPD closes its PCM at each pause, stop and change of
format, and OUTPUT then holds each player's frames one after the other), or at SIGTERM. The
offsets are those of the C struct (checked with offsetof on x86-64 and aarch64: the header uses
fixed-width fields and explicit 64-byte alignment).
"""

import json
import mmap
import os
import socket
import struct
import sys
import time

MAGIC = 0x317972726163616B
VERSION = 1
DATA_OFFSET = 4096
# offsetof(ckeepalived_carry_shared, ...)
OFF_MAGIC, OFF_VERSION, OFF_DATA_OFFSET, OFF_BUFFER_FRAMES, OFF_FRAME_BYTES, OFF_RATE = 0, 8, 12, 16, 20, 24
OFF_PLAYER_SEQUENCE, OFF_WRITTEN, OFF_STATE, OFF_GENERATION = 64, 72, 80, 84
OFF_SEQUENCE, OFF_PLAYED_GENERATION, OFF_PLAYED, OFF_QUEUED, OFF_STAMP, OFF_ENDED = 128, 132, 136, 144, 152, 160
IDLE, RUNNING, PAUSED, DRAINING = 0, 1, 2, 3
STEP_SECONDS = 0.005


def log(*words):
    print("fake_carrier:", *words, file=sys.stderr, flush=True)


def read_line(connection):
    data = b""
    while not data.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk:
            return None
        data += chunk
        if len(data) > 4096:
            return None
    return json.loads(data)


def send(connection, obj, fds=None):
    line = (json.dumps(obj, separators=(",", ":")) + "\n").encode()
    if fds:
        socket.send_fds(connection, [line], fds)
    else:
        connection.sendall(line)


class Carried:
    """One player's memory and how far it has been played."""

    def __init__(self, request):
        self.buffer_frames = request["bufferFrames"]
        self.frame_bytes = 2 * request["channels"]  # S16_LE only
        self.rate = request["rate"]
        self.size = DATA_OFFSET + self.buffer_frames * self.frame_bytes
        self.memfd = os.memfd_create("keepalived-carry", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        os.ftruncate(self.memfd, self.size)
        self.memory = mmap.mmap(self.memfd, self.size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        struct.pack_into("<QIIIII", self.memory, OFF_MAGIC, MAGIC, VERSION, DATA_OFFSET, self.buffer_frames,
                         self.frame_bytes, self.rate)
        import fcntl
        fcntl.fcntl(self.memfd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
        self.eventfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.sequence = 0
        self.generation = 0
        self.played = 0
        self.taken = 0
        self.ended = False
        # Frames the card owes at the rate (5 ms at 44100 Hz is 220.5 frames).
        self.due = 0.0
        end_after = os.environ.get("FAKE_CARRIER_END_AFTER")
        self.end_after = int(end_after) if end_after else None

    def player(self):
        for _ in range(64):
            before = struct.unpack_from("<I", self.memory, OFF_PLAYER_SEQUENCE)[0]
            if before & 1:
                continue
            written, state, generation = struct.unpack_from("<QII", self.memory, OFF_WRITTEN)
            if struct.unpack_from("<I", self.memory, OFF_PLAYER_SEQUENCE)[0] == before:
                return written, state, generation
        return None

    def publish(self, queued):
        self.sequence += 1
        struct.pack_into("<I", self.memory, OFF_SEQUENCE, self.sequence)
        struct.pack_into("<IQQq", self.memory, OFF_PLAYED_GENERATION, self.generation, self.played, queued,
                         time.clock_gettime_ns(time.CLOCK_MONOTONIC))
        self.sequence += 1
        struct.pack_into("<I", self.memory, OFF_SEQUENCE, self.sequence)

    def end(self):
        struct.pack_into("<I", self.memory, OFF_ENDED, 1)
        self.ended = True

    def step(self, output):
        try:
            os.eventfd_read(self.eventfd)
        except BlockingIOError:
            pass
        counters = self.player()
        if counters is None or self.ended:
            return
        written, state, generation = counters
        if generation != self.generation:
            self.generation, self.played, self.taken, self.due = generation, 0, 0, 0.0
        # What the player may have written: a buffer beyond what was taken out of it (the
        # plug-in counts what is queued at the card as played).
        if self.end_after is not None and self.taken >= self.end_after:
            log(f"ending the carrying after {self.taken} frames (FAKE_CARRIER_END_AFTER)")
            self.end()
            return
        if written < self.taken or written - self.taken > self.buffer_frames:
            log(f"counters that cannot be: written {written}, taken {self.taken}; ending")
            self.end()
            return
        queued = 0
        if state in (RUNNING, DRAINING):
            # The card has played what was taken at the last look; it takes up to 5 ms more.
            self.played = self.taken
            self.due += self.rate * STEP_SECONDS
            take = min(written, self.taken + int(self.due)) - self.taken
            # What the card could not take (the player was behind) is not owed later.
            self.due -= int(self.due)
            for frame in range(self.taken, self.taken + take):
                at = DATA_OFFSET + (frame % self.buffer_frames) * self.frame_bytes
                output.write(self.memory[at:at + self.frame_bytes])
            self.taken += take
            queued = self.taken - self.played
        self.publish(queued)

    def close(self):
        self.memory.close()
        os.close(self.memfd)
        os.close(self.eventfd)


def serve_carried(connection, output):
    """The granted connection: format requests, and playing, until the player closes it."""
    carried = None
    connection.setblocking(False)
    pending = b""
    next_step = time.monotonic()
    while True:
        try:
            chunk = connection.recv(4096)
            if not chunk:
                log("the player closed the connection")
                break
            pending += chunk
        except BlockingIOError:
            pass
        while b"\n" in pending:
            line, pending = pending.split(b"\n", 1)
            request = json.loads(line)
            log("request", request)
            takes = [int(r) for r in os.environ.get("FAKE_CARRIER_TAKES", "48000").split(",")]
            if request.get("request") != "format" or request.get("format") != 2 or request.get("rate") not in takes \
                    or request.get("channels") != 2:
                connection.setblocking(True)
                send(connection, {"ok": False, "error": f"only S16_LE, {takes} Hz, 2 channels here"})
                connection.setblocking(False)
                continue
            if carried:
                carried.close()
            carried = Carried(request)
            connection.setblocking(True)
            send(connection, {"ok": True}, [carried.memfd, carried.eventfd])
            connection.setblocking(False)
        now = time.monotonic()
        if carried and now >= next_step:
            carried.step(output)
            next_step += STEP_SECONDS
            if next_step < now:
                next_step = now + STEP_SECONDS
        time.sleep(max(0.0, min(0.001, next_step - time.monotonic())))
    if carried:
        log(f"played {carried.played} frames of generation {carried.generation}")
        carried.close()


def main():
    path, output_path = sys.argv[1], sys.argv[2]
    mode = sys.argv[3] if len(sys.argv) > 3 else "--grant"
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)
    log("listening on", path, mode)
    players = int(os.environ.get("FAKE_CARRIER_PLAYERS", "1"))
    with open(output_path, "wb") as output:
        while True:
            connection, _ = listener.accept()
            request = read_line(connection)
            log("request", request)
            if request is None:
                connection.close()
                continue
            if request.get("request") == "carry" and mode == "--grant":
                rates = [int(r) for r in os.environ.get("FAKE_CARRIER_RATES", "48000").split(",")]
                send(connection, {"ok": True, "carry": True, "formats": [2], "rates": rates, "channels": [2, 2],
                                  "maxBufferBytes": 1 << 20})
                serve_carried(connection, output)
                connection.close()
                output.flush()
                players -= 1
                if players == 0:
                    return
                continue
            if request.get("request") == "carry" and mode == "--busy":
                send(connection, {"ok": False, "busy": True, "error": "carrying another player"})
            elif request.get("request") == "carry":
                send(connection, {"ok": False, "carry": False, "error": "not carrying here"})
            elif request.get("request") == "release":
                send(connection, {"ok": True, "released": []})
            else:
                send(connection, {"ok": False, "error": "unknown request"})
            connection.close()


if __name__ == "__main__":
    main()
