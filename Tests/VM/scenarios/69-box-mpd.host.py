"""Host side of 69-box-mpd: MPD's 44.1 kHz track (the guest copied the file to
$VM_IO/box-a44.wav) must be in the WAV QEMU wrote for the HDA codec as one contiguous run of
exactly the file's frames, first to last: bit-perfect through the plugin, nothing resampled,
scaled or dithered; and so must the track MPD played carried on keepalived's stream
(box-c44.wav, `--carry`). The file is a sweep, so a run of its frames matches at one place only;
keepalived's -1 LSB before and after it is not the file's. MPD plays the track twice (to its end,
then once more until it is killed): the longest run counts.

Two losses on QEMU's side are tolerated and reported. Its HDA codec fetches the stream from the
guest's DMA ring into a buffer of its own (8192 bytes: 2048 frames) ahead of the audio backend,
and drops what is still there when the guest stops the stream: the last 0.9-1.7k frames of a
track that plays to its end never reach the WAV (`aplay -D hw:0,0` of the same file loses them
too). And one buffer lost when QEMU's audio timer starved under TCG on a busy host, as in
10-hda-aplay."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vmwav  # noqa: E402

ANCHOR = 64    # frames looked for
DROP_LIMIT = 4096  # one QEMU audio buffer at most
TAIL_LIMIT = 2048  # QEMU's hda-codec stream buffer (8192 bytes), dropped when the stream stops


def _common(a, ai, b, bi, step=1 << 16):
    """Bytes equal from a[ai:] and b[bi:] on."""
    n = 0
    while True:
        x, y = a[ai + n:ai + n + step], b[bi + n:bi + n + step]
        m = min(len(x), len(y))
        if m == 0:
            return n
        if x[:m] == y[:m]:
            n += m
            continue
        lo, hi = 0, m  # first differing byte by bisection
        while lo < hi:
            mid = (lo + hi) // 2
            if x[:mid + 1] == y[:mid + 1]:
                lo = mid + 1
            else:
                hi = mid
        return n + lo


def _common_back(a, ai, b, bi):
    """Bytes equal just before a[ai] and b[bi] (going backwards)."""
    n = 0
    while ai - n > 0 and bi - n > 0 and a[ai - n - 4:ai - n] == b[bi - n - 4:bi - n]:
        n += 4
    return n


def runs(cap, fil, anchor_frame):
    """Every run of the file's frames in the capture that contains the anchor frames: (file's
    first frame, frames, capture's first frame)."""
    out = []
    a0 = 4 * anchor_frame
    key = fil[a0:a0 + 4 * ANCHOR]
    pos = cap.find(key)
    while pos >= 0:
        if pos % 4 == 0:
            fwd = _common(cap, pos, fil, a0) // 4 * 4
            back = _common_back(cap, pos, fil, a0)
            out.append(((a0 - back) // 4, (back + fwd) // 4, (pos - back) // 4))
        pos = cap.find(key, pos + 1)
    return out


def check(result, report):
    judge(result, report, "a44-bit-perfect", "box-a44.wav")
    # Played once, carried on keepalived's running stream (--carry, mpdbox/carried.py).
    judge(result, report, "c44-carried-bit-perfect", "box-c44.wav")


def judge(result, report, label, name):
    src = result.io_dir / name if result.io_dir else None
    if not src or not src.exists():
        report("SKIP", label, "the guest wrote no track (an earlier step failed)")
        return
    try:
        track = vmwav.read(src)
        wav = vmwav.read(result.hda_wav)
    except (OSError, ValueError) as e:
        report("FAIL", label, f"cannot read the WAVs: {e}")
        return
    if (wav.channels, wav.rate, wav.bits) != (2, 44100, 16) or (track.channels, track.rate, track.bits) != (2, 44100, 16):
        report("FAIL", label, f"QEMU wrote {wav.channels} ch {wav.rate} Hz {wav.bits}-bit, "
               f"the track is {track.channels} ch {track.rate} Hz {track.bits}-bit; expected 2 ch 44100 Hz 16-bit both")
        return
    fil, cap = track.data, wav.data
    n = len(fil) // 4
    # Anchors near the start and in the middle: a run cut short (MPD killed) still shows its start.
    found = {}
    for anchor in (16, n // 2):
        for r in runs(cap, fil, anchor):
            found[r] = True
    summary = ", ".join(f"file frames {s}-{s + k - 1} at capture frame {c}" for s, k, c in sorted(found, key=lambda r: r[2]))
    if not found:
        report("FAIL", label, f"no run of the file's frames in QEMU's WAV ({len(cap) // 4} frames)")
        return
    # Each play judged on its own, longest run first: the second play is killed part way, and the
    # first may have lost one QEMU buffer (two runs, then), so the longest run alone can be the
    # killed play while the first was whole but for the tolerated loss.
    plays = sorted((r for r in found if r[0] == 0), key=lambda r: -r[1])
    if not plays:
        start, frames, at = max(found, key=lambda r: r[1])
        report("FAIL", label, f"{_describe(start, frames, at, n, src, cap)}; runs: {summary}; "
               f"no run starts at the track's first frame")
        return
    for start, frames, at in plays:
        verdict = _whole(fil, cap, frames, at, n)
        if verdict is not None:
            report("ok", label, f"{_describe(start, frames, at, n, src, cap)}; runs: {summary}{verdict}")
            return
    start, frames, at = plays[0]
    report("FAIL", label, f"{_describe(start, frames, at, n, src, cap)}; runs: {summary}")


def _describe(start, frames, at, n, src, cap):
    return (f"{frames} of {n} frames of {src.name} match in one run (file frames {start}-{start + frames - 1} at the "
            f"capture's frame {at}, {at / 44100:.2f} s; {len(cap) // 4} frames captured)")


def _whole(fil, cap, frames, at, n):
    """How the play whose run of the file's first `frames` frames is at capture frame `at` was
    whole (a clause for the report, "" when every frame is there), or None if it was not."""
    if frames == n:
        return ""
    if frames >= n - TAIL_LIMIT:
        return (f"; the last {n - frames} frames stayed in QEMU's codec buffer when the stream stopped "
                f"(at most {TAIL_LIMIT}), every frame before them exact")
    # One lost QEMU buffer: the run resumes at the same capture frame, `dropped` file frames later.
    end_cap = 4 * (at + frames)
    for dropped in range(1, DROP_LIMIT + 1):
        fi = 4 * (frames + dropped)
        if fi >= len(fil):
            break
        more = _common(cap, end_cap, fil, fi) // 4
        if frames + dropped + more >= n - TAIL_LIMIT:
            return (f"; QEMU lost file frames {frames}-{frames + dropped - 1} on its side (one buffer of its own, "
                    f"under TCG), then {more} frames exact, {n - frames - dropped - more} left in its codec buffer "
                    f"when the stream stopped")
    return None
