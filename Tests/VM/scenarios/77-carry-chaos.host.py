"""Host side of 77-carry-chaos: the loopback capture read into runs of each play's tagged ramp,
keepalived's signal, zero and anything else (Tests/VM/linkcapture.py), each case held to what
`io/chaos.json` says:

- `exact`: the play's frames on the link once, whole, in one run (each of a case's tags);
- `split`: every frame once, in order, in runs with nothing but keepalived's signal between them
  (a pause, a stopped player), at least `signal_between` seconds of it where asked, and the
  player's own digital silence too where the case says `player_silence` (squeezelite pauses and
  ends a track by writing zeros until it closes its output, on `hw:` as well);
- `prefix`: the play's frames once, in one run from a frame within `start_within` of its first
  (shairport-sync never plays an AirPlay stream's first packets: 3168 frames at a session's first
  start, 1056-1760 at later ones, on `hw:` as well), at least `min_frames` of them (a source that
  drops its tail at its end: AirPlay's sender FLUSHes, and shairport-sync drops the two seconds
  it holds, on `hw:` as well); where more of the tail plays (a flush that came late: once in a
  hundred, after shairport-sync's own underrun, with packets it dropped as late between), only
  later frames, in order;
- `no-repeat`: no frame twice and none out of order (keepalived stopped or restarted under the
  play: frames may be missing, zeros are acceptable, a loop of the music is not).

Everywhere else, from keepalived's first frame on the link: no zero run of 1 ms or more (a
dropped link) but a play's own padding right after its last frame (aplay pads its last period:
at most 125 ms; the cases marked `padding`, aplay's), in the cases marked `zeros_ok` and within
a second after the whole guest stood still 0.2 s or more (vmtest.StallWatch: keepalived keeps
250 ms of its signal queued, and no stream outlives a machine that stops; each printed), and no
frame that is neither a play's, the signal's nor zero but a player's own dithered silence (no
sample beyond 1 LSB) in the cases marked `player_dither` (shairport-sync's before its first
frame). A case covers the link from its first play's first frame, or from `began` (seconds into
the capture) where it says so: a player's own zeros before its first play (snapclient's source
plays zeros) are its case's."""

import json
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import linkcapture as lc  # noqa: E402

PADDING = lc.RATE // 8
STALL = 0.2  # seconds the whole guest stood still that excuse a zero run in the second after
LATE_START = lc.RATE // 50  # 20 ms: a play's first frames lost to a late write (see judge)


def ms(frames):
    return f"{1000 * frames / lc.RATE:.1f} ms"


def judge(case, pieces, between):
    """(ok, detail) for one tag's pieces (its ramp runs, in order) against the case's expectation;
    `between(a, b)` is the runs between two pieces."""
    frames, expect = case["frames"], case["expect"]
    if not pieces:
        return False, "not on the link"
    present = sum(p.length for p in pieces)
    ordered = all(b.n0 >= a.n0 + a.length for a, b in zip(pieces, pieces[1:])) and pieces[-1].n0 + pieces[-1].length <= frames
    if expect == "exact":
        ok = len(pieces) == 1 and pieces[0].n0 == 0 and pieces[0].length == frames
        # Open (issue 60): once in seven runs one of the hundred plays began 617 frames late,
        # keepalived's signal in their place (not zero), no underrun, no stall seen: a write
        # behind the 10 ms lead the emulated machine was too late for. Counted, never hidden.
        if not ok and case.get("late_start_ok") and len(pieces) == 1 and 0 < pieces[0].n0 <= LATE_START and pieces[0].n0 + pieces[0].length == frames:
            return True, f"LATE START by {ms(pieces[0].n0)}: frames {pieces[0].n0}..{frames - 1} of {frames} in one run, keepalived's signal before"
        # The same late write in the middle of a play (seen once beside two busy helpers' builds:
        # 2 ms of the signal after the client's first 2205 frames): every frame once and in
        # order, keepalived's signal alone between the two runs (its lead kept ahead of the card
        # where the player's next frames came later than that), up to 20 ms of it.
        if not ok and case.get("late_start_ok") and len(pieces) == 2 and pieces[0].n0 == 0 and pieces[1].n0 == pieces[0].length \
                and pieces[1].n0 + pieces[1].length == frames:
            gap = between(pieces[0], pieces[1])
            if gap and all(r.kind == "signal" for r in gap) and sum(r.length for r in gap) <= LATE_START:
                return True, (f"LATE WRITE: frames 0..{frames - 1} of {frames} in two runs, {ms(sum(r.length for r in gap))} of "
                              f"keepalived's signal after frame {pieces[1].n0 - 1}")
        return ok, f"{present} of {frames} frames, {len(pieces)} run(s)" + ("" if ok else f": {pieces[:6]}")
    if expect == "prefix":
        want, within = case["min_frames"], case.get("start_within", 0)
        first = pieces[0]
        ok = first.n0 <= within and want <= first.length and ordered
        tail = f"; then {present - first.length} frames of its tail in {len(pieces) - 1} run(s), in order: {ordered}" if len(pieces) > 1 else ""
        return ok, (f"frames {first.n0}..{first.n0 + first.length - 1} of {frames} in one run, want it from frame {within} or before, "
                    f"of {want} or more{tail}" + ("" if ok else f": {pieces[:6]}"))
    gaps = [between(a, b) for a, b in zip(pieces, pieces[1:])]
    if expect == "split":
        contiguous = pieces[0].n0 == 0 and all(b.n0 == a.n0 + a.length for a, b in zip(pieces, pieces[1:])) and present == frames
        # A player that pauses by writing its own digital silence (squeezelite), as on `hw:`.
        only_signal = all(r.kind == "signal" or (case.get("player_silence") and r.kind == "zero") for g in gaps for r in g)
        signal = max((sum(r.length for r in g) for g in gaps), default=0)
        want = case.get("signal_between", 0) * lc.RATE
        ok = contiguous and only_signal and signal >= want
        return ok, (f"{present} of {frames} frames, each once and in order: {contiguous}, in {len(pieces)} run(s) split at "
                    + ", ".join(f"frame {b.n0}" for b in pieces[1:]) + f"; between them only the signal: {only_signal} "
                    + f"(the longest {ms(signal)}, want {ms(want)})" + ("" if ok else f": {pieces[:6]} {gaps[:3]}"))
    # no-repeat
    kinds = sorted({r.kind for g in gaps for r in g})
    return ordered, (f"{present} of {frames} frames, none twice or out of order: {ordered}, in {len(pieces)} run(s) "
                     + ", ".join(f"n {p.n0}..{p.n0 + p.length - 1}" for p in pieces[:6]) + f"; between them: {', '.join(kinds) or 'nothing'}")


