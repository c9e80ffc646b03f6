"""The secret scan's pre-filter for detect-secrets' KeywordDetector (submissions/secrets.py):
it may let through lines without a secret, never hold back one with a secret. Checked against
the detector itself on the documented shapes and on a seeded random corpus of lines built from
its keywords, quotes, operators and high-entropy values."""

import random

import pytest

from submissions import secrets

VALUE = "x9Qz7vLk2pR8mN4tB6wY1cD3fG5hJ0sA"  # 32 distinct base64 characters
HEX = "9f86d081884c7d659a2feaa0c55ad015"


def _keyword_secrets(line: str) -> set[str]:
    """What the scan's keyword step redacts: the detector's values that pass the entropy test."""
    return {s for s in secrets._KEYWORD.analyze_string(line) if secrets._high_entropy(s)}


@pytest.mark.parametrize("line", [
    f'password = "{VALUE}"', f"db_pass: '{VALUE}'", f'API_KEY => "{VALUE}"',
    f'my_secret !== "{HEX}"', f'private_key "{VALUE}";', f'"{VALUE}" == my_password',
    f'  "client_key": "{VALUE}",', f"contraseña='{HEX}'", f'secret_token:"{VALUE}"',
])
def test_every_shape_of_the_detector_passes_the_prefilter(line):
    assert _keyword_secrets(line), line  # the detector finds it...
    assert secrets._may_hold_keyword_secret(line)  # ...and the pre-filter lets it through
    assert "[REDACTED:high_entropy_secret]" in secrets.redact_text(line)[0]


@pytest.mark.parametrize("line", [
    "the password is in the vault, ask the admin",  # no value
    'password = "hunter2"',  # a value, too plain to be a secret
    f"api_key {VALUE}",  # no quote: the detector's shapes all need one
    "ls -la ~/.ssh && cat config | grep key",
])
def test_lines_without_a_keyword_secret_are_skipped(line):
    assert not _keyword_secrets(line)
    assert not secrets._may_hold_keyword_secret(line)


def test_the_prefilter_never_hides_what_the_detector_finds():
    """Lines assembled from the detector's own parts (a keyword with affixes and closings, an
    operator, quotes, a value, a comparison before it, a semicolon after), each part sometimes
    left out or swapped: whatever the detector finds, the pre-filter lets through."""
    rng = random.Random(20261203)
    parts = [
        ["", "x ", '"', f'"{VALUE}" == ', f"'{HEX}' != ", "let ", "  "],  # before
        ["password", "API_KEY", "db_pass", "secret", "my_pwd", "auth_key", "Passwd", "token"],
        ["", "_x", "]", "'", '"', "[0]", "']", "(", ".assign("],  # after the keyword
        ["", " ", "  "],
        ["", ":", "=", "==", "!==", "=>", ":=", "!=", "=="],
        ["", " ", "\t"],
        ['"', "'", "`", ""],
        [VALUE, HEX, VALUE[:20], "hunter2", VALUE + " and more", "a b", HEX[:12]],
        ['"', "'", "`", ""],
        ["", ";", ",", ")", " == password", ' != "x"'],
    ]
    found = 0
    for _ in range(20000):
        line = "".join(rng.choice(options) if rng.random() > 0.1 else rng.choice(parts[0])
                       for options in parts)
        if _keyword_secrets(line):
            found += 1
            assert secrets._may_hold_keyword_secret(line), line
    assert found > 1000  # the corpus does exercise the detector
