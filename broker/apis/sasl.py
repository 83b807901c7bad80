"""SaslHandshake/SaslAuthenticate after login (or on a non-SASL listener) and the SCRAM user APIs.

The login itself happens in the network layer (moldau.broker.security.sasl) before a request reaches a
handler; a handshake that arrives here is out of place, and Kafka answers it with ILLEGAL_SASL_STATE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.apis.context import ScramDeps
from moldau.broker.request_channel import Request
from moldau.broker.security.acl import Operation
from moldau.protocol.errors import ErrorCode
from moldau.protocol.scram import (
    MAX_ITERATIONS,
    MECHANISM_CODES,
    MECHANISMS,
    MIN_ITERATIONS,
    credential_from_salted,
)

if TYPE_CHECKING:  # the message shapes are for mypy only: zero cost at run time
    from moldau.protocol.typed import (
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsRequestDeletions,
        AlterUserScramCredentialsRequestUpsertions,
        AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        DescribeUserScramCredentialsResponseResults,
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
    )

_NAMES = {code: name for name, code in MECHANISM_CODES.items()}


def handle_sasl_handshake(_: object, request: Request, body: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


def handle_sasl_authenticate(_: object, request: Request, body: SaslAuthenticateRequest
                             ) -> SaslAuthenticateResponse:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "error_message": "Unexpected SaslAuthenticate: the "
            "connection is already authenticated or its listener does not use SASL", "auth_bytes": b""}


async def handle_describe_user_scram_credentials(ctx: ScramDeps, request: Request,
                                                 body: DescribeUserScramCredentialsRequest
                                                 ) -> DescribeUserScramCredentialsResponse:
    store = ctx.store
    if not ctx.auth.cluster(request, Operation.DESCRIBE):
        return {"throttle_time_ms": 0, "error_code": ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                "error_message": None, "results": []}
    if store is None:
        return {"throttle_time_ms": 0, "error_code": ErrorCode.UNSUPPORTED_VERSION,
                "error_message": "no SCRAM credential store", "results": []}
    wanted = body["users"]
    names = [u["name"] for u in wanted] if wanted else await store.users()
    results: list[DescribeUserScramCredentialsResponseResults] = []
    for name in dict.fromkeys(names):
        if wanted and names.count(name) > 1:
            results.append({"user": name, "error_code": ErrorCode.DUPLICATE_RESOURCE,
                            "error_message": "user listed more than once", "credential_infos": []})
            continue
        creds = await store.credentials(name)
        if not creds:
            if wanted:
                results.append({"user": name, "error_code": ErrorCode.RESOURCE_NOT_FOUND,
                                "error_message": f"Attempt to describe a user credential that does not exist: "
                                                 f"{name}", "credential_infos": []})
            continue
        results.append({"user": name, "error_code": ErrorCode.NONE, "error_message": None, "credential_infos": [
            {"mechanism": MECHANISM_CODES[m], "iterations": c.iterations} for m, c in sorted(creds.items())]})
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": None, "results": results}


def _check_upsertion(u: AlterUserScramCredentialsRequestUpsertions) -> tuple[ErrorCode, str] | None:
    if u["mechanism"] not in _NAMES:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism code {u['mechanism']}"
    if not MIN_ITERATIONS <= u["iterations"] <= MAX_ITERATIONS:
        return (ErrorCode.UNACCEPTABLE_CREDENTIAL,
                f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    if not u["name"]:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "username must not be empty"
    if not u["salt"] or not u["salted_password"]:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "salt and salted password must not be empty"
    return None


async def handle_alter_user_scram_credentials(ctx: ScramDeps, request: Request,
                                              body: AlterUserScramCredentialsRequest) -> AlterUserScramCredentialsResponse:
    store = ctx.store
    allowed = ctx.auth.cluster(request, Operation.ALTER)
    # (the entry, the same entry again if it is an upsertion): an upsertion has every field of a deletion
    ops: list[tuple[AlterUserScramCredentialsRequestDeletions, AlterUserScramCredentialsRequestUpsertions | None]] = \
        [(d, None) for d in body["deletions"]] + [(u, u) for u in body["upsertions"]]
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    seen: set[tuple[str, int]] = set()
    for op, _ in ops:  # Kafka refuses a user whose (user, mechanism) pairs repeat, before changing anything
        key = (op["name"], op["mechanism"])
        if key in seen:
            errors[op["name"]] = (ErrorCode.DUPLICATE_RESOURCE, "a user credential cannot be altered twice")
        seen.add(key)
    for op, upsertion in ops:
        name = op["name"]
        if name in errors:
            continue
        if not allowed:
            errors[name] = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
            continue
        if store is None:
            errors[name] = (ErrorCode.UNSUPPORTED_VERSION, "no SCRAM credential store")
            continue
        if upsertion is not None:
            problem = _check_upsertion(upsertion)
            if problem is not None:
                errors[name] = problem
                continue
            mech = _NAMES[upsertion["mechanism"]]
            cred = credential_from_salted(MECHANISMS[mech], bytes(upsertion["salted_password"]),
                                          bytes(upsertion["salt"]), upsertion["iterations"])
            await store.alter(name, mech, cred)
        else:
            mech_name = _NAMES.get(op["mechanism"])
            if mech_name is None:
                errors[name] = (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "unknown SCRAM mechanism")
                continue
            if mech_name not in await store.credentials(name):
                errors[name] = (ErrorCode.RESOURCE_NOT_FOUND,
                                f"Attempt to delete a user credential that does not exist: {name}")
                continue
            await store.alter(name, mech_name, None)
    users = list(dict.fromkeys(op["name"] for op, _ in ops))
    return {"throttle_time_ms": 0, "results": [
        {"user": u, "error_code": errors.get(u, (ErrorCode.NONE, None))[0],
         "error_message": errors.get(u, (ErrorCode.NONE, None))[1]} for u in users]}
