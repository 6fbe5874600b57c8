"""Broker security settings pass through to aiokafka and faust; credentials never appear in output."""

import json
import logging

import faust

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
