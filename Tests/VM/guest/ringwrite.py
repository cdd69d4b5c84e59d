#!/usr/bin/python3
"""Write one ring and nothing more: `ringwrite.py PCM FORMAT CHANNELS RATE FRAMES SECONDS`.

Opens PCM (libasound through ctypes), asks for FORMAT (an ALSA name: S16_LE,
IEC958_SUBFRAME_LE), CHANNELS, RATE and a ring of FRAMES, sets the stop threshold to the
boundary (an empty ring is no underrun: what keepalived's ring loop does), writes exactly one
ring of a counter (sample n of frame f is f * CHANNELS + n, in the format's width), starts it and
then writes nothing for SECONDS while it watches the substream's hw_ptr in /proc (every 0.25 s).
Prints one JSON line: {"buffer": frames, "period": frames, "samples": [[seconds, hw_ptr, state]...]}
or {"error": "..."} (exit 1). What a DMA ring does then: its hw_ptr goes on for ever; what an
indirect driver does: its hw_ptr stops once the frames handed over have been played."""

import ctypes
import ctypes.util
import json
import re
import struct
import sys
import time

lib = ctypes.CDLL(ctypes.util.find_library("asound") or "libasound.so.2")
lib.snd_strerror.restype = ctypes.c_char_p
lib.snd_pcm_format_value.argtypes = [ctypes.c_char_p]
lib.snd_pcm_writei.restype = ctypes.c_long
lib.snd_pcm_writei.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong]
lib.snd_pcm_hw_params_set_rate_near.argtypes = [ctypes.c_void_p] * 4
lib.snd_pcm_hw_params_set_buffer_size_near.argtypes = [ctypes.c_void_p] * 3


def fail(what, err):
    print(json.dumps({"error": f"{what}: {lib.snd_strerror(err).decode()} ({err})"}), flush=True)
    sys.exit(1)


def main():
    device, fmt_name, channels, rate, frames, seconds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), float(sys.argv[6])
    pcm = ctypes.c_void_p()
    err = lib.snd_pcm_open(ctypes.byref(pcm), device.encode(), 0, 0)
    if err < 0:
        fail("open", err)
    hw = ctypes.c_void_p()
    lib.snd_pcm_hw_params_malloc(ctypes.byref(hw))
    lib.snd_pcm_hw_params_any(pcm, hw)
    fmt = lib.snd_pcm_format_value(fmt_name.encode())
    for what, err in (("access", lib.snd_pcm_hw_params_set_access(pcm, hw, 3)),  # RW_INTERLEAVED
                      ("format", lib.snd_pcm_hw_params_set_format(pcm, hw, fmt)),
                      ("channels", lib.snd_pcm_hw_params_set_channels(pcm, hw, channels))):
        if err < 0:
            fail(what, err)
    r = ctypes.c_uint(rate)
    if (err := lib.snd_pcm_hw_params_set_rate_near(pcm, hw, ctypes.byref(r), None)) < 0:
        fail("rate", err)
    b = ctypes.c_ulong(frames)
    if (err := lib.snd_pcm_hw_params_set_buffer_size_near(pcm, hw, ctypes.byref(b))) < 0:
        fail("buffer", err)
    if (err := lib.snd_pcm_hw_params(pcm, hw)) < 0:
        fail("hw_params", err)
    buffer, period = ctypes.c_ulong(), ctypes.c_ulong()
    lib.snd_pcm_hw_params_get_buffer_size(hw, ctypes.byref(buffer))
    lib.snd_pcm_hw_params_get_period_size(hw, ctypes.byref(period), None)
    sw = ctypes.c_void_p()
    lib.snd_pcm_sw_params_malloc(ctypes.byref(sw))
    lib.snd_pcm_sw_params_current(pcm, sw)
    boundary = ctypes.c_ulong()
    lib.snd_pcm_sw_params_get_boundary(sw, ctypes.byref(boundary))
    lib.snd_pcm_sw_params_set_start_threshold.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong]
    lib.snd_pcm_sw_params_set_stop_threshold.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulong]
    lib.snd_pcm_sw_params_set_start_threshold(pcm, sw, buffer.value)
    lib.snd_pcm_sw_params_set_stop_threshold(pcm, sw, boundary.value)
    if (err := lib.snd_pcm_sw_params(pcm, sw)) < 0:
        fail("sw_params", err)
    width = lib.snd_pcm_format_physical_width(fmt) // 8
    code = {1: "B", 2: "H", 4: "I"}[width]
    mask = (1 << (8 * width)) - 1
    data = struct.pack(f"<{buffer.value * channels}{code}", *((i & mask) for i in range(buffer.value * channels)))
    written = lib.snd_pcm_writei(pcm, data, buffer.value)
    if written != buffer.value:
        fail(f"write ({written} of {buffer.value})", written if written < 0 else -5)
    # The substream's /proc status: the card and device from the PCM's info.
    lib.snd_pcm_info_malloc.argtypes = [ctypes.c_void_p]
    pinfo = ctypes.c_void_p()
    lib.snd_pcm_info_malloc(ctypes.byref(pinfo))
    lib.snd_pcm_info(pcm, pinfo)
    card, dev, sub = lib.snd_pcm_info_get_card(pinfo), lib.snd_pcm_info_get_device(pinfo), lib.snd_pcm_info_get_subdevice(pinfo)
    status = f"/proc/asound/card{card}/pcm{dev}p/sub{sub}/status"
    samples = []
    t0 = time.monotonic()
    while True:
        now = time.monotonic() - t0
        text = open(status).read()
        hw_ptr = re.search(r"hw_ptr\s*:\s*(\d+)", text)
        state = re.search(r"state:\s*(\S+)", text)
        samples.append([round(now, 3), int(hw_ptr.group(1)) if hw_ptr else None, state.group(1) if state else text.strip()])
        if now >= seconds:
            break
        time.sleep(0.25)
    print(json.dumps({"buffer": buffer.value, "period": period.value, "rate": r.value, "status": status, "samples": samples}), flush=True)
    lib.snd_pcm_close(pcm)


main()
