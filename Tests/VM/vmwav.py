"""Read the WAV files QEMU's wav audio backend writes (tolerates a header whose sizes were never
filled in, as when QEMU is killed)."""

import array
import struct


class Wav:
    def __init__(self, channels, rate, bits, data):
        self.channels = channels
        self.rate = rate
        self.bits = bits
        self.data = data

    @property
    def frames(self):
        return len(self.data) // (self.channels * self.bits // 8)

    def samples(self):
        """All samples as ints (16-bit only)."""
        if self.bits != 16:
            raise ValueError("16-bit only")
        n = len(self.data) // 2
        return struct.unpack(f"<{n}h", self.data[:2 * n])


def read(path):
    b = open(path, "rb").read()
    if b[:4] != b"RIFF" or b[8:12] != b"WAVE":
        raise ValueError("not a RIFF/WAVE file")
    pos = 12
    fmt = None
    while pos + 8 <= len(b):
        cid, size = b[pos:pos + 4], struct.unpack("<I", b[pos + 4:pos + 8])[0]
        body = pos + 8
        if cid == b"fmt ":
            tag, ch, rate, _, _, bits = struct.unpack("<HHIIHH", b[body:body + 16])
            fmt = (ch, rate, bits)
        elif cid == b"data":
            if fmt is None:
                raise ValueError("data before fmt")
            end = len(b) if size == 0 or body + size > len(b) else body + size
            return Wav(fmt[0], fmt[1], fmt[2], b[body:end])
        pos = body + size + (size & 1)
    if fmt is None:
        raise ValueError("no fmt chunk")
    return Wav(fmt[0], fmt[1], fmt[2], b"")


def loud_seconds(path, threshold):
    """Seconds of a 16-bit WAV in which a sample's magnitude exceeds threshold (a loud sound's
    length, whichever channel carries it)."""
    wav = read(path)
    if wav.bits != 16:
        raise ValueError("16-bit only")
    samples = array.array("h")
    samples.frombytes(wav.data[:len(wav.data) // 2 * 2])
    loud = sum(1 for s in samples if abs(s) > threshold) // max(wav.channels, 1)
    return loud / wav.rate if wav.rate else 0.0


def check_tone_reached_codec(result, report):
    """A desktop scenario's host check: the user's 1 kHz tone (peak 16000 LSB), played through
    the sound server while keepalived kept the sinks awake, reached the HDA codec. QEMU's WAV
    must hold at least 0.3 s of samples far above keepalived's ceiling (0.05 of full scale),
    which only the user's sound can make."""
    ceiling = int(0.05 * 32768)
    try:
        seconds = loud_seconds(result.hda_wav, 4 * ceiling)
    except (OSError, ValueError) as e:
        report("FAIL", "wav", f"cannot read {result.hda_wav}: {e}")
        return
    report("ok" if seconds >= 0.3 else "FAIL", "user-tone-reached-codec",
           f"{seconds:.2f} s of the codec's input above {4 * ceiling} LSB (the tone peaks at 16000; keepalived stays under {ceiling})")
