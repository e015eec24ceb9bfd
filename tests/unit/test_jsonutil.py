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


# Each forbidden character, written raw in the text where JSON allows it and as each escape
# that can produce it: a text with neither skips the look into its strings, so both must be
# caught whichever way they came.
FORBIDDEN_WRITTEN = [
    ('"a\\u0000b"', "U+0000"),
    ('"\\u001b[2J"', "U+001B"),
    ('"a\\bb"', "U+0008"),
    ('"a\\fb"', "U+000C"),
    ('"a\x7fb"', "U+007F"),
    ('"a\\u007fb"', "U+007F"),
    ('"a\x85b"', "U+0085"),
    ('"\\ud800"', "U+D800"),
    ('"\\uDFFF"', "U+DFFF"),
]


@pytest.mark.parametrize(("string", "code"), FORBIDDEN_WRITTEN)
@pytest.mark.parametrize("where", ["value", "key"])
def test_a_forbidden_character_is_refused_raw_or_escaped_in_a_value_or_a_key(string, code, where):
    document = (
        f'{{"steps": [{{"message": {string}}}]}}'
        if where == "value"
        else f'{{"steps": [{{{string}: 1}}]}}'
    )

    assert code in refusal(document)
    assert refusal(document).startswith(f"a {'string' if where == 'value' else 'key'} contains")


def test_allowed_escapes_and_characters_decode():
    document = (
        '{"m": "tab\\tnewline\\nreturn\\r quote\\" slash\\\\b \\/ é ü \\u00e9 \\ud83d\\ude00"}'
    )

    assert loads_strict(document, source="s") == {
        "m": 'tab\tnewline\nreturn\r quote" slash\\b / é ü é 😀'
    }


def test_depth_is_checked_whether_or_not_the_strings_are(settings):
    settings.JOBWEAVER_MAX_JSON_DEPTH = 4
    plain = '{"a": [{"b": [1]}]}'  # four levels: no escape, no string to look into
    with_escape = '{"a": [{"b": ["\\u00e9"]}]}'

    assert loads_strict(plain, source="s") == {"a": [{"b": [1]}]}
    assert loads_strict(with_escape, source="s") == {"a": [{"b": ["é"]}]}
    assert refusal('{"a": [{"b": [[1]]}]}') == "nested more than 4 levels deep"
    assert refusal('{"a": [{"b": [["\\u00e9"]]}]}') == "nested more than 4 levels deep"
