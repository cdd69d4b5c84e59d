"""Host side of 85-carry-384k: carry-formats' (78-carry-formats.host.py), which makes each case's
signal (its `carry-signal` verb) and judges each case's capture."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("vmhost_carry_formats", Path(__file__).with_name("78-carry-formats.host.py"))
_formats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_formats)
check = _formats.check
HANDLERS = _formats.HANDLERS
