"""Host side of 75-pi-standin: decodes what the stand-in cards played (their debugfs logs, copied
to io/ by the guest, listed in io/phases.json) frame by frame.

- `pattern` (the stand-ins' own check): the counter ringwrite.py wrote into a ring of `ring`
  frames; on vc4hdmi0 every played frame must be the ring's frame at its index modulo the ring
  (replayed for ever), on the headphones the ring exactly once and nothing but silence after.
- `iec958-wav`: aplay of known.wav through hdmi:CARD=vc4hdmi0: every subframe of the stream valid
  IEC958 (below) and its samples the WAV's, in order, exactly (16-bit samples in the top of the
  24-bit field).
- `iec958`: keepalived's stream: every subframe valid, every sample non-zero and within the
  ceiling (0.05 of full scale).

A valid subframe, as the vc4 HDMI block takes it (MAI, VC4_HDMI_MAI_CONFIG_FORMAT_REVERSE, and
alsa-lib's iec958 layer makes it): bits 0-3 the preamble (Z 0x8 on the first subframe of every
192nd frame, X 0x2 on the other first subframes, Y 0x4 on the second), bits 4-27 the sample, bit 28
validity (0), bit 31 even parity over bits 4-31; the channel-status bits (bit 30) of a 192-frame
block spell consumer, PCM, AES0-2 = 04 82 00 and AES3's sampling-frequency code (the stream's
rate for `aes3: rate`, else the byte given; keepalived's runs, `hdmi:` included, are all `rate`:
issue 58), printed decoded."""

import array
import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vmwav  # noqa: E402

MAGIC = 0x314C5350
STARVED = 1
CEILING = int(0.05 * (1 << 23))
PRE_Z, PRE_X, PRE_Y = 0x8, 0x2, 0x4
FS_CODE = {22050: 0x04, 24000: 0x06, 32000: 0x03, 44100: 0x00, 48000: 0x02, 88200: 0x08, 96000: 0x0A,
           176400: 0x0C, 192000: 0x0E}


RATE_OF_CODE = {code: rate for rate, code in FS_CODE.items()} | {0x01: "not indicated"}


def said_rate(status):
    """The rate the channel status tells the receiver, decoded from byte 3's frequency code."""
    if status is None or len(status) < 4:
        return "no status"
    rate = RATE_OF_CODE.get(status[3] & 0x0F, "unknown")
    return f"AES3 {status[3]:#04x}: {rate if isinstance(rate, str) else f'{rate} Hz'}"


def records(path):
    """(stream, first frame, frames, frame_bytes, lost, flags, payload) of each record."""
    data = Path(path).read_bytes()
    out, pos = [], 0
    while pos + 32 <= len(data):
        magic, stream, frame, frames, fb, lost, flags, sub = struct.unpack_from("<IIQIIIHH", data, pos)
        if magic != MAGIC:
            raise ValueError(f"bad record at byte {pos}")
        size = 0 if flags & STARVED else frames * fb
        if pos + 32 + size > len(data):
            break  # cut by the reader's stop
        out.append((stream, frame, frames, fb, lost, flags, data[pos + 32:pos + 32 + size]))
        pos += 32 + size
    return out


def contiguous(recs):
    """The played frames of the first stream in the log, as one byte string, and what broke it:
    a gap, a loss, another stream (None when it ran through)."""
    played = [r for r in recs if not r[5] & STARVED]
    if not played:
        return b"", 0, "nothing played"
    stream, start = played[0][0], played[0][1]
    out, nxt, problem = [], start, None
    for i, (st, frame, frames, fb, lost, flags, payload) in enumerate(recs):
        if st != stream:
            problem = problem or f"stream {stream} followed by stream {st}"
            break
        # The first record's losses came before the capture began (the guest drains the log
        # then, but the count is carried by the next record written).
        if lost and i:
            problem = problem or f"{lost} frames lost before frame {frame}"
            break
        if flags & STARVED:
            problem = problem or f"{frames} frames of silence at frame {frame}"
            continue
        if frame != nxt:
            problem = problem or f"frame {frame} follows {nxt}"
            break
        out.append(payload)
        nxt = frame + frames
    return b"".join(out), start, problem


def parity_ok(w):
    return bin(w >> 4).count("1") % 2 == 0


def decode(words, channels, limit=None):
    """Checks every subframe; returns (errors, samples per channel, the status bytes, blocks)."""
    errors = []
    frames = len(words) // channels
    if limit is not None:
        frames = min(frames, limit)
    # The block starts: every Z on the first subframe.
    z = [f for f in range(frames) if words[f * channels] & 0xF == PRE_Z]
    if not z:
        return [f"no Z preamble in {frames} frames"], [], None, 0
    status_bits = [[] for _ in range(channels)]
    samples = [array.array("i") for _ in range(channels)]
    for f in range(frames):
        pos = (f - z[0]) % 192
        for ch in range(channels):
            w = words[f * channels + ch]
            pre = w & 0xF
            if ch == 0:
                want = {PRE_Z if f >= z[0] and pos == 0 else PRE_X}
            elif ch == 1:
                want = {PRE_Y}
            else:  # more than two channels: alsa-lib 1.2.8 gives every subframe but the first Y
                want = {PRE_Y} if ch % 2 else {PRE_Y, PRE_X, PRE_Z if pos == 0 else PRE_X}
            if pre not in want:
                errors.append(f"frame {f} subframe {ch}: preamble {pre:#x}, expected {'/'.join(hex(x) for x in sorted(want))}")
            if not parity_ok(w):
                errors.append(f"frame {f} subframe {ch}: odd parity ({w:#010x})")
            if w & (1 << 28):
                errors.append(f"frame {f} subframe {ch}: validity bit set")
            v = (w >> 4) & 0xFFFFFF
            samples[ch].append(v - (1 << 24) if v & 0x800000 else v)
            if f >= z[0]:
                status_bits[ch].append((w >> 30) & 1)
        if len(errors) > 20:
            break
    blocks = (frames - z[0]) // 192
    status = None
    if blocks:
        bits = status_bits[0][:192]
        status = bytes(sum(bits[i * 8 + b] << b for b in range(8)) for i in range(24))
        for ch in range(channels):
            for blk in range(blocks):
                if status_bits[ch][blk * 192:(blk + 1) * 192] != bits:
                    errors.append(f"channel {ch} block {blk}: channel status differs from block 0's")
                    break
    return errors, samples, status, blocks


