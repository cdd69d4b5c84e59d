"""Host side of 82-hda-carry-stall: in the WAV QEMU wrote of what the HDA codec got (unscaled:
mixer=off), no frame of the carried ramp twice (the card replaying its ring's music while
keepalived stood still), nothing that is not the ramp, keepalived's signal (-1 LSB) or digital
zero; and the ramp's frames in order up to keepalived's stop. Printed: the stretches of the WAV
around the stop."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import linkcapture as lc  # noqa: E402
import vmwav  # noqa: E402

TAG = 30


def check(result, report):
    try:
        wav = vmwav.read(result.hda_wav)
    except (OSError, ValueError) as e:
        report("FAIL", "wav", f"cannot read {result.hda_wav}: {e}")
        return
    if (wav.channels, wav.bits, wav.rate) != (2, 16, lc.RATE):
        report("FAIL", "wav", f"QEMU wrote {wav.channels} ch {wav.bits}-bit at {wav.rate} Hz, expected 2 ch 16-bit at {lc.RATE}")
        return
    runs = lc.runs(wav.data)
    ramp = [r for r in runs if r.kind == "ramp" and r.tag == TAG]
    if not ramp:
        report("FAIL", "ramp-on-the-codec", f"no frame of the ramp (tag {TAG}) in {len(wav.data) // lc.FRAME} frames: "
               f"{[r for r in runs if r.length > lc.MS][:12]}")
        return
    seen, twice = set(), 0
    for r in ramp:
        frames = set(range(r.n0, r.n0 + r.length))
        twice += len(frames & seen)
        seen |= frames
    backwards = [(a, b) for a, b in zip(ramp, ramp[1:]) if b.n0 < a.n0 + a.length]
    first = ramp[0].start
    shown = [r for r in runs if r.end > first and r.length > lc.MS][:16]
    report("ok" if twice == 0 and not backwards else "FAIL", "no-music-replayed",
           f"{len(seen)} frames of the ramp reached the codec in {len(ramp)} stretches, {twice} of them more than once "
           f"(stretches that went back: {backwards[:4]}); from the ramp's start on: {shown}")
    other = sum(r.length for r in runs if r.kind == "other" or (r.kind == "ramp" and r.tag != TAG))
    report("ok" if other == 0 else "FAIL", "nothing-else", f"{other} frames neither the ramp, keepalived's signal nor zero")
