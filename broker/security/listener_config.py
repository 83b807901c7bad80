"""Per-listener security settings as Kafka names them: ``listener.name.<name>.<setting>`` wins over the global
``<setting>`` (and ``listener.name.<name>.<mechanism>.sasl.jaas.config`` over ``sasl.jaas.config``).

``validate_listener_security`` runs when the broker config is loaded, so a bad TLS file, an unknown mechanism
or a malformed JAAS entry stops start-up with the key that is wrong.
"""

from __future__ import annotations

import os
import ssl
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from moldau.broker.security.jaas import PLAIN_MODULE, JaasEntry, parse_jaas
from moldau.broker.security.principal_mapping import DEFAULT_MAPPER, PrincipalMapper, parse_rules

if TYPE_CHECKING:
    from moldau.broker.config import BrokerConfig, Endpoint

SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


@dataclass(frozen=True, slots=True)
class TlsSettings:
    keystore_location: str
    key_password: str | None
    truststore_location: str | None
    client_auth: str
    enabled_protocols: list[str]
    cipher_suites: list[str]


@dataclass(frozen=True, slots=True)
class ListenerSecurity:
    name: str
    protocol: str
    tls: TlsSettings | None = None
    mechanisms: list[str] = field(default_factory=list)
    plain_users: dict[str, str] = field(default_factory=dict)
    max_receive_size: int = 524288
    failed_auth_delay_ms: int = 100
    reauth_ms: int = 0  # connections.max.reauth.ms (KIP-368); 0 = sessions never expire
    principal_mapper: PrincipalMapper = DEFAULT_MAPPER  # ssl.principal.mapping.rules (SSL listeners)

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def _key(listener: str, setting: str) -> str:
    return f"listener.name.{listener.lower()}.{setting}"


def listener_value(cfg: BrokerConfig, listener: str, setting: str) -> tuple[str, Any]:
    """(the key that supplied it, the typed value) of `setting` for `listener`."""
    from moldau.broker.config import SETTINGS

    key = _key(listener, setting)
    raw = cfg.originals.get(key)
    if raw is None:
        return setting, cfg.get(setting)
    try:
        return key, SETTINGS[setting].parse(raw)
    except Exception as exc:  # ConfigError names the global key; name the per-listener one instead
        from moldau.broker.config import ConfigError

        raise ConfigError(key, str(getattr(exc, "reason", exc)), raw) from None


def jaas_for(cfg: BrokerConfig, listener: str, mechanism: str) -> tuple[str, JaasEntry | None]:
    from moldau.broker.config import ConfigError

    key = _key(listener, f"{mechanism.lower()}.sasl.jaas.config")
    raw = cfg.originals.get(key)
    if raw is None:
        key = "sasl.jaas.config"
        value = cfg.get(key)
        raw = None if value is None else str(getattr(value, "value", value))
    if raw is None:
        return key, None
    try:
        return key, parse_jaas(raw)
    except ValueError as exc:
        raise ConfigError(key, str(exc), None, has_value=False) from None


