"""Host side of 71-package-arm64: the tone of `keepalived test --yes` in QEMU's captures (vmwav.check_test_tone)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import vmwav  # noqa: E402


def check(result, report):
    vmwav.check_test_tone(result, report)
