"""moldau-configs for client quotas: kafka-configs' entity pairing, the filters and ops it sends, its lines."""

from __future__ import annotations

import io
from typing import Any

import pytest

from moldau.admin_quotas import MATCH_DEFAULT, MATCH_EXACT, MATCH_SPECIFIED
from moldau.tools.common import ToolError
from moldau.tools.configs import execute, parse_args
from moldau.tools.configs_quotas import describe_line

BS = ["--bootstrap-server", "127.0.0.1:9092"]


class FakeAdmin:
    """Records the calls; answers describe with what it was given."""

    def __init__(self, found: list[tuple[dict[str, str | None], dict[str, float]]] | None = None) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.found = found or []

    def describe_client_quotas(self, components: Any, strict: bool = False) -> Any:
        self.calls.append(("describe", (list(components), strict)))
        return self.found

    def alter_client_quotas(self, entries: Any) -> Any:
        self.calls.append(("alter", list(entries)))
        return [None]

    def describe_user_scram_credentials(self, users: Any) -> Any:
        self.calls.append(("scram", users))
        return {}


def run(argv: list[str], admin: FakeAdmin) -> str:
    out = io.StringIO()
    assert execute(parse_args(BS + argv), admin, out) == 0
    return out.getvalue()


def test_entity_types_and_names_pair_in_order() -> None:
    admin = FakeAdmin()
    text = run(["--alter", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients",
                "--entity-default", "--add-config", "producer_byte_rate=1048576,request_percentage=12.5",
                "--delete-config", "consumer_byte_rate"], admin)
    assert admin.calls == [("alter", [({"user": "alice", "client-id": None},
                                       {"producer_byte_rate": 1048576.0, "request_percentage": 12.5,
                                        "consumer_byte_rate": None})])]
    assert text == "Completed updating config for user-principal 'alice', the default client-id.\n"
    admin = FakeAdmin()
    run(["--alter", "--client-defaults", "--user", "bob", "--add-config", "consumer_byte_rate=10"], admin)
    assert admin.calls[0][1][0][0] == {"client-id": None, "user": "bob"}


def test_describe_filters_and_kafkas_lines() -> None:
    admin = FakeAdmin([({"user": "alice", "client-id": None}, {"request_percentage": 12.5,
                                                               "producer_byte_rate": 1024.0})])
    text = run(["--describe", "--entity-type", "users", "--entity-name", "alice", "--entity-type", "clients"],
               admin)
    assert admin.calls == [("describe", ([("user", MATCH_EXACT, "alice"), ("client-id", MATCH_SPECIFIED, None)],
                                         True))]
    assert text == ("Quota configs for user-principal 'alice', the default client-id are "
                    "producer_byte_rate=1024.0, request_percentage=12.5\n")
    admin = FakeAdmin()
    run(["--describe", "--entity-type", "users", "--entity-default"], admin)
    # A user's describe shows its quotas, then its SCRAM credentials, as kafka-configs.
    assert admin.calls == [("describe", ([("user", MATCH_DEFAULT, None)], True)), ("scram", None)]
    assert describe_line({"ip": "10.0.0.1"}, {"connection_creation_rate": 5.0}) == (
        "Quota configs for ip '10.0.0.1' are connection_creation_rate=5.0")


@pytest.mark.parametrize("argv, message", [
    (["--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config", "retention.ms=5"],
     "Invalid config"),
    (["--alter", "--entity-type", "clients", "--entity-name", "c", "--add-config", "producer_byte_rate=x"],
     "not a number"),
    (["--alter", "--entity-type", "users", "--entity-name", "a", "--entity-type", "clients", "--add-config",
      "producer_byte_rate=5"], "each --entity-type"),
    (["--describe", "--entity-type", "topics", "--entity-name", "t", "--entity-type", "clients"], "combined"),
])
def test_bad_quota_commands(argv: list[str], message: str) -> None:
    with pytest.raises(ToolError, match=message):
        run(argv, FakeAdmin())
