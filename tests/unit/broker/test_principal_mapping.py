"""ssl.principal.mapping.rules (KIP-371): parsing Kafka's rule lists, mapping certificate subjects, and the
start-up errors naming the key."""

from __future__ import annotations

import pytest

from moldau.broker.config import BrokerConfig, ConfigError
from moldau.broker.security.listener_config import listener_value
from moldau.broker.security.principal_mapping import DEFAULT_MAPPER, NoMatchingRule, parse_rules
from moldau.broker.security.tls import certificate_dn, certificate_principal

SERVICE = "CN=kafka-server,OU=ServiceUsers,O=Org,C=US"
DUKE = "CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=Cupertino,ST=CA,C=US"


def test_rules_are_tried_in_order_and_commas_stay_inside_a_regex() -> None:
    mapper = parse_rules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, "
                         "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\n"
                         "  RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U , DEFAULT")
    assert len(mapper.rules) == 4
    assert mapper.name(SERVICE) == "kafka-server"
    assert mapper.name(DUKE) == "duke@javasoft"  # the second rule; L lower-cases the result
    assert mapper.name("O=x,CN=Admin.1") == "ADMIN.1"  # the third rule, upper-cased
    assert mapper.name("OU=nobody") == "OU=nobody"  # DEFAULT: the subject unchanged


def test_first_matching_rule_wins_and_the_regex_must_match_the_whole_name() -> None:
    mapper = parse_rules("RULE:CN=alice/first/,RULE:CN=alice,O=Moldau/second/,RULE:.*alice.*/third/")
    assert mapper.name("CN=alice,O=Moldau") == "second"  # "CN=alice" alone is only a prefix of the name
    assert mapper.name("CN=alice") == "first"
    assert mapper.name("CN=malice,O=x") == "third"


def test_no_matching_rule_raises_with_the_subject() -> None:
    mapper = parse_rules("RULE:^CN=(alice),O=Moldau$/$1/")
    assert mapper.name("CN=alice,O=Moldau") == "alice"
    with pytest.raises(NoMatchingRule, match="CN=mallory,O=Moldau"):
        mapper.name("CN=mallory,O=Moldau")


def test_default_value_keeps_the_subject() -> None:
    assert parse_rules("DEFAULT") == DEFAULT_MAPPER
    assert DEFAULT_MAPPER.name(DUKE) == DUKE
    assert BrokerConfig({"log.dirs": "/tmp/moldau-unit"}).get("ssl.principal.mapping.rules") == "DEFAULT"


def test_escaped_slashes_and_java_replacement_syntax() -> None:
    # \/ is a slash in the regex and the replacement; \$ a literal dollar sign; ${name} a named group
    # (Java's (?<name>...) syntax); $12 with fewer than 12 groups is group 1 followed by "2".
    assert parse_rules(r"RULE:^CN=(.*)\/(.*)$/$2\/$1/").name("CN=a/b") == "b/a"
    assert parse_rules(r"RULE:^CN=(.*)$/\$$1/").name("CN=x") == "$x"
    assert parse_rules(r"RULE:^CN=(?<user>[^,]*),.*$/${user}/").name("CN=bob,O=x") == "bob"
    assert parse_rules("RULE:^CN=(.*)$/$12/").name("CN=x") == "x2"
    # A first digit above the group count is literal text, as Kafka escapes it.
    assert parse_rules("RULE:^CN=(.*)$/$1-$5/").name("CN=x") == "x-$5"
    # An optional group that took no part adds nothing.
    assert parse_rules("RULE:^CN=([^,]*)(,O=.*)?$/$1$2/").name("CN=x") == "x"


def test_every_match_in_the_name_is_replaced_as_javas_replace_all() -> None:
    # The regex matches the whole name, then Java's replaceAll replaces each match: `.*` also matches the
    # empty string at the end, so the replacement appears twice (Kafka does the same).
    assert parse_rules("RULE:.*/x/").name("CN=a") == "xx"


@pytest.mark.parametrize(("value", "why"), [
    ("", "no rules"),
    (" , ", "no rules"),
    ("RULE:^CN=(.*)$/$1", "must end with '/'"),
    ("RULE:^CN=(.*)$", "must end with '/'"),
    ("RULE:^CN=(.*)$/$1/X", "unexpected 'X'"),
    ("RULE:^CN=(.*)$/$1/LU", "unexpected 'U'"),
    ("DEFAULT RULE:a/b/", "unexpected 'RULE:a/b/'"),
    ("DEFAULTS", "unexpected 'S'"),
    ("CN=alice", "neither DEFAULT nor RULE"),
    ("DEFAULT,rule:a/b/", "neither DEFAULT nor RULE"),
    ("RULE:^CN=(.*$/$1/", "not a regular expression"),
    ("RULE:^CN=.*$/$1/", "has none"),
    ("RULE:^CN=(.*)$/${user}/", "does not name"),
    ("RULE:^CN=(.*)$/$x/", "followed by a group number"),
    ("RULE:^CN=(.*)$/a\\\\\\/", "must end with '/'"),
])
def test_malformed_rules(value: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        parse_rules(value)


def test_empty_items_are_ignored() -> None:
    assert len(parse_rules("DEFAULT,,RULE:a/b/,").rules) == 2


def test_bad_rules_stop_start_up_naming_the_key() -> None:
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"log.dirs": "/tmp/moldau-unit", "ssl.principal.mapping.rules": "RULE:^CN=(.*)$/$1"})
    assert info.value.key == "ssl.principal.mapping.rules"
    assert "ssl.principal.mapping.rules" in str(info.value) and "must end with '/'" in str(info.value)
    key = "listener.name.plaintext.ssl.principal.mapping.rules"
    with pytest.raises(ConfigError) as info:
        BrokerConfig({"log.dirs": "/tmp/moldau-unit", key: "User:alice"})
    assert info.value.key == key and key in str(info.value)


def test_per_listener_rules_win_over_the_global_value() -> None:
    key = "listener.name.plaintext.ssl.principal.mapping.rules"
    cfg = BrokerConfig({"log.dirs": "/tmp/moldau-unit", "ssl.principal.mapping.rules": "RULE:.*/everyone/",
                        key: "RULE:^CN=(alice),O=Moldau$/$1/L"})
    assert listener_value(cfg, "PLAINTEXT", "ssl.principal.mapping.rules") == (key, "RULE:^CN=(alice),O=Moldau$/$1/L")
    assert listener_value(cfg, "OTHER", "ssl.principal.mapping.rules") == (
        "ssl.principal.mapping.rules", "RULE:.*/everyone/")


def test_certificate_principal_applies_the_rules() -> None:
    cert = {"subject": ((("organizationName", "Moldau"),), (("commonName", "Alice"),))}
    assert certificate_dn(cert) == "CN=Alice,O=Moldau"
    mapper = parse_rules("RULE:^CN=([^,]+),O=Moldau$/$1/L")
    assert certificate_principal(cert, mapper) == "User:alice"
    assert certificate_principal(cert) == "User:CN=Alice,O=Moldau"
    assert certificate_principal(None, mapper) is None  # no certificate: the connection stays ANONYMOUS
    with pytest.raises(NoMatchingRule):
        certificate_principal({"subject": ((("commonName", "mallory"),),)}, mapper)
