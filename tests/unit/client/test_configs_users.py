"""moldau-configs --entity-type users: parsing Kafka's --add-config syntax for SCRAM credentials."""

from __future__ import annotations

import pytest

from moldau.tools.common import ToolError
from moldau.tools.configs import parse_args
from moldau.tools.configs_users import scram_additions


def test_add_config_for_users() -> None:
    args = parse_args(["--bootstrap-server", "h:1", "--alter", "--entity-type", "users", "--entity-name", "alice",
                       "--add-config", "SCRAM-SHA-256=[iterations=8192,password=a,b=c],SCRAM-SHA-512=[password=x]"])
    assert scram_additions(args.add) == [("SCRAM-SHA-256", "a", 8192), ("SCRAM-SHA-512", "x", 4096)]


@pytest.mark.parametrize("add", ["SCRAM-SHA-1=[password=x]", "SCRAM-SHA-256=[iterations=8192]",
                                 "SCRAM-SHA-256=[iterations=100,password=x]",
                                 "SCRAM-SHA-256=[iterations=many,password=x]"])
def test_bad_add_config_is_refused(add: str) -> None:
    args = parse_args(["--bootstrap-server", "h:1", "--alter", "--entity-type", "users", "--entity-name", "alice",
                       "--add-config", add])
    with pytest.raises(ToolError):
        scram_additions(args.add)
