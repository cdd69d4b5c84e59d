#!/usr/bin/python3
"""What a synchronising player (shairport-sync, snapclient) reads of a PCM's position, against
when its frames really reach the link: `syncprobe.py PCM CAPTURE RAW OUT.json [options]`.

Opens CAPTURE (the loopback's device 1, S16_LE stereo at --rate, time stamps enabled,
CLOCK_MONOTONIC; "-": none, the player's looks only) and starts it, then plays RAW (S16_LE stereo frames, no header) through PCM
(the loopback's device 0, straight or `keepalived:`), both non-blocking in this one thread, and
at every look (every 1-3 ms, a random step so that the looks fall anywhere in the loopback's
jiffy) records:

  the capture: snd_pcm_htimestamp (avail, tstamp): frames captured + avail is the capture's
      position, which the kernel says it first had at tstamp (a hardware PCM's tstamp moves
      only with its position);
  the player: snd_pcm_htimestamp (avail, tstamp), then CLOCK_MONOTONIC, snd_pcm_avail_delay
      (avail, delay) and CLOCK_MONOTONIC again, the frames written so far, the state, and how
      long the htimestamp call took (alsa-lib loops in it until two reads of avail agree).

It writes whatever fits after each look, until RAW is all written and played, then closes the
player and captures 0.3 s more. OUT.json: {"rate", "buffer", "period", "looks": [[capture
tstamp, capture position, player tstamp, player avail, t0, avail, delay, t1, written, state,
htimestamp seconds], ...]} (times in seconds of CLOCK_MONOTONIC); the capture's frames go to
OUT.raw. The analysis (where RAW's frame 0 is in the capture, predicted against actual arrival)
is syncstats() in the scenario that runs this."""

import argparse
import ctypes
import ctypes.util
import json
import random
import sys
import time

lib = ctypes.CDLL(ctypes.util.find_library("asound") or "libasound.so.2")
lib.snd_strerror.restype = ctypes.c_char_p
lib.snd_pcm_writei.restype = ctypes.c_long
lib.snd_pcm_writei.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong]
lib.snd_pcm_readi.restype = ctypes.c_long
lib.snd_pcm_readi.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong]
lib.snd_pcm_hw_params_set_rate_near.argtypes = [ctypes.c_void_p] * 4
lib.snd_pcm_hw_params_set_buffer_size_near.argtypes = [ctypes.c_void_p] * 3
lib.snd_pcm_hw_params_set_period_size_near.argtypes = [ctypes.c_void_p] * 4
lib.snd_pcm_avail_delay.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_long)]
lib.snd_pcm_avail.restype = ctypes.c_long


class timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


lib.snd_pcm_htimestamp.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_ulong), ctypes.POINTER(timespec)]

S16_LE, RW_INTERLEAVED, NONBLOCK, FRAME = 2, 3, 1, 4
PLAYBACK, CAPTURE = 0, 1
TSTAMP_ENABLE, TSTAMP_MONOTONIC = 1, 1
RUNNING, XRUN = 3, 4


class Failure(Exception):
    pass


def strerror(err):
    return f"{lib.snd_strerror(err).decode()} ({err})"


def setup(pcm, rate, buffer, period):
    """hw_params as asked (near) and sw_params with time stamps on CLOCK_MONOTONIC; (buffer, period)."""
    hw = ctypes.c_void_p()
    lib.snd_pcm_hw_params_malloc(ctypes.byref(hw))
    try:
        lib.snd_pcm_hw_params_any(pcm, hw)
        r, b, p = ctypes.c_uint(rate), ctypes.c_ulong(buffer), ctypes.c_ulong(period)
        for what, err in (("access", lib.snd_pcm_hw_params_set_access(pcm, hw, RW_INTERLEAVED)),
                          ("format", lib.snd_pcm_hw_params_set_format(pcm, hw, S16_LE)),
                          ("channels", lib.snd_pcm_hw_params_set_channels(pcm, hw, 2)),
                          ("rate", lib.snd_pcm_hw_params_set_rate_near(pcm, hw, ctypes.byref(r), None)),
                          ("buffer", lib.snd_pcm_hw_params_set_buffer_size_near(pcm, hw, ctypes.byref(b))),
                          ("period", lib.snd_pcm_hw_params_set_period_size_near(pcm, hw, ctypes.byref(p), None)),
                          ("hw_params", lib.snd_pcm_hw_params(pcm, hw))):
            if err < 0:
                raise Failure(f"{what}: {strerror(err)}")
        if r.value != rate:
            raise Failure(f"rate {r.value}, not {rate}")
        lib.snd_pcm_hw_params_get_buffer_size(hw, ctypes.byref(b))
        lib.snd_pcm_hw_params_get_period_size(hw, ctypes.byref(p), None)
    finally:
        lib.snd_pcm_hw_params_free(hw)
    sw = ctypes.c_void_p()
    lib.snd_pcm_sw_params_malloc(ctypes.byref(sw))
    try:
        lib.snd_pcm_sw_params_current(pcm, sw)
        for what, err in (("tstamp_mode", lib.snd_pcm_sw_params_set_tstamp_mode(pcm, sw, TSTAMP_ENABLE)),
                          ("tstamp_type", lib.snd_pcm_sw_params_set_tstamp_type(pcm, sw, TSTAMP_MONOTONIC)),
                          ("sw_params", lib.snd_pcm_sw_params(pcm, sw))):
            if err < 0:
                raise Failure(f"{what}: {strerror(err)}")
    finally:
        lib.snd_pcm_sw_params_free(sw)
    return b.value, p.value


