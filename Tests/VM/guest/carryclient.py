#!/usr/bin/python3
"""A player of raw frames with the calls aplay never makes: `carryclient.py PCM RAW [options]`.

Plays RAW (S16_LE stereo frames, no header) through PCM (libasound through ctypes, as
ringwrite.py does) at --rate (44100), a period at a time, then drains and closes. What it can do
that aplay cannot, each an option:

  --pause-at FRAMES --pause-for SECONDS   after FRAMES written, snd_pcm_pause(1), wait, then
                                          snd_pcm_pause(0) and write the rest
  --nonblock                              SND_PCM_NONBLOCK: every write that would wait (-EAGAIN)
                                          waits in poll() on snd_pcm_poll_descriptors, judged by
                                          snd_pcm_poll_descriptors_revents, and the drain too
                                          (snd_pcm_drain's -EAGAIN, then poll until the state
                                          leaves DRAINING), as MPD does
  --segments N                            RAW is N equal segments: each is played in an open of
                                          its own (open, set up, write, drain, close), one right
                                          after the other: N hand-offs in one process, without
                                          N programs' start-up (90 ms of a TCG guest's CPU each)
  --buffer FRAMES --period FRAMES         the buffer and period asked for (near; default
                                          22050 and 2205: aplay's 0.5 s and a tenth of it)
  --deadline SECONDS                      every wait's bound (default 30): a play never hangs

An underrun (-EPIPE) is recovered with snd_pcm_prepare and the write goes on, as aplay does; it
is counted. Prints one JSON line: {"frames": written, "underruns": n, "opens": n, "seconds": s,
"pause": {"rc": [pause(1), pause(0)], "state": while paused, "delay": [at the pause, at its
end], "seconds": s}} or {"error": "...", ...} (exit 1)."""

import argparse
import ctypes
import ctypes.util
import json
import select
import sys
import time

lib = ctypes.CDLL(ctypes.util.find_library("asound") or "libasound.so.2")
lib.snd_strerror.restype = ctypes.c_char_p
lib.snd_pcm_state_name.restype = ctypes.c_char_p
lib.snd_pcm_writei.restype = ctypes.c_long
lib.snd_pcm_writei.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong]
lib.snd_pcm_hw_params_set_rate_near.argtypes = [ctypes.c_void_p] * 4
lib.snd_pcm_hw_params_set_buffer_size_near.argtypes = [ctypes.c_void_p] * 3
lib.snd_pcm_hw_params_set_period_size_near.argtypes = [ctypes.c_void_p] * 4
lib.snd_pcm_delay.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_long)]
lib.snd_pcm_poll_descriptors.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
lib.snd_pcm_poll_descriptors_revents.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint, ctypes.POINTER(ctypes.c_ushort)]

S16_LE, RW_INTERLEAVED, NONBLOCK, FRAME = 2, 3, 1, 4
DRAINING = 5  # SND_PCM_STATE_DRAINING


class pollfd(ctypes.Structure):
    _fields_ = [("fd", ctypes.c_int), ("events", ctypes.c_short), ("revents", ctypes.c_short)]


class Failure(Exception):
    pass


def strerror(err):
    return f"{lib.snd_strerror(err).decode()} ({err})"


def state(pcm):
    return lib.snd_pcm_state_name(lib.snd_pcm_state(pcm)).decode()


def wait_ready(pcm, deadline, draining=False):
    """Sleeps in poll() on the PCM's descriptors until they say POLLOUT (or POLLERR: the next
    call reports the error). Draining: until the state leaves DRAINING."""
    count = lib.snd_pcm_poll_descriptors_count(pcm)
    fds = (pollfd * count)()
    while time.monotonic() < deadline:
        if draining and lib.snd_pcm_state(pcm) != DRAINING:
            return
        if lib.snd_pcm_poll_descriptors(pcm, fds, count) != count:
            raise Failure("snd_pcm_poll_descriptors")
        poller = select.poll()
        for fd in fds:
            poller.register(fd.fd, fd.events)
        ready = {fd: ev for fd, ev in poller.poll(max(1, int(1000 * min(1.0, deadline - time.monotonic()))))}
        for fd in fds:
            fd.revents = ready.get(fd.fd, 0)
        revents = ctypes.c_ushort()
        if (err := lib.snd_pcm_poll_descriptors_revents(pcm, fds, count, ctypes.byref(revents))) < 0:
            raise Failure(f"snd_pcm_poll_descriptors_revents: {strerror(err)}")
        if revents.value & (select.POLLERR | select.POLLOUT) and not draining:
            return
    raise Failure(f"a wait in poll() past the deadline, in state {state(pcm)}")


