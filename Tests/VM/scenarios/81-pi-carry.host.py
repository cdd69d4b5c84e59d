"""Host side of 81-pi-carry: decodes what the stand-in vc4hdmi0 played while keepalived carried
aplay (io/phases.json, kind `iec958-carried`), with 75-pi-standin.host.py's decoder:

- one stream from the capture's first frame to its last: no reopen, no gap, no frame lost, no
  frame the card played for want of one;
- every subframe valid IEC958, the Z preamble every 192 frames counted from the first one, so
  the channel-status blocks run unbroken from keepalived's signal into the player's frames and
  back; every block's channel status the same: consumer PCM, 04 82 00, 48 kHz's code, 24-bit
  words (0x0B);
- the WAV's samples found whole and exact, in order (16-bit samples in the top 16 of the 24
  bits, 32-bit ones' top 24 bits), and keepalived's signal (non-zero, within its ceiling) before
  and after them."""

import array
import importlib.util
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vmwav  # noqa: E402

_spec = importlib.util.spec_from_file_location("pistandin_host", Path(__file__).with_name("75-pi-standin.host.py"))
standin = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(standin)

STATUS = bytes([0x04, 0x82, 0x00, 0x02, 0x0B])


def find(haystack, needle):
    """The index of `needle`'s first 64 values in `haystack` (values never repeat there), or None."""
    head = needle[:64]
    for i in range(len(haystack) - len(head) + 1):
        if haystack[i] == head[0] and haystack[i:i + len(head)] == head:
            return i
    return None


def check(result, report):
    for io, ph, recs in standin.captures(result, report):
        name = ph["name"]
        data, start, problem = standin.contiguous(recs)
        words = array.array("I")
        words.frombytes(data[:len(data) // 4 * 4])
        errors, samples, status, blocks = standin.decode(words, 2)
        if problem:
            errors.insert(0, problem)
        if ph.get("lost"):
            errors.append(f"{ph['lost']} frames lost")
        if status is not None and status[:5] != STATUS:
            errors.append(f"channel status {status[:5].hex(' ')}, expected {STATUS.hex(' ')}")
        report("FAIL" if errors else "ok", f"{name}-iec958",
               f"alsa-lib {ph.get('alsa')}: {len(words) // 2} frames ({len(words) / 2 / 48000:.2f} s) from frame {start}, {blocks} blocks unbroken, "
               f"status {status.hex(' ')[:14] if status else None}; {len(errors)} errors {errors[:3]}")
        if not samples:
            continue
        wav = vmwav.read(str(io / ph["wav"]))
        want = list(wav.samples())
        shift = 8 if ph["bits"] == 16 else 0
        # The 24-bit field: a 16-bit sample in its top 16 bits, a 32-bit one's top 24 bits (its
        # lowest byte, zero in the WAV, is what the subframe does not carry).
        if ph["bits"] == 32:
            want = [s >> 8 for s in want]
        left = [s >> shift for s in samples[0]]
        wanted_left = want[0::2]
        at = find(left, wanted_left)
        if at is None:
            report("FAIL", f"{name}-exact", f"the WAV's first frames are not in the {len(left)} frames played")
            continue
        n = len(wanted_left)
        got = [s >> shift for f in range(at, min(at + n, len(samples[0]))) for s in (samples[0][f], samples[1][f])]
        low = [s & 0xFF for f in range(at, min(at + n, len(samples[0]))) for s in (samples[0][f], samples[1][f])] if shift else []
        first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
        exact = got == want and not any(low)
        report("ok" if exact else "FAIL", f"{name}-exact",
               f"the WAV's {n} frames at the card's frame {at}: {'exactly' if exact else f'first difference at sample {first} of {len(got)}'}"
               + (f", {sum(1 for x in low if x)} samples with bits below the 16" if any(low) else ""))
        before = [s for ch in samples for s in ch[:at]]
        after = [s for ch in samples for s in ch[at + n:]]
        signal_ok = (len(before) > 2 * 0.3 * 48000 and len(after) > 2 * 0.3 * 48000 and all(before) and all(after)
                     and max(map(abs, before + after)) <= standin.CEILING)
        report("ok" if signal_ok else "FAIL", f"{name}-signal-around",
               f"{len(before) // 2} frames of keepalived's signal before, {len(after) // 2} after; zeros {before.count(0) + after.count(0)}, "
               f"peak {max(map(abs, before + after), default=0)} (ceiling {standin.CEILING})")
