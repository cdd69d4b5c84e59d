"""Host side of 67-desktop-pulseaudio: the user's 1 kHz tone (peak 16000 LSB, played through
PulseAudio while keepalived kept both sinks awake) reached the HDA codec: QEMU's WAV holds
samples far above keepalived's ceiling (0.05 of full scale), which only the user's sound can
make."""

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
    samples = array.array("h")
    samples.frombytes(wav.data[:len(wav.data) // 2 * 2])
    loud = sum(1 for s in samples if abs(s) > 4 * CEILING) // max(wav.channels, 1)
    seconds = loud / wav.rate if wav.rate else 0
    report("ok" if seconds >= 0.3 else "FAIL", "user-tone-reached-codec",
           f"{seconds:.2f} s of the codec's input above {4 * CEILING} LSB (the tone peaks at 16000; keepalived stays under {CEILING})")
