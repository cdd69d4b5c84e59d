"""Host side of 78-carry-formats: makes each case's test signal (the guest's `carry-signal` verb)
and checks each case's capture against it. Per case: the signal on the link bit for bit (one run
of all its frames, found at a frame boundary), keepalived's signal before it (after a reopen:
the lead-in in the new format, at least 50 ms of it captured) and after it, every frame there
the embedded clip's sample in that format, and no run of zero
frames of 1 ms or more from the capture's first non-zero frame on, besides aplay's padding of its
last period right after the music (at most 1/8 s: it pads with silence, which the hardware would
play too). It prints one `# carry_formats=` line per case: frames exact, the signal captured
before and after, the zero runs.

The signal never holds a zero frame and no frame repeats: channel 0 is 1 + n mod 30000, channel 1
1 + n div 30000, channel c >= 2 is c * 1000 + 1 + n mod 997, negative on odd channels; in 24 bits
each value is shifted left by 8, in 32 bits by 16, with the channel's number in the low byte, so
that every byte of a sample carries something and a lost or moved byte, a sign or a channel
swapped shows."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linkcapture import common  # noqa: E402

WIDTH = {"S16_LE": 2, "S24_3LE": 3, "S24_LE": 4, "S32_LE": 4}
SHIFT = {"S16_LE": 0, "S24_3LE": 8, "S24_LE": 8, "S32_LE": 16}
PADDING = 8  # aplay's padding: at most 1/PADDING s of zeros right after the music
# keepalived's signal: its embedded clip (-4 of 32768) at volume 0.01, one sample on every
# channel: -1 LSB in 16 bits (the level rules' least step), -10 in 24, -2621 in 32.
KEEPALIVED = {"S16_LE": -1, "S24_3LE": -10, "S24_LE": -10, "S32_LE": -2621}


def signal(fmt, channels, frames):
    """The test signal's bytes in `fmt` (S24_LE: sign-extended into the fourth byte)."""
    width, shift = WIDTH[fmt], SHIFT[fmt]
    out = bytearray()
    for n in range(frames):
        for c in range(channels):
            v = 1 + n % 30000 if c == 0 else 1 + n // 30000 if c == 1 else (c * 1000 + 1 + n % 997) * (-1 if c % 2 else 1)
            if shift:
                v = (v << shift) + c
            out += (v & 0xFFFFFFFF).to_bytes(4, "little")[:width]
    return bytes(out)


def make_signal(vm, args):
    number, fmt, channels, rate, frames = args[0], args[1], int(args[2]), int(args[3]), int(args[4])
    if fmt not in WIDTH:
        return 2, f"unknown format {fmt}"
    data = signal(fmt, channels, frames)
    (Path(vm.io_dir) / f"signal-{number}.raw").write_bytes(data)
    return 0, f"{frames} frames of {fmt}, {channels} channels at {rate} Hz: {len(data)} bytes"


HANDLERS = {"carry-signal": make_signal}


def zero_runs(cap, frame):
    """(first frame, frames) of every run of all-zero frames."""
    zero = b"\0" * frame
    runs, n, i = [], len(cap) // frame, 0
    while i < n:
        if cap[i * frame:(i + 1) * frame] == zero:
            j = i
            while j < n and cap[j * frame:(j + 1) * frame] == zero:
                j += 1
            runs.append((i, j - i))
            i = j
        else:
            i += 1
    return runs


