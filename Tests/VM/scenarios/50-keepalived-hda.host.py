"""Host side of 50-keepalived-hda: what reached the HDA codec (the WAV QEMU wrote, unscaled:
mixer=off) must be exactly what keepalived rendered. The clip runs come first: on hw and plughw
(the ring loop) a constant -1 LSB, every sample, on both channels; through dmix the same but for
dmix's start-up silence and frames dmix mixed twice (at most 2 LSB, reported); the sine run that follows
must be a 100 Hz sine peaking at -40 dB (QEMU resamples 48 kHz to 44.1 kHz, so its shape is
checked by frequency and peak, not sample by sample); nothing anywhere above the ceiling
(0.05 of full scale)."""

import array
import os
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
    left = samples[0::2]
    right = samples[1::2]
    # The sine run comes last: it plays 3 s after it is seen playing, then stops.
    clip_end = max(0, len(left) - 5 * rate)
    # dmix primes the card's ring with digital silence when its stream starts (aplay's too):
    # short runs of zeros where a stream starts are its, anything else is not ours.
    zero_runs = []
    index = 0
    while index < clip_end:
        if left[index] == 0:
            end = index
            while end < clip_end and left[end] == 0 and right[end] == 0:
                end += 1
            zero_runs.append((index / rate, (end - index) / rate))
            index = max(end, index + 1)
        else:
            index += 1
    minus_one = sum(1 for value in left[:clip_end] if value == -1) / rate
    # The hw run's seconds, then the plughw and default runs' (at most 30 s each: the guest's side).
    run = float(os.environ.get("KEEPALIVED_VM_SECONDS", "60"))
    expected = 0.9 * (run + 2 * min(run, 30.0))
    # The ring-loop runs (hw, plughw) come before dmix's start-up silence: there the codec reads
    # keepalived's own ring, so every sample is exactly -1. From dmix's start on, what the codec
    # reads is dmix's mix: dmix adds a client's frame to whatever its slave ring holds unless the
    # kernel has zero-filled that frame since it played, and when the host stalls the emulated
    # codec (TCG) a frame can be mixed before it was cleared: -1 + -1. That is dmix's sum, never
    # more than twice our sample and still far below the ceiling; it is reported, and anything
    # else fails.
    dmix_start = int(zero_runs[0][0] * rate) if zero_runs else clip_end
    ring_values = sorted(set(left[:dmix_start]) | set(right[:dmix_start]))
    dmix_values = sorted(set(left[dmix_start:clip_end]) | set(right[dmix_start:clip_end]))
    doubled = [index for index in range(dmix_start, clip_end) if left[index] == -2 or right[index] == -2]
    doubled_spans = []
    for index in doubled:
        if doubled_spans and index == doubled_spans[-1][1]:
            doubled_spans[-1][1] = index + 1
        else:
            doubled_spans.append([index, index + 1])
    ok = (ring_values == [-1] and set(dmix_values) <= {-2, -1, 0} and len(zero_runs) <= 3
          and all(length <= 0.5 for _, length in zero_runs) and minus_one >= expected
          and len(doubled) <= 0.02 * max(1, clip_end - dmix_start))
    report("ok" if ok else "FAIL", "wav-clip-exact",
           f"{minus_one:.1f} s of -1 LSB on both channels (expected >= {expected:.0f} s); ring-loop runs: values {ring_values[:6]}; "
           f"dmix run from {dmix_start / rate:.1f} s: values {dmix_values[:6]}, "
           f"{len(doubled)} frames mixed twice by dmix {[(round(a / rate, 3), b - a) for a, b in doubled_spans][:5]}; "
           f"silence only where dmix starts its stream: {[(round(at, 1), round(length, 3)) for at, length in zero_runs][:5]}")
    body = left[len(left) - int(2.7 * rate):len(left) - int(0.2 * rate)]
    if len(left) < 6 * rate:
        report("FAIL", "wav-sine", f"only {len(left) / rate:.1f} s in the WAV")
        return
    crossings = sum(1 for a, b in zip(body, body[1:]) if a < 0 <= b)
    frequency = crossings / (len(body) / rate)
    sine_peak = max(abs(s) for s in body)
    expected_peak = round(0.01 * 32768)
    ok = abs(frequency - 100) <= 2 and abs(sine_peak - expected_peak) <= 3
    report("ok" if ok else "FAIL", "wav-sine",
           f"{frequency:.1f} Hz (100 expected), peak {sine_peak} LSB ({expected_peak} expected) in the last 2.5 s")
