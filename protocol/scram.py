"""SCRAM (RFC 5802, RFC 7677) for SASL: the key derivation, Kafka's stored-credential format, and the two sides
of the exchange as small state machines (the broker verifies, Moldau's client proves).

Kafka stores a user's credential as ``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` under the
mechanism's name (SCRAM-SHA-256 / SCRAM-SHA-512); the password itself is never kept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from dataclasses import dataclass

MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
# The int8 mechanism codes of Describe/AlterUserScramCredentials (Kafka's ScramMechanism enum).
MECHANISM_CODES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384  # Kafka's upper bound for AlterUserScramCredentials


class ScramError(Exception):
    """The exchange failed (malformed message, unknown user, wrong proof); the text is safe to send back."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_kafka(self) -> str:
        b64 = base64.b64encode
        return (f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
                f"server_key={b64(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def from_kafka(cls, text: str) -> ScramCredential:
        try:
            parts = dict(p.split("=", 1) for p in text.split(","))
            return cls(base64.b64decode(parts["salt"]), base64.b64decode(parts["stored_key"]),
                       base64.b64decode(parts["server_key"]), int(parts["iterations"]))
        except (KeyError, ValueError) as exc:
            raise ValueError(f"not a SCRAM credential: {exc}") from None


def _hmac(digest: str, key: bytes, msg: bytes) -> bytes:
    return hmac.new(key, msg, digest).digest()


def salted_password(digest: str, password: str, salt: bytes, iterations: int) -> bytes:
    # Hi() of RFC 5802 is PBKDF2 with HMAC and one output block. SASLprep is skipped: Kafka skips it too.
    return hashlib.pbkdf2_hmac(digest, password.encode(), salt, iterations)


def credential_from_salted(digest: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    client_key = _hmac(digest, salted, b"Client Key")
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(), _hmac(digest, salted, b"Server Key"),
                           iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    digest = MECHANISMS[mechanism]
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(digest, salted_password(digest, password, salt, iterations), salt, iterations)


def _attrs(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        if len(part) < 2 or part[1] != "=":
            raise ScramError(f"malformed SCRAM attribute {part[:20]!r}")
        out.setdefault(part[0], part[2:])
    return out


def _unescape_name(name: str) -> str:
    return name.replace("=2C", ",").replace("=3D", "=")


def _escape_name(name: str) -> str:
    return name.replace("=", "=3D").replace(",", "=2C")


class ScramServer:
    """Broker side. Feed the client-first message (parse_client_first gives the user to look up), then answer
    with server_first(credential or None), then verify the client-final message."""

    def __init__(self, mechanism: str, nonce: str | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ScramError(f"unsupported mechanism {mechanism}")
        self.digest = MECHANISMS[mechanism]
        self.server_nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self.username = ""
        self._client_first_bare = ""
        self._server_first = ""
        self._nonce = ""
        self._client_nonce = ""
        self._gs2 = ""
        self._cred: ScramCredential | None = None

    def parse_client_first(self, data: bytes) -> str:
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ScramError("client-first message is not UTF-8") from None
        parts = text.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y") or parts[0] == "p":
            raise ScramError("invalid GS2 header (channel binding is not supported)")
        self._gs2 = parts[0] + "," + parts[1] + ","
        self._client_first_bare = parts[2]
        attrs = _attrs(parts[2])
        if "n" not in attrs or "r" not in attrs or not attrs["r"]:
            raise ScramError("client-first message lacks n= or r=")
        self.username = _unescape_name(attrs["n"])
        self._client_nonce = attrs["r"]
        self._nonce = attrs["r"] + self.server_nonce
        return self.username

    def server_first(self, cred: ScramCredential | None) -> bytes:
        # An unknown user gets a plausible challenge and fails at the proof, so users cannot be enumerated.
        if cred is None:
            cred = ScramCredential(hashlib.sha256(self.username.encode()).digest(), b"", b"\0", MIN_ITERATIONS)
        self._cred = cred
        self._server_first = (f"r={self._nonce},s={base64.b64encode(cred.salt).decode()},"
                              f"i={cred.iterations}")
        return self._server_first.encode()

    def verify_client_final(self, data: bytes) -> bytes:
        cred = self._cred
        if cred is None:
            raise ScramError("client-final message before server-first")
        try:
            text = data.decode()
        except UnicodeDecodeError:
            raise ScramError("client-final message is not UTF-8") from None
        attrs = _attrs(text)
        nonce = attrs.get("r")
        # librdkafka before 2.6.1 (kcat 1.7 ships 2.0.2) prepends its client nonce a second time (its issue
        # 4895); Kafka 3.8.1-3.9 accept that too. Only that exact form is tolerated besides the RFC one.
        if nonce != self._nonce and nonce != self._client_nonce + self._nonce:
            raise ScramError("invalid nonce")
        if attrs.get("c") != base64.b64encode(self._gs2.encode()).decode():
            raise ScramError("invalid channel binding")
        if "p" not in attrs or ",p=" not in text:
            raise ScramError("client-final message lacks the proof")
        without_proof = text[:text.rindex(",p=")]
        auth = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        try:
            proof = base64.b64decode(attrs["p"], validate=True)
        except ValueError:
            raise ScramError("invalid proof encoding") from None
        signature = _hmac(self.digest, cred.stored_key, auth)
        if len(proof) != len(signature):
            raise ScramError("authentication failed")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(self.digest, client_key).digest(), cred.stored_key):
            raise ScramError("authentication failed")
        return b"v=" + base64.b64encode(_hmac(self.digest, cred.server_key, auth))


class ScramClient:
    """Client side: first() -> final(server_first) -> verify(server_final)."""

    def __init__(self, mechanism: str, username: str, password: str, nonce: str | None = None) -> None:
        self.digest = MECHANISMS[mechanism]
        self.password = password
        self.nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._bare = f"n={_escape_name(username)},r={self.nonce}"
        self._server_key = b""
        self._auth = b""

    def first(self) -> bytes:
        return ("n,," + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        text = server_first.decode()
        attrs = _attrs(text)
        if "e" in attrs:
            raise ScramError(attrs["e"])
        nonce, salt, iterations = attrs.get("r", ""), base64.b64decode(attrs.get("s", "")), int(attrs.get("i", 0))
        if not nonce.startswith(self.nonce) or iterations < 1:
            raise ScramError("invalid server-first message")
        salted = salted_password(self.digest, self.password, salt, iterations)
        client_key = _hmac(self.digest, salted, b"Client Key")
        stored_key = hashlib.new(self.digest, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        self._auth = f"{self._bare},{text},{without_proof}".encode()
        signature = _hmac(self.digest, stored_key, self._auth)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        self._server_key = _hmac(self.digest, salted, b"Server Key")
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> None:
        attrs = _attrs(server_final.decode())
        if "e" in attrs:
            raise ScramError(attrs["e"])
        expected = base64.b64encode(_hmac(self.digest, self._server_key, self._auth)).decode()
        if not hmac.compare_digest(attrs.get("v", ""), expected):
            raise ScramError("server signature mismatch")
