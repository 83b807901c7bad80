"""The authorizer's cost on the request path: one Produce's topic check (``allowed_names``) against N cached ACLs,
and the index rebuild an ACL change costs.

    .venv/bin/python bench/acl_decisions.py

In-process, no broker: the check a handler makes once per (principal, topic, operation) of a request. Not part of
the tests.
"""

from __future__ import annotations

import time

from moldau.broker.request_channel import Request
from moldau.broker.security.acl import AclBinding, Operation, PatternType, Permission, ResourceType
from moldau.broker.security.acl_store import AclCache
from moldau.broker.security.authorizer import Authorizer
from moldau.protocol.api import REGISTRY, ApiKey
from moldau.protocol.header import RequestHeader

CHECKS = 200_000


def cache_with(n: int) -> AclCache:
    cache = AclCache()
    for i in range(n):
        b = AclBinding(ResourceType.TOPIC, f"topic-{i}", PatternType.LITERAL, f"User:u{i % 50}", "*",
                       Operation.WRITE, Permission.ALLOW)
        cache.set((b.resource_type, b.name, b.pattern), [b])
    for j in range(20):  # a few prefixed ACLs, which every decision scans
        b = AclBinding(ResourceType.TOPIC, f"pre{j}-", PatternType.PREFIXED, "User:u1", "*", Operation.READ,
                       Permission.ALLOW)
        cache.set((b.resource_type, b.name, b.pattern), [b])
    return cache


def main() -> None:
    request = Request(RequestHeader(0, 9, 1, "bench"), REGISTRY[ApiKey.PRODUCE], b"", 0, "127.0.0.1",
                      principal="User:u1")
    for n in (10, 1000, 10000):
        auth = Authorizer(cache_with(n), "User:admin")
        t0 = time.perf_counter()
        auth.decision()
        rebuild = time.perf_counter() - t0
        t0 = time.perf_counter()
        for _ in range(CHECKS):
            auth.allowed_names(request, Operation.WRITE, ResourceType.TOPIC, ["topic-1"])
        per_check = (time.perf_counter() - t0) / CHECKS
        print(f"{n:>6} ACLs: index rebuild {rebuild * 1e3:.2f} ms; one-topic request check {per_check * 1e6:.2f} us")


if __name__ == "__main__":
    main()
