"""A module that exists and would import fine, but that nothing may import because a client
named it: test_payload.py proves that validating a payload that names it leaves it unimported."""

IMPORTED = True


def boom() -> None:
    raise AssertionError("a client-supplied path was imported and called")
