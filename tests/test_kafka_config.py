"""Broker security settings pass through to aiokafka and faust; credentials never appear in output."""

import json
import logging
import os
import re
import ssl
import subprocess
import sys

import faust
import pytest

from analyzers.errors import ConfigurationError
from streamer.kafka_config import KafkaSettings, Topics
from streamer.logs import JsonFormatter

SECRET = "s3cr3t-pa55"


def test_sasl_settings_reach_aiokafka_and_faust_and_never_print(monkeypatch):
    monkeypatch.setenv("KIBITZ_KAFKA_SECURITY_PROTOCOL", "SASL_PLAINTEXT")
    monkeypatch.setenv("KIBITZ_KAFKA_SASL_MECHANISM", "SCRAM-SHA-512")
    monkeypatch.setenv("KIBITZ_KAFKA_SASL_USERNAME", "kibitz")
    monkeypatch.setenv("KIBITZ_KAFKA_SASL_PASSWORD", SECRET)
    s = KafkaSettings.from_env(broker="10.0.0.1:9093")
    kw = s.aiokafka_kwargs()
    assert kw["security_protocol"] == "SASL_PLAINTEXT" and kw["sasl_mechanism"] == "SCRAM-SHA-512"
    assert kw["sasl_plain_username"] == "kibitz" and kw["sasl_plain_password"] == SECRET
    creds = s.faust_credentials()
    assert isinstance(creds, faust.SASLCredentials) and creds.password == SECRET
    assert SECRET not in repr(s) and SECRET not in str(s) and SECRET not in s.model_dump_json()
    record = logging.makeLogRecord({"msg": "connecting", "sasl_plain_password": SECRET, "settings": s})
    line = JsonFormatter().format(record)
    assert SECRET not in line and json.loads(line)["sasl_plain_password"] == "***"


def test_plaintext_default_and_topic_names():
    s = KafkaSettings(broker="127.0.0.1:9092")
    assert s.faust_credentials() is None and s.aiokafka_kwargs() == {"bootstrap_servers": "127.0.0.1:9092", "security_protocol": "PLAINTEXT"}
    t = Topics(prefix="x.")
    assert t.moves == "x.kibitz.moves" and t.deadletter == "x.kibitz.deadletter" and len(set(t.all())) == 9
    assert t.reviews == "x.kibitz.reviews" and t.reviews not in t.changelogs() and t.state_reviews in t.changelogs()
    assert t.pool == "x.kibitz.assessments.events" and t.state_events in t.changelogs()


@pytest.mark.parametrize("broker", ["", " , ", "127.0.0.1:notaport", "127.0.0.1:99999", "127.0.0.1:0", "kafka:", "[::1]x",
                                    "a:1,,b:2"])
def test_a_broker_address_that_cannot_be_one_is_a_configuration_error(monkeypatch, broker):
    """Such an address (an empty $KIBITZ_KAFKA, a port that is not a number or past 65535) was waited for for ever:
    "waiting for the Kafka broker (ValueError); retrying". Addresses that can be one pass."""
    with pytest.raises(ConfigurationError, match=re.escape("--broker: not a broker address")):
        KafkaSettings.from_env(broker=broker)
    monkeypatch.setenv("KIBITZ_KAFKA", broker)
    with pytest.raises(ConfigurationError, match=re.escape("KIBITZ_KAFKA: not a broker address")):
        KafkaSettings.from_env()
    for good in ("localhost", "kafka:19092", "a:1, b:2", "[::1]:9092", "::1", "10.0.0.1:9092,10.0.0.2:9092"):
        assert KafkaSettings.from_env(broker=good).broker == good


@pytest.mark.parametrize(("env", "said"), [
    ({"KIBITZ_KAFKA_SECURITY_PROTOCOL": "BOGUS"}, "KIBITZ_KAFKA_SECURITY_PROTOCOL: Input should be 'PLAINTEXT'"),
    ({"KIBITZ_KAFKA_PARTITIONS": "abc"}, "KIBITZ_KAFKA_PARTITIONS: Input should be a valid integer"),
    ({"KIBITZ_KAFKA_SECURITY_PROTOCOL": "SASL_SSL"}, "needs sasl_mechanism, sasl_username and sasl_password"),
    ({"KIBITZ_KAFKA_SASL_MECHANISM": "PLAIN"}, "is used only with security_protocol SASL_PLAINTEXT or SASL_SSL"),
    ({"KIBITZ_KAFKA_SECURITY_PROTOCOL": "SSL", "KIBITZ_KAFKA_SSL_CAFILE": "/nonexistent.pem"}, "'/nonexistent.pem' is not a file"),
    ({"KIBITZ_KAFKA_SECURITY_PROTOCOL": "SSL", "KIBITZ_KAFKA_SSL_CAFILE": __file__}, "the TLS certificates do not load"),
])
def test_settings_that_cannot_work_are_a_configuration_error_naming_the_variable(monkeypatch, env, said):
    """They were a pydantic traceback, a FileNotFoundError from the TLS context, or (SASL without credentials, a
    mechanism without SASL) went on to fail at the broker; the CLI prints the message and exits with 2."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(ConfigurationError, match=re.escape(said)):
        KafkaSettings.from_env(broker="127.0.0.1:9092")
    r = subprocess.run([sys.executable, "-m", "streamer.cli", "tail", "x", "--broker", "127.0.0.1:1"], capture_output=True,
                       text=True, timeout=60, env={**os.environ, **env})
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_refusal_of_the_credentials_or_tls_is_told_from_a_broker_not_up_yet():
    """wait_for_broker stops at a refusal no retry gets past (test_kafka_sasl.py shows it on a real SASL broker) and
    waits for the rest: nothing listening, a connection cut mid-handshake by a broker that restarts."""
    from aiokafka import errors as kafka_errors

    from streamer.kafka_config import refusal_message, refused

    for error in (kafka_errors.SaslAuthenticationFailed(), kafka_errors.UnsupportedSaslMechanismError(),
                  ssl.SSLCertVerificationError(1, "certificate verify failed: unable to get local issuer certificate"),
                  ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")):
        assert refused(error), error
    for error in (kafka_errors.KafkaConnectionError("Unable to bootstrap"), ConnectionRefusedError(111, "refused"),
                  TimeoutError(), ssl.SSLEOFError(8, "EOF occurred in violation of protocol"), ssl.SSLZeroReturnError()):
        assert not refused(error), error
    tls = KafkaSettings.from_env(broker="kafka:9093", security_protocol="SSL")
    said = refusal_message(tls, ssl.SSLCertVerificationError(1, "certificate verify failed"))
    assert "kafka:9093 refused this client (SSL): SSLCertVerificationError: " in said and "KIBITZ_KAFKA_SSL_CAFILE" in said
    sasl = KafkaSettings.from_env(broker="kafka:9092", security_protocol="SASL_SSL", sasl_mechanism="PLAIN",
                                  sasl_username="u", sasl_password="p")
    said = refusal_message(sasl, kafka_errors.SaslAuthenticationFailed("Authentication failed"))
    assert "(SASL_SSL, PLAIN): [Error 58] SaslAuthenticationFailed: Authentication failed; check" in said, said
    assert "KIBITZ_KAFKA_SASL_PASSWORD" in said and "KIBITZ_KAFKA_SSL_CAFILE" not in said