def check(result, report):
    io = result.io_dir
    if not io or not (io / "link.raw").exists() or not (io / "chaos.json").exists():
        report("SKIP", "chaos-link", "the guest wrote no capture (an earlier step failed)")
        return
    cap = (io / "link.raw").read_bytes()
    told = json.loads((io / "chaos.json").read_text())
    cases = [case for case in told["cases"] if case["expect"] != "none"]
    stalls = told.get("stalls", [])
    runs = lc.runs(cap)
    index = {id(r): i for i, r in enumerate(runs)}
    by_tag = {}
    for r in runs:
        if r.kind == "ramp":
            by_tag.setdefault(r.tag, []).append(r)

    def between(a, b):
        return runs[index[id(a)] + 1:index[id(b)]]

    def stood_still(r):
        """The guest's stalls within the second before run `r` or during it."""
        t = r.start / lc.RATE
        return [(a, b) for a, b in stalls if b >= t - 1.0 and a <= t + r.length / lc.RATE]

    def excused(r):
        return r.kind == "zero" and any(b - a >= STALL for a, b in stood_still(r))

    starts = []
    for case in cases:
        pieces = [p for t in case["tags"] for p in by_tag.get(t, [])]
        began = [int(case["began"] * lc.RATE)] if "began" in case else []
        starts.append(min([p.start for p in pieces] + began, default=None))
        results = [judge(case, by_tag.get(t, []), between) for t in case["tags"]]
        bad = [(t, d) for t, (ok, d) in zip(case["tags"], results) if not ok]
        late = [(t, d) for t, (ok, d) in zip(case["tags"], results) if ok and d.startswith("LATE")]
        if len(late) > case.get("late_start_ok", 0):
            bad += late
        elif late:
            print(f"# chaos late starts in {case['name']}: {late}", flush=True)
        if len(case["tags"]) == 1:
            detail = results[0][1]
        else:
            detail = (f"{len(results) - len(bad)} of {len(results)} plays as expected" + (f"; not: {bad[:4]}" if bad else "")
                      + (f"; {len(late)} late start(s) (at most {case.get('late_start_ok', 0)}): {late}" if late else ""))
        extra = {k: v for k, v in case.items() if k in ("aplay", "exit", "how", "client")}
        report("FAIL" if bad else "ok", f"{case['name']}-link", f"{case['expect']}: {detail}" + (f" [{json.dumps(extra)}]" if extra else ""))
        if case.get("signal_between") is True:
            gaps = [between(by_tag[a][-1], by_tag[b][0]) for a, b in zip(case["tags"], case["tags"][1:]) if by_tag.get(a) and by_tag.get(b)]
            lengths = [sum(r.length for r in g) for g in gaps]
            # A play's own padding of its last period (the cases marked `padding`) comes right
            # after its last frame, as on the hardware.
            clean = all(r.kind == "signal" or excused(r) or (case.get("padding") and j == 0 and r.kind == "zero" and r.length <= PADDING)
                        or (case.get("player_silence") and r.kind == "zero") for g in gaps for j, r in enumerate(g))
            report("ok" if clean and len(gaps) == len(case["tags"]) - 1 else "FAIL", f"{case['name']}-signal-between",
                   f"between {len(gaps)} pairs of consecutive plays only keepalived's signal (or zero after the guest stood still, or a "
                   f"play's own padding): {clean}, "
                   f"{ms(min(lengths, default=0))} to {ms(max(lengths, default=0))} of it"
                   + ("" if clean else ": " + "; ".join(str(g[:4]) for g in gaps if any(r.kind != "signal" for r in g))[:400]))

    # Everything from keepalived's first frame on: where the link dropped (zero runs of 1 ms or
    # more), by case, and what is none of the expected kinds.
    first = next((r.start for r in runs if r.kind == "signal"), None)
    if first is None:
        report("FAIL", "chaos-link-never-dropped", "keepalived's signal never reached the link")
        return
    # aplay's own padding follows its last frame (carryclient.py pads nothing).
    ends = {p.end for case in cases if case.get("padding") for t in case["tags"] for p in by_tag.get(t, [])
            if p.n0 + p.length == case["frames"]}
    marks = [(s, case) for s, case in zip(starts, cases) if s is not None]

    def case_at(frame):
        """The case whose plays began last before `frame`."""
        return ([case for s, case in marks if s <= frame] or [None])[-1]
    dropped, allowed, padding = [], [], []
    for r in runs:
        if r.kind != "zero" or r.start < first or r.length < lc.MS:
            continue
        case = case_at(r.start)
        t = r.start / lc.RATE
        near = stood_still(r)
        where = (f"{t:.2f} s {ms(r.length)} ({case['name'] if case else 'before the first play'}"
                 + (f"; the guest stood still {', '.join(f'{1000 * (b - a):.0f} ms at {a:.2f} s' for a, b in near)}" if near else "") + ")")
        if r.start in ends and r.length <= PADDING:
            padding.append(r.length)
        elif case and case.get("zeros_ok"):
            allowed.append(where)
        elif excused(r):
            # The whole guest stood still for most of what keepalived keeps queued of its signal
            # (250 ms): the card ran dry as any stream's would (the rig's StallWatch, as
            # keepalived-hda counts its underruns).
            allowed.append(where + " excused")
        else:
            dropped.append(where)
    report("ok" if not dropped else "FAIL", "chaos-link-never-dropped",
           f"zero runs of 1 ms or more on the link besides the players' padding and the cases that allow them: {len(dropped)}"
           + (": " + ", ".join(dropped[:8]) if dropped else "")
           + f"; padding after {len(padding)} plays ({ms(min(padding, default=0))} to {ms(max(padding, default=0))});"
           + f" where allowed: {', '.join(allowed) or 'none'}")
    known = {t for case in cases for t in case["tags"]}

    def dither(r):
        """A run of a player's own dithered silence, in a case that allows it."""
        case = case_at(r.start)
        if r.kind != "other" or not case or not case.get("player_dither"):
            return False
        samples = struct.unpack(f"<{2 * r.length}h", cap[r.start * lc.FRAME:(r.start + r.length) * lc.FRAME])
        return all(-1 <= v <= 1 for v in samples)
    strange = [r for r in runs if r.start >= first and (r.kind == "other" or (r.kind == "ramp" and r.tag not in known)) and not dither(r)]
    dithered = sum(r.length for r in runs if r.start >= first and dither(r))
    report("ok" if not strange else "FAIL", "chaos-link-nothing-else",
           f"frames on the link that are no play's, not the signal and not zero: {sum(r.length for r in strange)}"
           + (f": {strange[:8]}" if strange else "") + (f"; a player's own dithered silence (within 1 LSB): {dithered} frames" if dithered else ""))
    longest = max((r.length for r in runs if r.kind == "zero" and r.start >= first), default=0)
    print(f"# chaos link: {len(cap) // lc.FRAME} frames, {len(runs)} runs, keepalived's first frame at {first / lc.RATE:.2f} s, "
          f"the longest zero run after it {ms(longest)}; the guest stood still {len(stalls)} times (0.1 s or more), the longest "
          f"{1000 * max((b - a for a, b in stalls), default=0):.0f} ms", flush=True)
