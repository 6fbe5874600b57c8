"""Re-driving dead letters (streamer.redrive): which dead letters are sent again, where, and which are not. The Kafka
path, against the real broker, is in tests/test_kafka.py (``-k redrive``)."""

from __future__ import annotations

import argparse
import base64

import pytest

from analyzers.errors import PoisonRecord, reasons
from schemas import DeadLetter
from streamer.kafka_config import Topics
from streamer.redrive import NOT_REDRIVABLE, REDRIVABLE, Resend, plan, reason_option
from streamer.steps import dead_letter

T = Topics(prefix="t.")


def letter(reason: str = "poison", source: str = "t.kibitz.assessments/2@17", **kw) -> DeadLetter:
    return DeadLetter(source=source, key=kw.pop("key", "p1"), reason=reason, error="why", raw=kw.pop("raw", '{"a": 1}'), **kw)


def test_every_reason_is_either_redrivable_or_refused_with_its_why():
    """A reason added to any error type must be classified here, or this fails (every module is imported first: an
    error type defined outside analyzers.errors, such as ingest's, is found only once its module is loaded)."""
    import importlib
    import pkgutil

    import analyzers
    import streamer

    for package in (analyzers, streamer):
        for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            importlib.import_module(module.name)
    assert "truncated" in reasons()
    assert set(REDRIVABLE) | set(NOT_REDRIVABLE) == set(reasons())
    assert not set(REDRIVABLE) & set(NOT_REDRIVABLE)
    assert reason_option("poison") == "poison"
    with pytest.raises(argparse.ArgumentTypeError, match="illegal_move dead letters are not re-driven: the move is illegal"):
        reason_option("illegal_move")
    with pytest.raises(argparse.ArgumentTypeError, match="limits_mismatch dead letters are not re-driven: its game went on"):
        reason_option("limits_mismatch")
    with pytest.raises(argparse.ArgumentTypeError, match="not a dead-letter reason: 'posion'"):
        reason_option("posion")


def test_a_dead_letter_is_sent_back_to_the_topic_it_was_read_from_under_its_key():
    assert plan(letter(), T) == Resend("t.kibitz.assessments", b"p1", b'{"a": 1}')
    assert plan(letter("error", "t.kibitz.assessments.events/0@3", key="London 2011"), T) == Resend(
        "t.kibitz.assessments.events", b"London 2011", b'{"a": 1}')
    # bytes that were not UTF-8 come back from their base64 copy, not from the text with replacement characters
    raw = b"\xff\x00{"
    got = plan(letter(source="t.kibitz.moves/1@0", raw=raw.decode("utf-8", "replace"),
                      raw_base64=base64.b64encode(raw).decode()), T)
    assert isinstance(got, Resend) and got.value == raw and got.topic == "t.kibitz.moves"
    assert plan(letter(key=None), T) == Resend("t.kibitz.assessments", None, b'{"a": 1}')


@pytest.mark.parametrize(("dl", "why"), [
    (letter(source="games.pgn"), "not read from a Kafka topic"),
    (letter(source="kibitz.assessments/0@1"), "not a stage's input here"),  # another deployment's (no prefix)
    (letter(source="t.kibitz.ratings.perceived/0@1"), "not a stage's input here"),
    (letter(raw_size=2_000_000), "only the start of the record was kept"),
    (dead_letter(PoisonRecord("x"), b"{}", source="t.kibitz.moves/0@1", key="k" * 5000), "only the start of the record's key"),
    (letter("engine_timeout", "t.kibitz.moves/0@9"), "a move whose game has been played on"),
])
def test_a_dead_letter_that_cannot_be_sent_back_says_why(dl, why):
    got = plan(dl, T)
    assert isinstance(got, str) and why in got


def test_an_engine_failure_is_redriven_for_a_review_request_only():
    assert plan(letter("engine_crashed", "t.kibitz.reviews/3@40"), T) == Resend("t.kibitz.reviews", b"p1", b'{"a": 1}')
    assert isinstance(plan(letter("engine_crashed", "t.kibitz.moves/3@40"), T), str)