def setup(pcm, rate, buffer, period):
    hw = ctypes.c_void_p()
    lib.snd_pcm_hw_params_malloc(ctypes.byref(hw))
    try:
        lib.snd_pcm_hw_params_any(pcm, hw)
        for what, err in (("access", lib.snd_pcm_hw_params_set_access(pcm, hw, RW_INTERLEAVED)),
                          ("format", lib.snd_pcm_hw_params_set_format(pcm, hw, S16_LE)),
                          ("channels", lib.snd_pcm_hw_params_set_channels(pcm, hw, 2))):
            if err < 0:
                raise Failure(f"{what}: {strerror(err)}")
        r, b, p = ctypes.c_uint(rate), ctypes.c_ulong(buffer), ctypes.c_ulong(period)
        for what, err in (("rate", lib.snd_pcm_hw_params_set_rate_near(pcm, hw, ctypes.byref(r), None)),
                          ("buffer", lib.snd_pcm_hw_params_set_buffer_size_near(pcm, hw, ctypes.byref(b))),
                          ("period", lib.snd_pcm_hw_params_set_period_size_near(pcm, hw, ctypes.byref(p), None)),
                          ("hw_params", lib.snd_pcm_hw_params(pcm, hw))):
            if err < 0:
                raise Failure(f"{what}: {strerror(err)}")
        lib.snd_pcm_hw_params_get_period_size(hw, ctypes.byref(p), None)
        return p.value
    finally:
        lib.snd_pcm_hw_params_free(hw)


def delay(pcm):
    d = ctypes.c_long()
    err = lib.snd_pcm_delay(pcm, ctypes.byref(d))
    return d.value if err == 0 else err


def play(device, data, a, result):
    """One open: writes `data` whole, pausing where asked, drains and closes."""
    deadline = time.monotonic() + a.deadline
    pcm = ctypes.c_void_p()
    if (err := lib.snd_pcm_open(ctypes.byref(pcm), device.encode(), 0, NONBLOCK if a.nonblock else 0)) < 0:
        raise Failure(f"open: {strerror(err)}")
    result["opens"] += 1
    try:
        period = setup(pcm, a.rate, a.buffer, a.period)
        frames, at, paused = len(data) // FRAME, 0, a.pause_at is None
        while at < frames:
            if time.monotonic() > deadline:
                raise Failure(f"writing past the deadline at frame {at}, in state {state(pcm)}")
            if not paused and at >= a.pause_at:
                paused = True
                pause = result["pause"] = {"rc": [lib.snd_pcm_pause(pcm, 1)], "at": at, "delay": [delay(pcm)]}
                t = time.monotonic()
                time.sleep(a.pause_for)
                pause["state"] = state(pcm)
                pause["delay"].append(delay(pcm))
                pause["rc"].append(lib.snd_pcm_pause(pcm, 0))
                pause["seconds"] = round(time.monotonic() - t, 3)
            end = min(frames, at + period, a.pause_at if not paused and a.pause_at > at else frames)
            n = lib.snd_pcm_writei(pcm, data[at * FRAME:end * FRAME], end - at)
            if n == -11:  # EAGAIN
                wait_ready(pcm, deadline)
            elif n == -32:  # EPIPE: an underrun, recovered as aplay does
                result["underruns"] += 1
                if (err := lib.snd_pcm_prepare(pcm)) < 0:
                    raise Failure(f"prepare after an underrun at frame {at}: {strerror(err)}")
            elif n < 0:
                raise Failure(f"write at frame {at}: {strerror(n)}")
            else:
                at += n
        result["frames"] += at
        err = lib.snd_pcm_drain(pcm)
        if err == -11 and a.nonblock:
            wait_ready(pcm, deadline, draining=True)
        elif err < 0:
            raise Failure(f"drain: {strerror(err)}")
    finally:
        lib.snd_pcm_close(pcm)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("device")
    ap.add_argument("raw")
    ap.add_argument("--rate", type=int, default=44100)
    ap.add_argument("--buffer", type=int, default=22050)
    ap.add_argument("--period", type=int, default=2205)
    ap.add_argument("--pause-at", type=int)
    ap.add_argument("--pause-for", type=float, default=1.0)
    ap.add_argument("--nonblock", action="store_true")
    ap.add_argument("--segments", type=int, default=1)
    ap.add_argument("--deadline", type=float, default=30.0)
    a = ap.parse_args()
    data = open(a.raw, "rb").read()
    size = len(data) // FRAME // a.segments * FRAME
    result = {"frames": 0, "underruns": 0, "opens": 0}
    t = time.monotonic()
    try:
        for segment in range(a.segments):
            play(a.device, data[segment * size:(segment + 1) * size], a, result)
    except Failure as e:
        result["error"] = str(e)
    result["seconds"] = round(time.monotonic() - t, 3)
    print(json.dumps(result), flush=True)
    sys.exit(1 if "error" in result else 0)


main()
