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
        """All samples as ints (16- and 32-bit)."""
        if self.bits not in (16, 32):
            raise ValueError("16- and 32-bit only")
        width = self.bits // 8
        n = len(self.data) // width
        return struct.unpack(f"<{n}{'h' if width == 2 else 'i'}", self.data[:width * n])


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


# `keepalived test`'s tone (Sources/KeepAliveDaemon/Commands/TestTone.swift): a 440 Hz sine
# peaking at -30 dBFS (1036 LSB in 16 bits) for 1 s, 15 ms raised-cosine fades at each end.
TEST_TONE_HZ = 440.0
TEST_TONE_PEAK = 10 ** (-30 / 20) * 32768
TEST_TONE_SECONDS = 1.0


def find_tone(wav, threshold):
    """The loud part of a 16-bit stereo capture: (first frame, last frame, frames above
    `threshold` on either channel, its frequency by zero crossings of the left channel over the
    middle of the part, its peak); None when nothing is above `threshold`."""
    samples = array.array("h")
    samples.frombytes(wav.data[:len(wav.data) // 2 * 2])
    left, right = samples[0::2], samples[1::2]
    loud = [i for i in range(len(left)) if abs(left[i]) > threshold or abs(right[i]) > threshold]
    if not loud:
        return None
    first, last = loud[0], loud[-1]
    margin = int(0.1 * wav.rate)
    body = left[first + margin:last - margin] if last - first > 3 * margin else left[first:last + 1]
    crossings = sum(1 for a, b in zip(body, body[1:]) if a < 0 <= b)
    freq = crossings / (len(body) / wav.rate) if body else 0.0
    peak = max(max(abs(s) for s in left[first:last + 1]), max(abs(s) for s in right[first:last + 1]))
    return first, last, len(loud), freq, peak


def check_test_tone(result, report):
    """A box scenario's host check (guest/boxlib.sh): `keepalived test --yes` sounded its tone on
    each card, once, at its stated level. In each of QEMU's captures (HDA: mixer=off, unscaled,
    resampled to 44.1 kHz; USB audio: 48 kHz) everything above half the tone's peak must be one
    burst of 1 s (+0.1 s: the fades' first and last milliseconds are below half; -0.25 s: QEMU's
    audio timer, starved under TCG on a busy host, drops whole buffers of a stream, as in
    10-hda-aplay: the emulated arm64 guest's HDA capture once held 0.898 s of it), at 440 Hz
    (±5) and peaking at 1036 LSB (±5 %: QEMU's resampling of HDA's stream); keepalived's own
    signal and the players' silence stay far below."""
    for label, path in (("hda", result.hda_wav), ("usb", result.usb_wav)):
        if not path:
            continue
        try:
            wav = read(path)
        except (OSError, ValueError) as e:
            report("FAIL", f"test-tone-{label}", f"cannot read {path}: {e}")
            continue
        if (wav.channels, wav.bits) != (2, 16):
            report("FAIL", f"test-tone-{label}", f"QEMU wrote {wav.channels} ch {wav.bits}-bit, expected 2 ch 16-bit")
            continue
        found = find_tone(wav, TEST_TONE_PEAK / 2)
        if not found:
            peak = max((abs(s) for s in array.array("h", wav.data[:len(wav.data) // 2 * 2])), default=0)
            report("FAIL", f"test-tone-{label}", f"nothing above {TEST_TONE_PEAK / 2:.0f} LSB in {wav.frames} frames "
                   f"({wav.frames / wav.rate:.1f} s at {wav.rate} Hz; the loudest sample {peak} LSB)")
            continue
        first, last, loud, freq, peak = found
        seconds = (last - first + 1) / wav.rate
        ok = (-0.25 <= seconds - TEST_TONE_SECONDS <= 0.1 and abs(freq - TEST_TONE_HZ) <= 5
              and abs(peak - TEST_TONE_PEAK) <= 0.05 * TEST_TONE_PEAK)
        report("ok" if ok else "FAIL", f"test-tone-{label}",
               f"{seconds:.3f} s above {TEST_TONE_PEAK / 2:.0f} LSB from {first / wav.rate:.2f} s of {wav.frames / wav.rate:.1f} s "
               f"({wav.rate} Hz), {freq:.1f} Hz, peak {peak} LSB (the tone: {TEST_TONE_SECONDS:.0f} s of "
               f"{TEST_TONE_HZ:.0f} Hz peaking at {TEST_TONE_PEAK:.0f} LSB, -30 dBFS)")
