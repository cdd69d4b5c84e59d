"""Host side of 84-carry-handoffs-net: carry-chaos's judge (77-carry-chaos.host.py) over this
scenario's capture (`io/link.raw`) and cases (`io/chaos.json`)."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("vmhost_carry_chaos_judge", Path(__file__).with_name("77-carry-chaos.host.py"))
_judge = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_judge)
check = _judge.check
