#!/usr/bin/python3
"""alsa_caps.py PCM...: for each PCM, the hw parameter ranges libasound reports and whether
period wakeups can be disabled (snd_pcm_hw_params_can_disable_period_wakeup), via ctypes."""
import ctypes
import sys

lib = ctypes.CDLL("libasound.so.2")
SND_PCM_STREAM_PLAYBACK = 0
FORMATS = ["S8", "U8", "S16_LE", "S16_BE", "U16_LE", "U16_BE", "S24_LE", "S24_BE", "U24_LE",
           "U24_BE", "S32_LE", "S32_BE", "U32_LE", "U32_BE", "FLOAT_LE", "FLOAT_BE",
           "FLOAT64_LE", "FLOAT64_BE"]


def rng(fn_min, fn_max, params, t=ctypes.c_uint):
    lo, hi, d = t(), t(), ctypes.c_int()
    getattr(lib, fn_min)(params, ctypes.byref(lo), ctypes.byref(d))
    getattr(lib, fn_max)(params, ctypes.byref(hi), ctypes.byref(d))
    return f"{lo.value}..{hi.value}"


for name in sys.argv[1:]:
    pcm = ctypes.c_void_p()
    err = lib.snd_pcm_open(ctypes.byref(pcm), name.encode(), SND_PCM_STREAM_PLAYBACK, 0)
    if err < 0:
        print(f"{name}: open failed: {ctypes.c_char_p(lib.snd_strerror(err)).value.decode()}")
        continue
    params = ctypes.c_void_p()
    lib.snd_pcm_hw_params_malloc(ctypes.byref(params))
    lib.snd_pcm_hw_params_any(pcm, params)
    fmts = [f for i, f in enumerate(FORMATS) if lib.snd_pcm_hw_params_test_format(pcm, params, i) == 0]
    can = lib.snd_pcm_hw_params_can_disable_period_wakeup(params)
    print(f"{name}: formats {' '.join(fmts)}; channels {rng('snd_pcm_hw_params_get_channels_min', 'snd_pcm_hw_params_get_channels_max', params)}; "
          f"rate {rng('snd_pcm_hw_params_get_rate_min', 'snd_pcm_hw_params_get_rate_max', params)}; "
          f"buffer frames {rng('snd_pcm_hw_params_get_buffer_size_min', 'snd_pcm_hw_params_get_buffer_size_max', params, ctypes.c_ulong)}; "
          f"period frames {rng('snd_pcm_hw_params_get_period_size_min', 'snd_pcm_hw_params_get_period_size_max', params, ctypes.c_ulong)}; "
          f"periods {rng('snd_pcm_hw_params_get_periods_min', 'snd_pcm_hw_params_get_periods_max', params)}; "
          f"can disable period wakeup: {'yes' if can == 1 else 'no'}")
    lib.snd_pcm_hw_params_free(params)
    lib.snd_pcm_close(pcm)