def status_check(status, aes3):
    if status is None:
        return ["no whole 192-frame block"]
    errs = []
    if status[0] & 0x01:
        errs.append(f"AES0 {status[0]:#04x}: professional")
    if status[0] & 0x02:
        errs.append(f"AES0 {status[0]:#04x}: non-audio")
    if status[:3] != bytes([0x04, 0x82, 0x00]):
        errs.append(f"AES0-2 {status[:3].hex(' ')}, expected 04 82 00")
    if (status[3] & 0x0F) != aes3:
        errs.append(f"AES3 {status[3]:#04x}: frequency code {status[3] & 0x0F:#x}, expected {aes3:#x}")
    return errs


def captures(result, report):
    """Each capture the guest listed (io/phases.json) with its records, read: (io, phase,
    records); what cannot be read is reported instead."""
    io = Path(result.io_dir or "")
    try:
        phases = json.loads((io / "phases.json").read_text())
    except (OSError, ValueError) as e:
        report("FAIL", "decode", f"no io/phases.json: {e}")
        return
    for ph in phases:
        try:
            recs = records(io / ph["file"])
        except (OSError, ValueError) as e:
            report("FAIL", f"{ph['name']}-decode", str(e))
            continue
        yield io, ph, recs


def check(result, report):
    for io, ph, recs in captures(result, report):
        name = ph["name"]
        data, start, problem = contiguous(recs)
        starved = sum(r[2] for r in recs if r[5] & STARVED)
        if ph["kind"] == "pattern":
            fb, ring = ph["frame_bytes"], ph["ring"]
            width = fb // ph["channels"]
            code = {2: "H", 4: "I"}[width]
            values = array.array(code)
            values.frombytes(data[:len(data) // width * width])
            n = len(values) // ph["channels"]
            mask = (1 << (8 * width)) - 1
            bad = next((i for i in range(len(values)) if values[i] != ((start * ph["channels"] + i) % (ring * ph["channels"])) & mask), None)
            if ph["repeats"]:
                ok = bad is None and problem is None and start + n >= 10 * ring
                detail = f"{n} frames from frame {start}: the ring of {ring} replayed {(start + n) / ring:.1f} times"
            else:
                ok = bad is None and start == 0 and n == ring and starved > 0 and problem and "silence" in problem
                detail = f"{n} frames from frame {start} (the ring: {ring}), then {starved} frames of silence"
            report("ok" if ok else "FAIL", f"{name}-played", detail + (f"; first wrong sample {bad}" if bad is not None else "")
                   + (f"; {problem}" if problem else ""))
            continue
        words = array.array("I")
        words.frombytes(data[:len(data) // 4 * 4])
        channels = ph.get("channels") or 2
        if ph["kind"] == "iec958-wav":
            wav = vmwav.read(str(io / ph["wav"]))
            want = wav.samples()
            wframes = len(want) // wav.channels
            errors, samples, status, blocks = decode(words, channels, limit=wframes)
            got = [s for f in range(min(wframes, len(samples[0]) if samples else 0)) for s in (samples[0][f] >> 8, samples[1][f] >> 8)]
            low = [s & 0xFF for ch in samples for s in ch]
            exact = start == 0 and got == list(want) and not any(low)
            first = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), None)
            errors += status_check(status, ph["aes3"])
            report("ok" if exact and not errors else "FAIL", f"{name}-decodes",
                   f"alsa-lib {ph['alsa']}: {len(got) // 2} of {wframes} frames decoded from frame {start}, "
                   f"{'exactly the WAV' if exact else f'first difference at sample {first}'}; {blocks} blocks, status "
                   f"{status.hex(' ')[:23] if status else None} ({said_rate(status)}); {len(errors)} errors {errors[:3]}")
            continue
        frames = len(words) // channels
        errors, samples, status, blocks = decode(words, channels)
        rate = ph.get("rate")
        aes3 = FS_CODE.get(rate, -1) if ph["aes3"] == "rate" else ph["aes3"]
        errors += status_check(status, aes3)
        flat = [s for ch in samples for s in ch]
        zeros = sum(1 for s in flat if s == 0)
        peak = max((abs(s) for s in flat), default=0)
        if problem:
            errors.append(problem)
        if frames < 0.5 * (rate or 48000):
            errors.append(f"only {frames} frames")
        if zeros:
            errors.append(f"{zeros} samples of digital silence")
        if peak > CEILING:
            errors.append(f"peak {peak} above the ceiling {CEILING}")
        report("FAIL" if errors else "ok", f"{name}-iec958",
               f"alsa-lib {ph['alsa']}: {frames} frames ({frames / (rate or 48000):.1f} s) at {rate} Hz decoded, {blocks} blocks, "
               f"status {status.hex(' ')[:23] if status else None} ({said_rate(status)}), samples {sorted(set(flat))[:4]} (peak {peak}); "
               f"{len(errors)} errors {errors[:3]}")
