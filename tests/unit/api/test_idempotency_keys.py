"""Idempotency keys and request fingerprints, without a database."""

import pytest

from idempotency.domain.keys import Answer, InvalidKey, KeyReused, check_key, fingerprint, replay


def test_a_key_is_printable_ascii_of_1_to_200_characters():
    assert check_key("0b9c6e1a-7f0e-4d7a-9b55-1c2d3e4f5a6b") == "0b9c6e1a-7f0e-4d7a-9b55-1c2d3e4f5a6b"
    assert check_key("k" * 200) == "k" * 200
    for bad, reason in [("", "empty"), ("   ", "empty"), ("k" * 201, "200"), ("clé", "ASCII"), ("a\tb", "ASCII")]:
        with pytest.raises(InvalidKey, match=reason):
            check_key(bad)


def test_the_fingerprint_ignores_key_order_but_not_values_path_or_method():
    base = fingerprint(method="post", path="/api/v1/events", body={"a": 1, "b": {"c": [1, 2]}})
    assert base == fingerprint(method="POST", path="/api/v1/events", body={"b": {"c": [1, 2]}, "a": 1})
    assert base != fingerprint(method="POST", path="/api/v1/events", body={"a": 1, "b": {"c": [2, 1]}})
    assert base != fingerprint(method="POST", path="/api/v1/events", body={"a": "1", "b": {"c": [1, 2]}})
    assert base != fingerprint(method="POST", path="/api/v1/workflows/1/executions", body={"a": 1, "b": {"c": [1, 2]}})
    assert base != fingerprint(method="PUT", path="/api/v1/events", body={"a": 1, "b": {"c": [1, 2]}})
    assert len(base) == 64


def test_a_replay_needs_the_same_request():
    stored = Answer(status=201, body='{"id":1}', headers={"Location": "/x"})
    assert replay(stored_fingerprint="f1", stored=stored, request_fingerprint="f1") is stored
    with pytest.raises(KeyReused):
        replay(stored_fingerprint="f1", stored=stored, request_fingerprint="f2")


def test_only_successes_are_remembered():
    assert Answer(201, "{}").remembered
    assert Answer(200, "{}").remembered
    assert not Answer(400, "{}").remembered
    assert not Answer(429, "{}").remembered
