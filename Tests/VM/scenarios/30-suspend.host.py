"""Host side of 30-suspend: how long QEMU itself saw the guest suspended (QMP SUSPEND to
WAKEUP events; pm_test=devices never reaches QEMU: nothing really sleeps)."""


def check(result, report):
    ev = [(t, n) for t, n, _ in result.qmp_events if n in ("SUSPEND", "WAKEUP")]
    pairs = []
    for i, (t, n) in enumerate(ev):
        if n == "SUSPEND" and i + 1 < len(ev) and ev[i + 1][1] == "WAKEUP":
            pairs.append(ev[i + 1][0] - t)
    detail = ", ".join(f"{d:.2f} s" for d in pairs) or "none"
    report("ok" if len(pairs) == 2 else "FAIL", "qemu-s3-cycles",
           f"{len(pairs)} SUSPEND->WAKEUP cycles seen by QEMU (expected 2: host wakeup, RTC): {detail}")
