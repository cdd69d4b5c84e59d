#!/usr/bin/python3
# vm: devices=aloop mode=systemd options=snd_aloop:pcm_substreams=1 kernel=trixie timeout=300
"""384 kHz carried in the landing lane (issue 60 item 3: "up to 384 kHz where the card takes
it"): carry-formats (78-carry-formats.py) on Debian 13's kernel, whose loopback card takes up to
768 kHz (Debian 12's stops at 192 kHz, where carry-formats itself runs), with its cases cut to
384 kHz: S24_3LE reached with keepalived's reopen and its lead-in, S32_LE at the same rate (a
reopen for the sample format), then S32_LE again on the running stream without a break; each
bit-exact on the link, keepalived's signal before and after (carry-formats' host side judges)."""

import os
import runpy

os.environ["CARRY_FORMATS_384K"] = "1"
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "78-carry-formats.py"), run_name="__main__")
