"""The order service's tests. The brokers come from the `moldau.testing` pytest plugin, which installing Moldau
registers: no fixture code here. (A real project would install its service; this example puts it on the path.)"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