def htimestamp(pcm):
    avail, ts = ctypes.c_ulong(), timespec()
    err = lib.snd_pcm_htimestamp(pcm, ctypes.byref(avail), ctypes.byref(ts))
    if err < 0:
        return None, None
    return avail.value, ts.tv_sec + ts.tv_nsec / 1e9


def open_pcm(name, stream):
    pcm = ctypes.c_void_p()
    if (err := lib.snd_pcm_open(ctypes.byref(pcm), name.encode(), stream, NONBLOCK)) < 0:
        raise Failure(f"open {name}: {strerror(err)}")
    return pcm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("device")
    ap.add_argument("capture")
    ap.add_argument("raw")
    ap.add_argument("out")
    ap.add_argument("--rate", type=int, default=44100)
    ap.add_argument("--buffer", type=int, default=8192)
    ap.add_argument("--period", type=int, default=1024)
    ap.add_argument("--deadline", type=float, default=60.0)
    a = ap.parse_args()
    data = open(a.raw, "rb").read()
    frames = len(data) // FRAME
    result = {"rate": a.rate, "looks": []}
    looks = result["looks"]
    captured = bytearray()
    cbuf = ctypes.create_string_buffer(65536 * FRAME)
    deadline = time.monotonic() + a.deadline
    cap = play = None
    try:
        if a.capture != "-":
            cap = open_pcm(a.capture, CAPTURE)
            # 2 s: a loaded host stops the emulated guest for a second and more now and then.
            setup(cap, a.rate, 2 * a.rate, a.period)
            if (err := lib.snd_pcm_start(cap)) < 0:
                raise Failure(f"capture start: {strerror(err)}")

        def read_capture():
            if cap is None:
                return
            n = lib.snd_pcm_readi(cap, cbuf, 65536)
            if n > 0:
                captured.extend(cbuf.raw[:n * FRAME])
            elif n not in (-11, 0):
                raise Failure(f"capture read: {strerror(n)}")

        play = open_pcm(a.device, PLAYBACK)
        result["buffer"], result["period"] = setup(play, a.rate, a.buffer, a.period)
        written = 0
        avail_p, delay_p = ctypes.c_long(), ctypes.c_long()
        while True:
            if time.monotonic() > deadline:
                raise Failure(f"past the deadline at frame {written} of {frames}")
            cavail, cts = htimestamp(cap) if cap is not None else (None, None)
            cpos = len(captured) // FRAME + (cavail or 0)
            h0 = time.monotonic()
            pavail, pts = htimestamp(play)
            h = time.monotonic() - h0
            t0 = time.monotonic()
            err = lib.snd_pcm_avail_delay(play, ctypes.byref(avail_p), ctypes.byref(delay_p))
            t1 = time.monotonic()
            state = lib.snd_pcm_state(play)
            looks.append([cts, cpos, pts, pavail, t0, avail_p.value if err == 0 else err, delay_p.value if err == 0 else err, t1, written,
                          state, round(h, 6)])
            read_capture()
            if written < frames:
                room = min(pavail or 0, frames - written)
                if room > 0:
                    n = lib.snd_pcm_writei(play, data[written * FRAME:(written + room) * FRAME], room)
                    if n > 0:
                        written += n
                    elif n == -32:
                        raise Failure(f"an underrun at frame {written}")
                    elif n != -11:
                        raise Failure(f"write at frame {written}: {strerror(n)}")
            elif state != RUNNING or (err == 0 and delay_p.value <= 0):
                # All played: the player goes, the capture records what follows it.
                lib.snd_pcm_close(play)
                play = None
                ended = time.monotonic()
                while time.monotonic() - ended < 0.3:
                    read_capture()
                    time.sleep(0.01)
                break
            time.sleep(random.uniform(0.001, 0.003))
        result["frames"] = written
    except Failure as e:
        result["error"] = str(e)
    finally:
        if play is not None:
            lib.snd_pcm_close(play)
        if cap is not None:
            lib.snd_pcm_close(cap)
    with open(a.out, "w") as f:
        json.dump(result, f)
    with open(a.out.rsplit(".", 1)[0] + ".raw", "wb") as f:
        f.write(captured)
    print(json.dumps({k: v for k, v in result.items() if k != "looks"} | {"looks": len(looks), "captured": len(captured) // FRAME}), flush=True)
    sys.exit(1 if "error" in result else 0)


main()