def check(result, report):
    io = result.io_dir
    if not io or not (io / "cases.txt").exists():
        report("SKIP", "carry-formats-link", "the guest wrote no case (an earlier step failed)")
        return
    exact_cases, leads = 0, []
    lines = (io / "cases.txt").read_text().split("\n")
    cases = [line.split() for line in lines if line.strip()]
    for number, fmt, channels, rate, frames, how in cases:
        channels, rate, frames = int(channels), int(rate), int(frames)
        name = f"case{number}-{fmt}-{channels}ch-{rate}"
        frame = WIDTH[fmt] * channels
        cap_path, sig_path = io / f"case-{number}.raw", io / f"signal-{number}.raw"
        if not cap_path.exists() or not sig_path.exists():
            report("FAIL", f"{name}-link", "no capture or no signal file")
            continue
        cap, sig = cap_path.read_bytes(), sig_path.read_bytes()
        cap = cap[:len(cap) // frame * frame]
        # The signal's first 64 frames, at a frame boundary: where the music starts on the link.
        at, found = cap.find(sig[:64 * frame]), []
        while at >= 0:
            if at % frame == 0:
                found.append(at)
            at = cap.find(sig[:64 * frame], at + 1)
        start = found[0] // frame if found else None
        same = common(cap, found[0], sig, frame) // frame if found else 0
        runs = zero_runs(cap, frame)
        first_signal = next((i for i in range(len(cap) // frame) if cap[i * frame:(i + 1) * frame] != b"\0" * frame), len(cap) // frame)
        end = start + frames if start is not None else None
        # Zero runs from the first non-zero frame on, besides aplay's padding right after the music.
        dropped = [(s, k) for s, k in runs if s >= first_signal and k >= rate // 1000 and not (s == end and k <= rate // PADDING)]
        padding = sum(k for s, k in runs if s == end)
        before = start - first_signal if start is not None else 0
        after = len(cap) // frame - end - padding if end is not None else 0
        lead = cap[(start - 1) * frame:start * frame].hex() if start else "-"
        # Every frame before the music and after its padding: keepalived's signal in this format.
        ours = (KEEPALIVED[fmt] & 0xFFFFFFFF).to_bytes(4, "little")[:WIDTH[fmt]] * channels
        other_before = sum(cap[i * frame:(i + 1) * frame] != ours for i in range(first_signal, start)) if start is not None else 0
        other_after = sum(cap[i * frame:(i + 1) * frame] != ours for i in range(end + padding, len(cap) // frame)) if end is not None else 0
        print(f"# carry_formats= {name} ({how}): {same} of {frames} frames exact; keepalived's signal {1000 * before / rate:.0f} ms "
              f"before (last frame {lead}), {1000 * after / rate:.0f} ms after; aplay's padding {1000 * padding / rate:.1f} ms; "
              f"leading zeros {first_signal} frames; zero runs {len(runs)}: "
              + ", ".join(f"{s / rate:.3f} s {1000 * k / rate:.1f} ms" for s, k in runs[:6]), flush=True)
        exact = len(found) == 1 and same == frames
        exact_cases += exact
        report("ok" if exact else "FAIL", f"{name}-bit-exact",
               f"{same} of {frames} frames of the signal on the link sample for sample, found {len(found)} time(s); "
               f"{len(cap) // frame} frames captured")
        # After a reopen the capture opened during the lead-in: what came before the music is
        # keepalived's signal in the new format (the capture cannot run in another).
        want_before = rate // 20
        report("ok" if start is not None and before >= want_before and after >= rate // 10 and not other_before and not other_after
               else "FAIL", f"{name}-signal-around",
               f"keepalived's signal ({ours[:WIDTH[fmt]].hex()} on every channel) {1000 * before / rate:.0f} ms before the music"
               + (" (the lead-in in the new format)" if how == "reopened" else "")
               + f" (want 50 ms), {1000 * after / rate:.0f} ms after it (want 100 ms); other frames there: {other_before} before, "
               f"{other_after} after (want none)")
        report("ok" if start is not None and not dropped else "FAIL", f"{name}-never-dropped",
               f"zero runs of 1 ms or more on the link besides aplay's padding ({1000 * padding / rate:.1f} ms): {len(dropped)}"
               + (": " + ", ".join(f"{s / rate:.3f} s {1000 * k / rate:.1f} ms" for s, k in dropped[:6]) if dropped else ""))
        if how == "reopened":
            leads.append(1000 * before / rate)
    print(f"# carry_formats: {exact_cases} of {len(cases)} cases bit-exact; the lead-in captured before the music after each reopen: "
          + ", ".join(f"{ms:.0f} ms" for ms in leads), flush=True)
