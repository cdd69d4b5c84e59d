"""Host side of 76-link-handoff: the loopback capture against the ramp. Each of the 10 plays (3
handed over, 3 carried, MPD carried, MPD carried and paused, one cut short by keepalived's
SIGKILL, one carried by the restarted keepalived) but the cut one must be on the link bit-exact
(one run of all its frames; the paused one in two, the second from where MPD went on to the
ramp's end, keepalived's signal between); keepalived's -1 LSB must be there before the first
and after the last. The zero runs (frames of digital zero on both channels: no stream on the
link) are printed per play, `handoff_zero_ms= play N before A after B`: the gap between
keepalived's signal and the music, and between the music and the signal."""

import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from linkcapture import FRAME, RATE, SIGNAL, ZERO, common, zero_runs  # noqa: E402

STALL = 0.2  # seconds the whole guest stood still that excuse a zero run in the second after
TAIL_LIMIT = 4096  # frames, 93 ms: a hand-over's end on a loaded host (519 seen in the landing)


def check(result, report):
    io = result.io_dir
    if not io or not (io / "link.raw").exists() or not (io / "ramp.raw").exists():
        report("SKIP", "link-bit-exact", "the guest wrote no capture (an earlier step failed)")
        return
    cap, ramp = (io / "link.raw").read_bytes(), (io / "ramp.raw").read_bytes()
    cap = cap[:len(cap) // FRAME * FRAME]
    plays, at = [], cap.find(ramp[:64 * FRAME])
    while at >= 0:
        if at % FRAME == 0:
            same = common(cap, at, ramp)
            # The loopback's own loss at a stream's end, on a hand-over only: the player drains
            # and closes, and the cable carries zero for the last few milliseconds that were in
            # flight (seen with MPD straight on `hw:`, ../shared/notes/vm-rig.md; 519 frames once
            # beside the landing's other lanes). Tolerated there when short, and every frame
            # there the ramp's own or zero. A carried play's stream never stops: every frame exact.
            limit = TAIL_LIMIT if len(plays) < 3 else 0
            tail = range(same, min(len(ramp), len(cap) - at), FRAME)
            whole = (len(ramp) - same) // FRAME <= limit and len(tail) == (len(ramp) - same) // FRAME and all(
                cap[at + i:at + i + FRAME] in (ZERO, ramp[i:i + FRAME]) for i in tail)
            plays.append((at // FRAME, whole, (len(ramp) - same) // FRAME))
        at = cap.find(ramp[:64 * FRAME], at + FRAME)
    frames = len(ramp) // FRAME
    ends = [a + frames for a, _, _ in plays]
    # The 8th play is MPD's, paused and resumed: its first part from the ramp's start, keepalived's
    # signal while it was paused, then the rest of the ramp from where it went on (what MPD had
    # queued at the pause may be dropped, as on the hardware), to the ramp's end.
    resumed = "not found"
    if len(plays) == 10:
        at, _, missing = plays[7]
        part_end = at + frames - missing
        pos = part_end
        while pos < len(cap) // FRAME and cap[pos * FRAME:(pos + 1) * FRAME] in (SIGNAL, ZERO):
            pos += 1
        left, right = struct.unpack("<hh", cap[pos * FRAME:(pos + 1) * FRAME]) if pos < len(cap) // FRAME else (0, 0)
        n = (right - 1) * 30000 + (left - 1)
        rest = frames - n
        whole = frames - missing <= n < frames and common(cap, pos * FRAME, ramp[n * FRAME:]) == rest * FRAME
        plays[7] = (at, whole, missing)
        ends[7] = pos + rest if whole else part_end
        resumed = (f"frames 0-{frames - missing - 1} from {at / RATE:.2f} s, {pos - part_end} frames of keepalived's signal or zero, "
                   f"then frames {n}-{frames - 1} from {pos / RATE:.2f} s" + ("" if whole else ": not the ramp's rest"))
    # The 9th play is cut short: keepalived was SIGKILLed while it carried it.
    whole = [w for i, (_, w, _) in enumerate(plays) if i != 8]
    report("ok" if len(plays) == 10 and all(whole) else "FAIL", "link-bit-exact",
           f"{sum(whole)} of {len(whole)} plays found on the link sample for sample (10 played: 3 handed over, "
           f"3 carried, MPD carried, MPD carried and paused ({resumed}), one cut short by keepalived's SIGKILL, one carried by "
           f"the restarted keepalived; the loopback's zero tail at a hand-over's end tolerated up to {TAIL_LIMIT} frames, none "
           "on a carried play), at "
           + ", ".join(f"{a / RATE:.2f} s ({len(ramp) // FRAME - t} frames exact, {t} not)" for a, _, t in plays)
           + f"; {len(cap) // FRAME} frames captured")
    first = plays[0][0] if plays else len(cap) // FRAME
    last_end = ends[-1] if plays else 0
    before = cap[:first * FRAME].count(SIGNAL) if plays else 0
    after = cap[last_end * FRAME:].count(SIGNAL) if plays else 0
    report("ok" if before >= RATE and after >= RATE else "FAIL", "link-signal-around",
           f"keepalived's -1 LSB frames on the link: {before} before the first play, {after} after the last (want a second of each)")
    runs = zero_runs(cap)

    def zeros(a, b):
        """Zero frames in [a, b)."""
        return sum(max(0, min(s + k, b) - max(s, a)) for s, k in runs)
    for n, ((start, _, _), end) in enumerate(zip(plays, ends), 1):
        # Within a second of the music's first and last frame: the hand-offs' own gaps.
        gap_before, gap_after = zeros(start - RATE, start), zeros(end, end + RATE)
        how = ("handed over" if n <= 3 else "carried" if n <= 6 else "MPD, carried" if n == 7 else "MPD, carried, paused and resumed" if n == 8
               else "carried, keepalived SIGKILLed" if n == 9 else "carried, after the restart")
        if n == 8:
            print(f"# mpd_pause_zero_ms= {1000 * zeros(start, end) / RATE:.1f} (within the play, its pause included)", flush=True)
        print(f"# handoff_zero_ms= play {n} ({how}) before {1000 * gap_before / RATE:.1f} after {1000 * gap_after / RATE:.1f}", flush=True)
    longest = max((k for _, k in runs), default=0)
    print(f"# link zero runs: {len(runs)}, longest {1000 * longest / RATE:.1f} ms; "
          + ", ".join(f"{s / RATE:.2f} s {1000 * k / RATE:.1f} ms" for s, k in runs[:12]), flush=True)
    # A dropped link: a zero run of 1 ms or more after keepalived's stream first reached the
    # link (the capture starts before it), other than the player's own frames: aplay pads its
    # last period with zeros (at most one period, 125 ms at its defaults; MPD too), which follow the
    # ramp at once and which the hardware would play too.
    # Only from the reload with --carry on: after the third play's hand-back.
    # From the reload with --carry on (after the third play's hand-back) to keepalived's SIGKILL,
    # and around the play after its restart.
    windows = [(plays[3][0] - 2 * RATE, plays[8][0]), (plays[9][0] - RATE, plays[9][0] + frames + RATE)] if len(plays) == 10 else []
    carried_from = windows[0][0] if windows else len(cap) // FRAME
    padding = set(ends)
    # The guest's own stalls (its clock, from the capture's start): a zero run within a second
    # after the whole guest stood still 0.2 s or more is the machine's, as in carry-chaos.
    stalls = json.loads((io / "stalls.json").read_text()) if (io / "stalls.json").exists() else []

    def stood_still(s):
        t = s / RATE
        return [(a, b) for a, b in stalls if b - a >= STALL and b >= t - 1.0 and a <= t]
    zero = [(s, k) for s, k in runs if any(a <= s < b for a, b in windows) and k >= RATE // 1000 and not (s in padding and k <= RATE // 8)]
    dropped = [(s, k) for s, k in zero if not stood_still(s)]
    excused = [(s, k, stood_still(s)[-1]) for s, k in zero if stood_still(s)]
    report("ok" if len(plays) == 10 and not dropped else "FAIL", "link-never-dropped",
           f"zero runs of 1 ms or more on the link around the carried plays besides aplay's padding: {len(dropped)}"
           + (": " + ", ".join(f"{s / RATE:.2f} s {1000 * k / RATE:.1f} ms" for s, k in dropped[:8]) if dropped else "")
           + "".join(f"; {s / RATE:.2f} s {1000 * k / RATE:.1f} ms after the guest stood still {b - a:.2f} s" for s, k, (a, b) in excused)
           + f"; the guest stood still {len(stalls)} times (0.1 s or more), the longest {max((b - a for a, b in stalls), default=0):.2f} s"
           + "; the padding after each carried play: " + ", ".join(f"{1000 * k / RATE:.1f} ms" for s, k in runs if s in padding and s >= carried_from))
