"""Host side of 68-desktop-pipewire: the user's tone, played through PipeWire (pw-play) while
keepalived kept both sinks awake, reached the HDA codec (QEMU's WAV)."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from vmwav import check_tone_reached_codec as check  # noqa: E402,F401
