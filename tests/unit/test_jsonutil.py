"""The strict JSON loader shared by the API and `submit_job`: what it refuses, and how it says so
(one line, naming the source)."""

from __future__ import annotations

import pytest

from jobweaver.core.errors import InvalidRequest
from jobweaver.core.jsonutil import loads_strict


def refusal(document: str | bytes) -> str:
    with pytest.raises(InvalidRequest) as raised:
        loads_strict(document, source="--payload")
    message = raised.value.message
    assert "\n" not in message
    assert message.startswith("--payload is not valid JSON: ")
    return message.removeprefix("--payload is not valid JSON: ")


def test_valid_json_decodes_as_usual_from_text_and_bytes():
    document = '{"steps": [{"action": "SLEEP", "durationMs": 5}], "x": [1.5, null, true, "é"]}'
    expected = {"steps": [{"action": "SLEEP", "durationMs": 5}], "x": [1.5, None, True, "é"]}

    assert loads_strict(document, source="s") == expected
    assert loads_strict(document.encode(), source="s") == expected


@pytest.mark.parametrize(
    ("document", "reason"),
    [
        ('{"steps": [], "steps": []}', "duplicate keys: steps"),
        ('{"a": {"b": 1, "c": 2, "b": 3}}', "duplicate keys: b"),
        ('[{"z": 1, "a": 1, "z": 2, "a": 2}]', "duplicate keys: a, z"),
        ('{"durationMs": NaN}', "NaN is not allowed"),
        ("[Infinity]", "Infinity is not allowed"),
        ("[-Infinity]", "-Infinity is not allowed"),
        (b"\xff\xfe{}", "it is not UTF-8 text"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_non_strict_json_is_refused_with_its_reason(document, reason):
    assert refusal(document) == reason


@pytest.mark.parametrize("document", ["{not json", "", "[1, 2", "{'a': 1}", '{"a": 1} trailing'])
def test_malformed_json_says_where(document):
    reason = refusal(document)

    assert "line 1 column" in reason


def test_keys_that_differ_are_not_duplicates():
    assert loads_strict('{"a": {"k": 1}, "b": {"k": 2}}', source="s") == {
        "a": {"k": 1},
        "b": {"k": 2},
    }
