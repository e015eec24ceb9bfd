"""TLS/SASL settings reach every Kafka client the project builds."""

from jobweaver.core.kafka import common_config


def test_security_settings_join_the_bootstrap_servers(settings):
    settings.JOBWEAVER_KAFKA_BOOTSTRAP_SERVERS = "broker-1:9093,broker-2:9093"
    settings.JOBWEAVER_KAFKA_CLIENT_CONFIG = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
    }
    assert common_config() == {
        "bootstrap.servers": "broker-1:9093,broker-2:9093",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
    }


def test_plaintext_by_default():
    assert set(common_config()) == {"bootstrap.servers"}
