"""tools/cloud/encryption.py: what the lab's capture expects in clear under internal TLS, and why.

Only what the plan does not encrypt may be named: a name there turns the capture's `plain` for it
into an expected finding, so one left over from before a store went on TLS would hide a regression.
"""

from __future__ import annotations

from tests.test_internal_tls import plain_plan, tls_plan
from tools.cloud.encryption import expected_clear

WATCHED = {
    "mariadb": {3306}, "rabbitmq": {5671}, "memcached": {11211}, "keystone-api": {5000}, "horizon": {8080},
    "nova-novncproxy": {6080},
}  # fmt: skip


def test_under_internal_tls_only_the_gateways_http_backends_are_expected_in_clear() -> None:
    clear = expected_clear(tls_plan().settings, WATCHED)
    assert set(clear) == {"horizon", "nova-novncproxy"}, clear  # memcached, MariaDB, RabbitMQ: on TLS


def test_under_plain_text_everything_is_expected_in_clear() -> None:
    assert set(expected_clear(plain_plan().settings, WATCHED)) == set(WATCHED)
