"""Host side of 50-keepalived-hda: what reached the HDA codec (the WAV QEMU wrote, unscaled:
mixer=off) must be exactly what keepalived rendered. The clip runs (hw, plughw, dmix) come
first and must be a constant -1 LSB, every sample, on both channels; the sine run that follows
must be a 100 Hz sine peaking at -40 dB (QEMU resamples 48 kHz to 44.1 kHz, so its shape is
checked by frequency and peak, not sample by sample); nothing anywhere above the ceiling
(0.05 of full scale)."""

import array
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vmwav  # noqa: E402

CEILING = int(0.05 * 32768)


def check(result, report):
    try:
        wav = vmwav.read(result.hda_wav)
    except (OSError, ValueError) as e:
        report("FAIL", "wav", f"cannot read {result.hda_wav}: {e}")
        return
    if (wav.channels, wav.bits) != (2, 16):
        report("FAIL", "wav", f"QEMU wrote {wav.channels} ch {wav.bits}-bit, expected 2 ch 16-bit")
        return
    samples = array.array("h")
    samples.frombytes(wav.data[:len(wav.data) // 2 * 2])
    rate = wav.rate
    peak = max((abs(s) for s in samples), default=0)
    report("ok" if peak <= CEILING else "FAIL", "wav-ceiling", f"peak {peak} LSB over {len(samples) // 2} frames (ceiling {CEILING})")
    first_other = next((i for i, s in enumerate(samples) if s != -1), len(samples))
    clip_seconds = first_other / 2 / rate
    clip_done = (result.io_dir / "clip-done").exists()
    # The three clip runs play for minutes; a value other than -1 inside them would end the
    # -1 stretch early (before the sine, which the guest starts only after all three).
    expected = 3 * 0.9 * float(__import__("os").environ.get("KEEPALIVED_VM_SECONDS", "120"))
    report("ok" if clip_done and clip_seconds >= expected else "FAIL", "wav-clip-exact",
           f"{clip_seconds:.1f} s of constant -1 LSB on both channels before the first other sample (expected >= {expected:.0f} s)")
    sine = samples[first_other - first_other % 2::2]  # left channel from the sine's start
    if len(sine) < rate:
        report("FAIL", "wav-sine", f"only {len(sine)} frames after the clip runs")
        return
    body = sine[rate // 10:-rate // 10]  # away from the start and the stop
    crossings = sum(1 for a, b in zip(body, body[1:]) if a < 0 <= b)
    frequency = crossings / (len(body) / rate)
    sine_peak = max(abs(s) for s in body)
    expected_peak = round(0.01 * 32768)
    ok = abs(frequency - 100) <= 2 and abs(sine_peak - expected_peak) <= 3
    report("ok" if ok else "FAIL", "wav-sine",
           f"{frequency:.1f} Hz (100 expected), peak {sine_peak} LSB ({expected_peak} expected), {len(sine) / rate:.1f} s")
