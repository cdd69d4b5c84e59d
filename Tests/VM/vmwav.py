"""Read the WAV files QEMU's wav audio backend writes (tolerates a header whose sizes were never
filled in, as when QEMU is killed)."""

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
