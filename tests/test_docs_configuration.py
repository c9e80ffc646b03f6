"""docs/configuration.md lists every setting config/settings.py reads from the environment.

The variables are found in the settings module's source (``env.<type>("NAME"``,
``_env_or_file("NAME"``, ``os.environ.get("NAME"``), and each must appear in the page as
``NAME`` in backticks at the start of a table row. No database: both files are read as text.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SETTINGS = REPO / "config" / "settings.py"
PAGE = REPO / "docs" / "configuration.md"

READ = re.compile(r"(?:\benv\.\w+|\b_env_or_file|\bos\.environ\.get)\(\s*\"([A-Z][A-Z0-9_]*)\"")
ROW = re.compile(r"^\| `([A-Z][A-Z0-9_]*)` \|", re.M)


def settings_read(source: str) -> set[str]:
    return set(READ.findall(source))


def test_every_setting_read_in_config_settings_is_documented():
    read = settings_read(SETTINGS.read_text(encoding="utf-8"))
    # The extraction itself works: a few settings of each kind of call are found.
    assert {"DEBUG", "SECRET_KEY", "DATABASE_URL", "CACHE_URL", "LEADERBOARD_STATE_TTL_S",
            "VERIFICATION_SOFT_TIME_LIMIT_S", "S3_ACCESS_KEY_ID"} <= read, sorted(read)
    documented = set(ROW.findall(PAGE.read_text(encoding="utf-8")))
    missing = sorted(read - documented)
    assert not missing, ("config/settings.py reads these, docs/configuration.md does not list "
                         "them (add a table row: | `NAME` | default | meaning |):\n"
                         + "\n".join(missing))


def test_the_check_finds_settings_spread_over_lines_and_every_kind_of_read():
    source = ('X = env.int(\n    "A_S", default=1)\nY = _env_or_file("B")\n'
              'Z = env.float("C") if os.environ.get("C") else None\nW = env.cache_url("D")\n'
              'V = env.str(name)  # a variable, not a setting\n')
    assert settings_read(source) == {"A_S", "B", "C", "D"}
