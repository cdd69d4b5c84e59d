"""Host side of 79-carry-players: makes the tagged tracks (`player-tracks`), then reads each
capture (io/runs.txt: player, mode, capture, tag, frames, rate, first or second track) into runs
(Tests/VM/linkcapture.py) and checks, per player:

- on hw: (the player alone): what it does to its audio, reported: its first track from frame 0 in
  one run up to the skip, its second track's frames from the capture's start to its last frame in
  one run (the player started it before the capture could open: the cable was its), the zero runs;
- through keepalived: (carried): the same, and more: the second track whole in one run (the 2 s
  lead-in covered the capture's open), keepalived's signal before the first track and after the
  second, no frame that is neither the track, nor the signal, nor zero, no other track's frame,
  and no zero run of 1 ms or more that is not the player's own silence, right before its first
  frame or right after its last (squeezelite's silence while its output drains, snapclient's
  while it waits for audio: what the player sends on hw: too).

mpv and squeezelite were bit-exact on hw: (squeezelite once lost the first 529 frames of its
new stream's start there: the loopback's, as it loses a few milliseconds at a stream's end), so
every carried track of theirs must be, every time: there the stream never starts or ends.
snapclient is not always bit-exact even on hw: under emulation (it keeps the server's time: skips what
comes late, fills with its own silence, underruns at its stream's end); carried, every frame of
its that reaches the link must be unchanged and in order, nothing else mixed in, nothing played
twice, and no zeros between keepalived's signal frames.

shairport-sync (`judge_airplay`, `check_airplay`) keeps in sync by inserting or dropping a frame
now and then, on hw: too: its ramp is checked stretch by stretch between those points, and its
own sync statistics through keepalived against its own on hw: in the same run."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import linkcapture as lc  # noqa: E402

SKIP_AT = 0.6
PLAYERS = ["mpv", "squeezelite", "snapclient"]  # the guest's order: each one's first rate
AIRPLAY = "shairport-sync"
AIRPLAY_SECONDS = 13
AIRPLAY_TAGS = (13, 16)  # hw:, carried; each run's ramp spans three tags (240000 frames each)
AIRPLAY_PLAYED = 5 * 44100  # frames of it that must reach the link in order, at least
AIRPLAY_PROBE = 4410  # frames of zero shairport-sync writes at its first open, then drops
AIRPLAY_LATE_START = 22050  # frames of the track's start that may be missing through keepalived
# shairport-sync's statistics through keepalived: against its own on hw: in the same run, bounds
# that a busy emulated guest keeps but a PCM whose delay or timing were wrong would not (a delay
# off by keepalived's queue, 250-500 ms, is a sync error past the 50 ms resync threshold: a
# resync, a break in the track; a delay that jumps is corrections far above hw:'s).
AIRPLAY_SYNC_MS = 15.0  # |mean sync error| carried, at most this above hw:'s (hw: alone: -13 to 3.3 ms)
AIRPLAY_CORRECTIONS_PPM = 500.0  # corrections carried, at most hw:'s + this (44 frames a second at 1000)


def first_rate(players, player):
    return [48000, 44100][players.index(player) % 2]


def make_tracks(vm, args):
    seconds, players = float(args[0]), list(args[1:])
    io = Path(vm.io_dir)
    made = []
    for player in players:
        if player == AIRPLAY:
            # One 44.1 kHz ramp per run (AirPlay 1 has no other rate), over three tags, with no
            # silence in it: PulseAudio's sink FLUSHes when its stream ends and shairport-sync
            # then drops what it holds (its 2 s of latency), so the stream must run on past its
            # first statistics (8 s) and past whatever the check looks at.
            for tag in AIRPLAY_TAGS:
                data = lc.ramp(tag, 44100 * AIRPLAY_SECONDS)
                (io / f"t{tag}.wav").write_bytes(lc.wav(data, 44100))
                made.append(f"t{tag} 44100 ({AIRPLAY_SECONDS} s)")
            # Its carried run's primer, should keepalived's stream not run in 44.1 kHz: not checked.
            (io / "tp.wav").write_bytes(lc.wav(lc.ramp(0, 8820), 44100))
            continue
        first = first_rate(players, player)
        second = 48000 if first == 44100 else 44100
        for carried in (0, 1):
            for track, rate in ((0, first), (1, second)):
                tag = 1 + 4 * players.index(player) + 2 * carried + track
                data = lc.ramp(tag, int(rate * seconds))
                (io / f"t{tag}.raw").write_bytes(data)
                (io / f"t{tag}.wav").write_bytes(lc.wav(data, rate))
                made.append(f"t{tag} {rate}")
    # A first carried play's (aplay's), to leave keepalived's stream in 48 kHz stereo: not checked.
    (io / "t0.wav").write_bytes(lc.wav(lc.ramp(0, 9600), 48000))
    return 0, f"{len(made)} tracks of {seconds:g} s: " + ", ".join(made)


HANDLERS = {"player-tracks": make_tracks}


def judge(cap, tag, frames, rate, which):
    """What one capture shows of track `tag`: its first run of frames in order (`n0`, `frames`),
    whether that is the track bit for bit as far as the capture could see it (`exact`: the first
    track from its frame 0 up to the skip; the second up to its last frame, `whole` when from
    frame 0), what came after it of the same track (`replayed`: frames of it again, which the
    hardware's ring plays when a player underruns at its end on hw:), keepalived's signal before
    and after, and the zero runs of 1 ms or more: the player's own (right before the track's first
    frame or right after its last) and the others."""
    runs = lc.runs(cap)
    mine = [i for i, r in enumerate(runs) if r.kind == "ramp" and r.tag == tag]
    out = {"n0": None, "frames": 0, "exact": False, "whole": False, "replayed": 0, "before": 0, "after": 0,
           "in_order": True, "delivered": 0, "between_signal": [],
           "foreign": sum(r.length for r in runs if r.kind == "ramp" and r.tag != tag),
           "other": sum(r.length for r in runs if r.kind == "other"),
           "own_zero": [], "dropped": [], "captured": len(cap) // lc.FRAME}
    ms = rate // 1000
    # A stopped stream between keepalived's own frames: zeros with its signal on both sides.
    out["between_signal"] = [(r.start, r.length) for i, r in enumerate(runs[1:-1], 1) if r.kind == "zero" and r.length >= ms
                             and runs[i - 1].kind == "signal" and runs[i + 1].kind == "signal"]
    if not mine:
        out["dropped"] = [(r.start, r.length) for r in runs if r.kind == "zero" and r.length >= ms]
        return out
    main = runs[mine[0]]
    out["n0"], out["frames"] = main.n0, main.length
    ends = [runs[i].n0 + runs[i].length for i in mine]
    out["replayed"] = sum(runs[i].length for i, e in zip(mine[1:], ends) if runs[i].n0 < e)
    out["in_order"] = all(runs[i].n0 >= e for i, e in zip(mine[1:], ends))
    out["delivered"] = sum(runs[i].length for i in mine)
    if which == "first":
        out["exact"] = main.n0 == 0 and main.length >= SKIP_AT * rate
    else:
        out["exact"] = main.n0 + main.length == frames
        out["whole"] = main.n0 == 0 and main.length == frames
    out["before"] = sum(r.length for r in runs[:mine[0]] if r.kind == "signal")
    out["after"] = sum(r.length for r in runs[mine[0] + 1:] if r.kind == "signal")
    for i, r in enumerate(runs):
        if r.kind == "zero" and r.length >= ms:
            own = i + 1 == mine[0] or i - 1 == mine[0]
            (out["own_zero"] if own else out["dropped"]).append((r.start, r.length))
    return out


def judge_airplay(cap, tag, frames, rate):
    """What one capture shows of shairport-sync's ramp (from tag `tag`, over three tags, its
    frames numbered g across them): its stretches in order, each bit for bit, and between two of
    them only what shairport-sync itself does: with `basic` interpolation, to keep in sync, a
    frame inserted (the mean of its neighbours: with the ramp the frame before it again, or at a
    wrap of the ramp's left channel a frame of its own, one frame between two stretches that
    meet) or one dropped (the next stretch starts a frame later); a gap, then the ramp further
    on (`underruns`): its own silence (digital zero: it resyncs, or its sender's packets came
    late) or, at an underrun of its own, nothing on hw: and keepalived's signal when carried.
    Anything else between its first and last frame is a break. Around it as `judge`."""
    raw = lc.runs(cap)
    runs = []  # the runs, the ramp's across its tags as one, g0 its first frame's number
    for r in raw:
        ours = r.kind == "ramp" and tag <= r.tag < tag + 3
        g0 = (r.tag - tag) * 8 * lc.SPAN + r.n0 if ours else None
        if ours and runs and runs[-1][0] == "ours" and runs[-1][1] + runs[-1][3] == g0:
            runs[-1][3] += r.length
            continue
        runs.append(["ours" if ours else "foreign" if r.kind == "ramp" else r.kind, g0, r.start, r.length])
    out = {"n0": None, "end": None, "stretches": 0, "inserted": 0, "dropped_frames": 0, "breaks": [], "underruns": [],
           "delivered": 0, "before": 0, "after": 0, "own_zero": [], "dropped": [], "probe": [],
           "foreign": sum(r[3] for r in runs if r[0] == "foreign"),
           "other": sum(r[3] for r in runs if r[0] == "other"), "captured": len(cap) // lc.FRAME}
    ms = rate // 1000
    mine = [i for i, r in enumerate(runs) if r[0] == "ours"]
    if not mine:
        out["dropped"] = [(r[2], r[3]) for r in runs if r[0] == "zero" and r[3] >= ms]
        return out
    first, last = mine[0], mine[-1]
    out["n0"], out["stretches"], out["delivered"] = runs[first][1], 1, runs[first][3]
    end, i = runs[first][1] + runs[first][3], first + 1
    while i <= last:
        kind, g0, start, length = runs[i]
        if kind == "ours" and g0 == end - 1:
            out["inserted"] += 1  # the frame before again, then on from it
            out["delivered"] += length - 1
        elif kind == "ours" and g0 == end + 1:
            out["dropped_frames"] += 1
            out["delivered"] += length
        elif kind == "ours" and g0 == end:
            out["delivered"] += length  # on after an inserted frame of its own (below)
        elif length == 1 and i < last and runs[i + 1][0] == "ours" and runs[i + 1][1] == end:
            out["inserted"] += 1  # at a wrap of the left channel: a frame of its own
            i += 1
            continue
        elif kind in ("signal", "zero") and i < last and runs[i + 1][0] == "ours" and runs[i + 1][1] > end:
            out["underruns"].append((start, kind, length, runs[i + 1][1] - end))  # the gap, then on, later
            _, g0, _, length = runs[i + 1]
            out["delivered"] += length
            out["stretches"] += 1
            end = g0 + length
            i += 2
            continue
        else:
            out["breaks"].append((start, kind, length, g0, end))
            if kind == "ours":
                out["delivered"] += length
        if kind == "ours":
            out["stretches"] += 1
            end = g0 + length
        i += 1
    out["end"] = end
    out["before"] = sum(r[3] for r in runs[:first] if r[0] == "signal")
    out["after"] = sum(r[3] for r in runs[last + 1:] if r[0] == "signal")
    for i, r in enumerate(runs):
        if r[0] == "zero" and r[3] >= ms and not first < i < last:
            # Its first open of the device, before the stream's: it writes 4410 frames of zero to
            # see whether the driver's timestamps are there, then drops them and closes
            # (audio_alsa.c's precision_delay_available); what reached the link of them lies
            # between keepalived's signal frames, a part of that 0.1 s.
            probe = (i < first and r[3] <= AIRPLAY_PROBE and 0 < i < len(runs) - 1
                     and runs[i - 1][0] == "signal" and runs[i + 1][0] == "signal")
            own = i + 1 == first or i - 1 == last
            (out["own_zero"] if own else out["probe"] if probe else out["dropped"]).append((r[2], r[3]))
    return out


def airplay_statistics(text):
    """shairport-sync's statistics lines in its log: (sync error ms, net correction ppm,
    corrections ppm, packets, missing, late, too late, resend requests) each."""
    out = []
    for line in text.splitlines():
        if "player.c" not in line or "sync error" in line.lower() or line.count(",") < 16:
            continue
        fields = [f.strip() for f in line.split('"')[-1].split(",")]
        try:
            out.append(tuple(float(f) for f in fields[:8]))
        except ValueError:
            continue
    return out


def check_airplay(io, seen, report):
    hw, ka = seen.get((AIRPLAY, "hw", "airplay")), seen.get((AIRPLAY, "carried", "airplay"))
    if hw is None or ka is None:
        report("FAIL", f"{AIRPLAY}-ran", f"a capture is missing: hw {hw is not None}, carried {ka is not None}")
        return
    frames = 44100 * AIRPLAY_SECONDS

    def summary(j):
        return (f"{j['delivered']} frames from n={j['n0']} to {j['end']} (of {frames}; PulseAudio's FLUSH at its stream's end drops "
                f"AirPlay's last 2 s) in {j['stretches']} stretches, each bit for bit; {j['inserted']} frames inserted and "
                f"{j['dropped_frames']} dropped by its interpolation; gaps of its own then the ramp further on (what filled "
                f"the gap: its silence or keepalived's signal at its underrun, frames, frames of the ramp skipped) "
                f"{[(w, k, n) for _, w, k, n in j['underruns']][:8]}; breaks {j['breaks'][:4]}; {j['other']} other frames "
                f"(its dithered silence before the ramp) and {j['foreign']} of another track")
    # Its first frames are missing on hw: too (3168 in every run: shairport-sync starts in sync
    # with the sender's clock, its own dithered silence before), so the carried ramp is checked
    # from its first frame on the link on.
    late = lambda j: j["n0"] is not None and j["n0"] <= max(AIRPLAY_LATE_START, (hw["n0"] or 0) + 4410)  # noqa: E731
    # A gap of zero in its stream is its own silence (it plays some to resync, or while its
    # packets are late), as snapclient's: keepalived fills a player's underrun with its signal.
    ok = late(ka) and ka["delivered"] >= AIRPLAY_PLAYED and not ka["breaks"] and not ka["foreign"]
    report("ok" if hw["n0"] is not None else "FAIL", f"{AIRPLAY}-hw", "on hw: " + summary(hw)
           + f"; zero runs: its own {[k for _, k in hw['own_zero']]} frames (on hw: the link stops with the stream at its close), "
           f"others {[k for _, k in hw['dropped']]}")
    report("ok" if ok else "FAIL", f"{AIRPLAY}-carried-exact", "through keepalived: " + summary(ka))
    report("ok" if ka["before"] >= 44100 // 4 and ka["after"] >= 44100 // 10 else "FAIL", f"{AIRPLAY}-signal-around",
           f"keepalived's signal on the link: {ka['before']} frames before the ramp, {ka['after']} after it")
    report("ok" if not ka["dropped"] else "FAIL", f"{AIRPLAY}-never-dropped",
           f"zero runs of 1 ms or more through keepalived besides shairport-sync's own silence right before its first frame (its "
           f"lead-in) and part of its first open's {AIRPLAY_PROBE} frames of zero: {ka['dropped'][:6]}; its own: carried "
           f"{[k for _, k in ka['own_zero']]} frames, its first open's {[k for _, k in ka['probe']]}, on hw: "
           f"{[k for _, k in hw['own_zero']]}")
    # What its log (verbosity 2) says it did to keep in sync besides the interpolation: an
    # underrun, a resync (frames dropped: "Large positive sync error"; its own silence played:
    # "Large negative sync error"), its first packet late.
    events = ("underrun while writing", "Underrun of", "Large positive sync error", "Large negative sync error",
              "Play a silence", "First packet is", "Lost sync with source")
    logs = {m: (io / f"shairport-sync-{m}.log").read_text(errors="replace") if (io / f"shairport-sync-{m}.log").exists() else ""
            for m in ("hw", "carried")}
    counts = {m: {e: logs[m].count(e) for e in events if logs[m].count(e)} for m in logs}
    report("ok", f"{AIRPLAY}-events", f"shairport-sync's log: through keepalived {counts['carried'] or 'nothing of these'}, on hw: "
           f"{counts['hw'] or 'nothing of these'} (of {list(events)})")
    stats = {m: airplay_statistics((io / f"shairport-sync-{m}.log").read_text(errors="replace"))
             if (io / f"shairport-sync-{m}.log").exists() else [] for m in ("hw", "carried")}
    if not stats["hw"] or not stats["carried"]:
        report("FAIL", f"{AIRPLAY}-sync", f"statistics lines: hw {len(stats['hw'])}, carried {len(stats['carried'])}")
        return
    # Its last line: the moving average over the last 1003 packets (8 s), past the start's settling.
    h, k = stats["hw"][-1], stats["carried"][-1]
    ok = abs(k[0]) <= abs(h[0]) + AIRPLAY_SYNC_MS and k[2] <= h[2] + AIRPLAY_CORRECTIONS_PPM and k[4] == 0 and k[6] == 0
    fmt = lambda rows: "; ".join(f"sync error {r[0]:.2f} ms, net correction {r[1]:.1f} ppm, corrections {r[2]:.1f} ppm, "  # noqa: E731
                                 f"{r[3]:.0f} packets, {r[4]:.0f} missing, {r[5]:.0f} late, {r[6]:.0f} too late, {r[7]:.0f} resent"
                                 for r in rows)
    report("ok" if ok else "FAIL", f"{AIRPLAY}-sync",
           f"shairport-sync's own statistics, through keepalived: {fmt(stats['carried'])}; on hw: {fmt(stats['hw'])} "
           f"(bounds: |sync error| at most {AIRPLAY_SYNC_MS:g} ms above hw:'s, corrections at most {AIRPLAY_CORRECTIONS_PPM:g} ppm "
           f"above, no packet missing or too late)")


def describe(j, rate):
    ms = lambda k: f"{1000 * k / rate:.1f}"  # noqa: E731
    return (f"{j['frames']} frames of the track in order from n={j['n0']} ({'exact' if j['exact'] else 'NOT exact'}"
            f"{', whole' if j['whole'] else ''}), {j['replayed']} replayed after it, "
            f"signal {ms(j['before'])} ms before and {ms(j['after'])} ms after, "
            f"the player's own zero runs {[ms(k) for _, k in j['own_zero']]} ms, others {[ms(k) for _, k in j['dropped']]} ms, "
            f"{j['other']} other and {j['foreign']} foreign frames, {j['captured']} captured")


def check(result, report):
    io = result.io_dir
    if not io or not (io / "runs.txt").exists():
        report("SKIP", "players-link", "the guest wrote no runs (an earlier step failed)")
        return
    seen = {}
    for line in (io / "runs.txt").read_text().split("\n"):
        if not line.strip():
            continue
        player, mode, name, tag, frames, rate, which = line.split()
        tag, frames, rate = int(tag), int(frames), int(rate)
        cap = (io / name).read_bytes() if (io / name).exists() else b""
        if which == "airplay":
            seen[(player, mode, which)] = judge_airplay(cap, tag, frames, rate)
            continue
        j = judge(cap, tag, frames, rate, which)
        seen[(player, mode, which)] = j
        print(f"# {player} {mode} {which} track ({rate} Hz, tag {tag}): {describe(j, rate)}", flush=True)
    if any(k[0] == AIRPLAY for k in seen):
        check_airplay(io, seen, report)
    for player in [p for p in PLAYERS if any(k[0] == p for k in seen)]:
        hw = [seen.get((player, "hw", w)) for w in ("first", "second")]
        ka = [seen.get((player, "carried", w)) for w in ("first", "second")]
        if None in hw or None in ka:
            report("FAIL", f"{player}-ran", "a capture is missing: " + ", ".join(f"{m} {w}" for m in ("hw", "carried")
                                                                              for w in ("first", "second") if (player, m, w) not in seen))
            continue
        clean = lambda j: j["exact"] and not j["other"] and not j["foreign"]  # noqa: E731
        hw_exact = all(clean(j) for j in hw)
        replays = sum(j["replayed"] for j in hw)
        report("ok" if all(j["n0"] is not None for j in hw) else "FAIL", f"{player}-hw",
               f"on hw: {'bit-exact' if hw_exact else 'NOT bit-exact'}: the first track from n={hw[0]['n0']}, {hw[0]['frames']} frames "
               f"in order up to the skip; the second from n={hw[1]['n0']} (the capture opened after the player's reopen) "
               f"{'to its last frame' if hw[1]['exact'] else 'NOT to its last frame'}; {hw[0]['other'] + hw[1]['other']} other frames"
               + (f"; then {replays} frames of it again (the ring replayed at the player's underrun)" if replays else ""))
        if player != "snapclient":
            # mpv and squeezelite were bit-exact on hw: in every run (bar the loopback's loss at a
            # new stream's start, which a carried play never has: its stream does not start), so
            # a carried one must be, every time.
            ka_exact = all(clean(j) and not j["replayed"] for j in ka) and ka[1]["whole"]
            report("ok" if ka_exact else "FAIL", f"{player}-carried-bit-exact",
                   f"through keepalived: the first track from n={ka[0]['n0']}, {ka[0]['frames']} frames in order up to the skip; "
                   f"the second {'whole' if ka[1]['whole'] else 'NOT whole'}: {ka[1]['frames']} frames from n={ka[1]['n0']} "
                   f"(of {ka[1]['frames'] if ka[1]['whole'] else 'the track'}); {ka[0]['other'] + ka[1]['other']} other frames, "
                   f"{ka[0]['foreign'] + ka[1]['foreign']} of another track, {ka[0]['replayed'] + ka[1]['replayed']} replayed")
        else:
            # snapclient keeps time by the server's clock: under emulation it skips late audio,
            # fills with its own silence and underruns at a stream's end, on hw: too (not bit-exact
            # there in two runs of seven). What must hold through keepalived: every frame of the
            # track that reaches the link is unchanged and in order, nothing else is mixed in,
            # nothing played twice (no ring replayed: keepalived's signal instead).
            ok = all(j["in_order"] and not j["other"] and not j["foreign"] and not j["replayed"] and j["n0"] is not None for j in ka)
            report("ok" if ok else "FAIL", f"{player}-carried-in-order",
                   f"through keepalived: {ka[0]['delivered']} frames of the first track and {ka[1]['delivered']} of the second "
                   f"(of {ka[1]['frames'] if ka[1]['whole'] else 'its'} {'' if ka[1]['whole'] else 'frames'}), in order: "
                   f"{all(j['in_order'] for j in ka)}; other frames "
                   f"{ka[0]['other'] + ka[1]['other']}, another track's {ka[0]['foreign'] + ka[1]['foreign']}, replayed "
                   f"{ka[0]['replayed'] + ka[1]['replayed']}; on hw: {hw[0]['delivered']} and {hw[1]['delivered']} frames, "
                   f"bit-exact: {hw_exact}, carried bit-exact: {all(clean(j) and not j['replayed'] for j in ka) and ka[1]['whole']}")
        rate1 = first_rate(PLAYERS, player)
        report("ok" if ka[0]["before"] >= rate1 // 4 and ka[1]["after"] >= rate1 // 10 else "FAIL", f"{player}-signal-around",
               f"keepalived's signal on the link: {ka[0]['before']} frames before the first track, {ka[1]['after']} after the second")
        # snapclient's own silence may come anywhere in its stream (above): only a stop of
        # keepalived's own stream, zeros between its signal's frames, is a drop there.
        dropped = (ka[0]["dropped"] + ka[1]["dropped"]) if player != "snapclient" else (ka[0]["between_signal"] + ka[1]["between_signal"])
        report("ok" if not dropped else "FAIL", f"{player}-never-dropped",
               "zero runs of 1 ms or more through keepalived "
               + ("between keepalived's signal frames" if player == "snapclient" else "besides the player's own silence at its track's ends")
               + f": {len(dropped)} "
               f"{[(s, k) for s, k in dropped][:6]}; the player's own: carried {[k for _, k in ka[0]['own_zero'] + ka[1]['own_zero']]} "
               f"frames, on hw: {[k for _, k in hw[0]['own_zero'] + hw[1]['own_zero']]}")
