"""The link a receiver sees, as the loopback card's capture side recorded it (`snd-aloop`, S16_LE
stereo at 44.1 kHz, raw): what link-handoff and carry-chaos check their plays against, on the host.

A play's audio is a ramp that never holds a zero frame and whose frames never repeat, tagged so
that every play of a scenario is told from every other:

    left  = 1 + n mod 30000
    right = 1 + 8 * tag + n div 30000          (n < 240000: 5.4 s at 44.1 kHz; tag < 4095)

(tag 0 is link-handoff's ramp). keepalived's signal is -1 LSB on both channels, and a link with
no stream on it carries exact digital zero. ``runs`` reads a capture into stretches of each;
the guest makes its ramps with ``ramp`` (it imports this file from $VM_REPO)."""

import array
import struct

RATE = 44100
FRAME = 4
ZERO = b"\0" * FRAME
SIGNAL = b"\xff\xff\xff\xff"
SPAN = 30000
MS = RATE // 1000  # a millisecond of frames (44)


def ramp(tag, frames):
    """`frames` frames of the ramp tagged `tag`, raw S16_LE stereo."""
    return b"".join(struct.pack("<hh", 1 + n % SPAN, 1 + 8 * tag + n // SPAN) for n in range(frames))


def wav(data, rate=RATE):
    """Raw S16_LE stereo frames as a WAV file's bytes."""
    return (b"RIFF" + struct.pack("<I", 36 + len(data)) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, 2, rate, rate * 4, 4, 16)
            + b"data" + struct.pack("<I", len(data)) + data)


def common(cap, at, ramp, frame=FRAME):
    """Bytes of `ramp` equal from cap[at] on, in whole frames of `frame` bytes (the ramps' own
    16-bit stereo by default; carry-formats' signals in their format's)."""
    lo, hi = 0, min(len(ramp), len(cap) - at) // frame
    while lo < hi:  # the first differing frame, by bisection over prefixes
        mid = (lo + hi + 1) // 2
        if cap[at:at + mid * frame] == ramp[:mid * frame]:
            lo = mid
        else:
            hi = mid - 1
    return lo * frame


def zero_runs(cap):
    """(first frame, frames) of every run of zero frames."""
    runs, n, i = [], len(cap) // FRAME, 0
    while i < n:
        at = cap.find(ZERO, i * FRAME)
        while at >= 0 and at % FRAME:
            at = cap.find(ZERO, at + 1)
        if at < 0:
            break
        i = j = at // FRAME
        while j < n and cap[j * FRAME:(j + 1) * FRAME] == ZERO:
            j += 1
        runs.append((i, j - i))
        i = j
    return runs


class Run:
    """A stretch of the capture: `kind` "ramp" (the tag's frames n0 .. n0 + length - 1, one
    after the other), "signal", "zero" or "other"; from frame `start`, `length` frames."""
    __slots__ = ("kind", "tag", "n0", "start", "length")

    def __init__(self, kind, tag, n0, start, length=1):
        self.kind, self.tag, self.n0, self.start, self.length = kind, tag, n0, start, length

    @property
    def end(self):
        return self.start + self.length

    def __repr__(self):
        what = f"tag {self.tag} n {self.n0}.." if self.kind == "ramp" else self.kind
        return f"{what}x{self.length}@{self.start / RATE:.3f}s"


def runs(cap):
    """The capture as a list of Runs, in order."""
    samples = array.array("h")
    samples.frombytes(cap[:len(cap) // FRAME * FRAME])
    out, last = [], None
    for i, (left, right) in enumerate(zip(samples[0::2], samples[1::2])):
        if left == 0 and right == 0:
            kind, tag, n = "zero", None, None
        elif left == -1 and right == -1:
            kind, tag, n = "signal", None, None
        elif 1 <= left <= SPAN and right >= 1:
            tag, high = divmod(right - 1, 8)
            kind, n = "ramp", high * SPAN + left - 1
        else:
            kind, tag, n = "other", None, None
        if last is not None and last.kind == kind and last.tag == tag and (kind != "ramp" or n == last.n0 + last.length):
            last.length += 1
        else:
            last = Run(kind, tag, n, i)
            out.append(last)
    return out