def _tls(cfg: BrokerConfig, listener: str) -> TlsSettings:
    from moldau.broker.config import ConfigError

    def get(setting: str) -> tuple[str, Any]:
        return listener_value(cfg, listener, setting)

    for setting in ("ssl.keystore.type", "ssl.truststore.type"):
        key, value = get(setting)
        if value != "PEM":
            raise ConfigError(key, f"Moldau reads PEM files only; set {setting}=PEM", value)
    key, location = get("ssl.keystore.location")
    if not location:
        raise ConfigError(key, f"listener {listener} uses TLS and needs a PEM certificate and key", None,
                          has_value=False)
    if not os.path.isfile(location):
        raise ConfigError(key, "no such file", location)
    tkey, trust = get("ssl.truststore.location")
    if trust and not os.path.isfile(trust):
        raise ConfigError(tkey, "no such file", trust)
    _, password = get("ssl.key.password")
    pkey, protocols = get("ssl.enabled.protocols")
    for p in protocols:
        if p not in ("TLSv1.2", "TLSv1.3"):
            raise ConfigError(pkey, f"unsupported TLS version {p} (TLSv1.2, TLSv1.3)", protocols)
    _, auth = get("ssl.client.auth")
    if auth != "none" and not trust:
        raise ConfigError(tkey, f"ssl.client.auth={auth} needs a truststore to check client certificates",
                          None, has_value=False)
    ckey, ciphers = get("ssl.cipher.suites")
    settings = TlsSettings(location, None if password is None else str(password.value), trust or None, auth,
                           list(protocols), list(ciphers))
    from moldau.broker.security.tls import server_context

    try:  # load the files now, so that a wrong key password or a broken PEM stops start-up with its key
        server_context(settings)
    except ssl.SSLError as exc:
        bad = ckey if "cipher" in str(exc).lower() else key
        raise ConfigError(bad, f"listener {listener}: {exc}", ciphers if bad == ckey else location) from None
    except OSError as exc:
        raise ConfigError(key, f"listener {listener}: cannot load: {exc}", location) from None
    return settings


def listener_security(cfg: BrokerConfig, ep: Endpoint) -> ListenerSecurity:
    from moldau.broker.config import ConfigError

    tls = _tls(cfg, ep.name) if ep.security_protocol in ("SSL", "SASL_SSL") else None
    if not ep.security_protocol.startswith("SASL_"):
        # A SASL login names the principal of SASL_SSL, so the certificate rules matter on SSL listeners only.
        _, rules = listener_value(cfg, ep.name, "ssl.principal.mapping.rules")
        mapper = parse_rules(rules) if tls is not None else DEFAULT_MAPPER
        return ListenerSecurity(ep.name, ep.security_protocol, tls, principal_mapper=mapper)
    mkey, mechanisms = listener_value(cfg, ep.name, "sasl.enabled.mechanisms")
    if not mechanisms:
        raise ConfigError(mkey, f"SASL listener {ep.name} needs at least one mechanism", mechanisms)
    for m in mechanisms:
        if m not in SUPPORTED_MECHANISMS:
            raise ConfigError(mkey, f"mechanism {m} is not supported (one of {', '.join(SUPPORTED_MECHANISMS)})",
                              mechanisms)
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        jkey, entry = jaas_for(cfg, ep.name, "PLAIN")
        if entry is None or entry.module != PLAIN_MODULE:
            raise ConfigError(jkey, f"PLAIN on listener {ep.name} needs a {PLAIN_MODULE} entry with "
                              'user_<name>="password" options', None, has_value=False)
        users = entry.plain_users()
    _, size = listener_value(cfg, ep.name, "sasl.server.max.receive.size")
    _, delay = listener_value(cfg, ep.name, "connection.failed.authentication.delay.ms")
    _, reauth = listener_value(cfg, ep.name, "connections.max.reauth.ms")
    return ListenerSecurity(ep.name, ep.security_protocol, tls, list(mechanisms), users, int(size), int(delay),
                            int(reauth))


def validate_listener_security(cfg: BrokerConfig) -> None:
    """Every per-listener key names a known setting, and every listener's security settings are complete."""
    from moldau.broker.config import SETTINGS, ConfigError

    for key in cfg.originals:
        if not key.startswith("listener.name."):
            continue
        rest = key[len("listener.name."):]
        name, _, setting = rest.partition(".")
        parts = setting.split(".", 1)
        jaas = len(parts) == 2 and parts[1] == "sasl.jaas.config"
        if not name or (setting not in SETTINGS and not jaas):
            raise ConfigError(key, "not a per-listener setting Moldau knows", cfg.originals[key])
        if not jaas:
            listener_value(cfg, name, setting)  # parses and checks it, naming this key when it is wrong
    for ep in cfg.listeners:
        listener_security(cfg, ep)
    if cfg.get("zookeeper.connect"):  # only a cluster has inter-broker traffic to log in with
        from moldau.broker.security.inter_broker import inter_broker_security

        inter_broker_security(cfg)
