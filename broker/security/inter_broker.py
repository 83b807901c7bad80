"""How this broker logs in to other brokers' inter-broker listener (replica fetchers, the controller's channel,
controlled shutdown): the listener's security protocol, ``sasl.mechanism.inter.broker.protocol`` with the
username/password of that listener's JAAS entry, and for TLS the truststore as CA (the keystore as client
certificate when the listener asks for one; host names checked per ``ssl.endpoint.identification.algorithm``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from moldau.broker.security.listener_config import jaas_for, listener_value
from moldau.security import ClientSecurity, security_from_config

if TYPE_CHECKING:
    from moldau.broker.config import BrokerConfig


def inter_broker_security(cfg: BrokerConfig) -> ClientSecurity | None:
    """None for PLAINTEXT; raises ConfigError (naming the broker key) when the login cannot be built."""
    from moldau.broker.config import ConfigError

    name = cfg.inter_broker_listener_name
    ep = next((e for e in cfg.listeners if e.name == name), None)
    if ep is None or ep.security_protocol == "PLAINTEXT":
        return None
    values: dict[str, object] = {"security.protocol": ep.security_protocol}
    if ep.security_protocol.endswith("SSL"):
        _, trust = listener_value(cfg, name, "ssl.truststore.location")
        _, algorithm = listener_value(cfg, name, "ssl.endpoint.identification.algorithm")
        values["ssl.ca.location"] = trust
        values["ssl.endpoint.identification.algorithm"] = "https" if algorithm == "https" else "none"
        _, auth = listener_value(cfg, name, "ssl.client.auth")
        if auth != "none":
            _, keystore = listener_value(cfg, name, "ssl.keystore.location")
            _, password = listener_value(cfg, name, "ssl.key.password")
            values["ssl.certificate.location"] = keystore
            values["ssl.key.password"] = None if password is None else password.value
    if ep.security_protocol.startswith("SASL_"):
        mech = str(cfg.get("sasl.mechanism.inter.broker.protocol"))
        _, enabled = listener_value(cfg, name, "sasl.enabled.mechanisms")
        if mech not in enabled:
            raise ConfigError("sasl.mechanism.inter.broker.protocol", f"{mech} is not enabled on the inter-broker "
                              f"listener {name} (sasl.enabled.mechanisms={','.join(enabled)})", mech)
        key, entry = jaas_for(cfg, name, mech)
        if entry is None or "username" not in entry.options or "password" not in entry.options:
            raise ConfigError(key, f"the inter-broker login with {mech} needs username=\"...\" password=\"...\" "
                              "in this JAAS entry", None, has_value=False)
        values.update({"sasl.mechanism": mech, "sasl.username": entry.options["username"],
                       "sasl.password": entry.options["password"]})
    return security_from_config(values)
