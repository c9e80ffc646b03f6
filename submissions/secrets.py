"""Find credentials in an extracted upload and redact them in place.

    findings = scan_and_redact(root)   # [SecretFinding(file, line, kind), ...]

Every regular text file under ``root`` (trajectories, trial/job logs, agent logs, configs) is
read line by line and rewritten with ``[REDACTED:<kind>]`` over each secret. Findings say where
(tree-relative file, 1-based line) and what kind, never the secret. Binary files (a NUL byte in
the first 8 KiB) are skipped; files over ``max_file_bytes`` are not rewritten and are reported
with kind ``not_scanned_too_large`` (the caller should refuse them or keep them private).

JSON stays valid JSON: secrets sit inside JSON strings and the patterns never cross a quote or
split a backslash escape (a PEM key inside a JSON string is matched with its ``\\n`` escapes); if a
redacted JSON file nevertheless stopped parsing, it is redacted again structurally (every string
value and key), which cannot break it.

Kinds, from this module's rules: ``private_key``, ``anthropic_api_key``, ``openai_api_key``,
``google_api_key``, ``aws_access_key_id``, ``aws_secret_access_key``, ``github_token``,
``huggingface_token``, ``bearer_token``. Then the maintained rule set of detect-secrets (its
regex plugins, ``MAINTAINED_PLUGINS``): the kind is the plugin's secret type in snake case, e.g.
``slack_token``, ``stripe_access_key``, ``twilio_api_key``, ``sendgrid_api_key``,
``gitlab_token``, ``json_web_token``, ``basic_auth_credentials``. Last, an entropy check:
a quoted value assigned to a secret-like key (detect-secrets' KeywordDetector: password,
secret, api_key, ...) is ``high_entropy_secret`` when its Shannon entropy reaches the
detect-secrets HighEntropyString limits (base64 4.5, hex 3.0) and it is at least 16 characters;
short or plain values ("changeme", "hunter2") and hashes under other keys are left alone.

(Importing this module as ``submissions.secrets`` does not shadow the standard library's
``secrets``: absolute imports elsewhere still get the stdlib module.)
"""

from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from detect_secrets.plugins.aws import AWSKeyDetector
from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
from detect_secrets.plugins.basic_auth import BasicAuthDetector
from detect_secrets.plugins.discord import DiscordBotTokenDetector
from detect_secrets.plugins.github_token import GitHubTokenDetector
from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
from detect_secrets.plugins.high_entropy_strings import (
    Base64HighEntropyString,
    HexHighEntropyString,
)
from detect_secrets.plugins.jwt import JwtTokenDetector
from detect_secrets.plugins.keyword import DENYLIST as KEYWORD_DENYLIST
from detect_secrets.plugins.keyword import KeywordDetector
from detect_secrets.plugins.mailchimp import MailchimpDetector
from detect_secrets.plugins.npm import NpmDetector
from detect_secrets.plugins.openai import OpenAIDetector
from detect_secrets.plugins.pypi_token import PypiTokenDetector
from detect_secrets.plugins.sendgrid import SendGridDetector
from detect_secrets.plugins.slack import SlackDetector
from detect_secrets.plugins.square_oauth import SquareOAuthDetector
from detect_secrets.plugins.stripe import StripeDetector
from detect_secrets.plugins.telegram_token import TelegramBotTokenDetector
from detect_secrets.plugins.twilio import TwilioKeyDetector

MAX_FILE_BYTES = 64 * 1024 * 1024
MAX_FILES = 100_000
BINARY_SNIFF = 8192


@dataclass(frozen=True)
class SecretFinding:
    file: str  # tree-relative POSIX path
    line: int  # 1-based line where the secret starts
    kind: str

    def as_dict(self) -> dict:
        return {"file": self.file, "line": self.line, "kind": self.kind}


_B = r"(?<![A-Za-z0-9_\-])"  # start boundary: not inside a longer token
_E = r"(?![A-Za-z0-9_\-])"
_PEM_LABEL = r"[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?"
# (kind, compiled pattern, group to replace: 0 = whole match)
PATTERNS: list[tuple[str, re.Pattern, int]] = [
    ("private_key", re.compile(
        # Anything but a quote between the markers: escaped newlines (\n, \\n) inside JSON
        # strings, real newlines inside an in-memory string, never across a JSON string end.
        r"-----BEGIN " + _PEM_LABEL + r"-----[^\"]*?-----END " + _PEM_LABEL + r"-----"), 0),
    ("anthropic_api_key", re.compile(_B + r"sk-ant-[A-Za-z0-9_\-]{20,}"), 0),
    ("openai_api_key", re.compile(
        _B + r"sk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_\-]{20,}"), 0),
    ("google_api_key", re.compile(_B + r"AIza[0-9A-Za-z_\-]{35}" + _E), 0),
    ("aws_access_key_id", re.compile(r"(?<![A-Z0-9])(?:AKIA|ASIA)[A-Z0-9]{16}(?![A-Z0-9])"), 0),
    ("aws_secret_access_key", re.compile(
        r"(?i:aws_secret_access_key|aws_secret_key|secretaccesskey)[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+=]{40})(?![A-Za-z0-9/+=])"), 1),
    ("github_token", re.compile(
        _B + r"(?:(?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})"), 0),
    ("huggingface_token", re.compile(_B + r"hf_[A-Za-z0-9]{34,}" + _E), 0),
    ("bearer_token", re.compile(
        r"(?i:authorization)[\"']?\s*[:=]\s*[\"']?\s*(?i:bearer)\s+([A-Za-z0-9._~+/\-]{8,}=*)"),
        1),
]
_PEM_BEGIN = re.compile(r"-----BEGIN " + _PEM_LABEL + r"-----")
_PEM_END = re.compile(r"-----END " + _PEM_LABEL + r"-----")


# Cheap pre-filter: a line without any of these cannot hold a secret of the kinds above.
_TRIGGER = re.compile(r"-----BEGIN|sk-|AIza|AKIA|ASIA|gh[pousr]_|github_pat_|hf_|"
                      r"(?i:secret|authorization|secretaccesskey)")


# detect-secrets' regex plugins for token formats. Left out: PrivateKeyDetector (it matches the
# BEGIN line alone, and the multi-line PEM handling here needs that line intact) and the
# keyword-context rules of Artifactory, Cloudant, IBM Cloud/COS and SoftLayer (each costs as
# much as all the token rules together on every line of a trajectory).
MAINTAINED_PLUGINS = tuple(plugin() for plugin in (
    AWSKeyDetector, AzureStorageKeyDetector, BasicAuthDetector, DiscordBotTokenDetector,
    GitHubTokenDetector, GitLabTokenDetector, JwtTokenDetector, MailchimpDetector, NpmDetector,
    OpenAIDetector, PypiTokenDetector, SendGridDetector, SlackDetector, SquareOAuthDetector,
    StripeDetector, TelegramBotTokenDetector, TwilioKeyDetector,
))
_KEYWORD = KeywordDetector()
_BASE64 = Base64HighEntropyString()
_HEX = HexHighEntropyString()
_HEX_RE = re.compile(r"^[0-9a-fA-F]+$")
MIN_ENTROPY_SECRET_CHARS = 16
# The KeywordDetector's regexes are slow; a line holds one of its keywords only if it holds one
# of these (lower-cased) substrings (api_key, auth_key, ..., password, passwd, pwd, secret).
_KEYWORD_HINTS = ("key", "pass", "pwd", "secret", "contrase")


# A cheap pre-filter for the KeywordDetector (its five regexes cost most of a scan): a line can
# yield a secret only if one of its shapes is there: a keyword followed by an assignment and a
# quote (``password = "``, ``secret: '``, ``api_key => "``), a keyword then a quote and later a
# semicolon (``private_key "...";``), or a comparison before a keyword (``"..." == password``).
# Each is a necessary condition of the detector's own patterns (QUOTES_REQUIRED_DENYLIST_REGEX_TO_
# GROUP), so a line they reject has no keyword secret; lines they accept go to the detector.
_KW = "|".join(KEYWORD_DENYLIST)
_KW_ASSIGN = re.compile(rf"(?:{_KW})\w*[\]'\"]{{0,2}}\s*[:=!>]{{1,3}}\s*['\"`]", re.IGNORECASE)
_KW_SEMICOLON = re.compile(rf"(?:{_KW})\S{{0,50}}?\s*['\"`]", re.IGNORECASE)
_KW_COMPARED = re.compile(rf"[!=]{{2,3}}\s*\w*(?:{_KW})")
_HEX_RUN = re.compile(r"[0-9a-fA-F]{16,}")
_QUOTE_FREE_RUN = re.compile(r"[^\v'\"]{23,}")
_BASE64_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=")
# A value of Shannon entropy >= 4.5 over the base64 alphabet has at least 2**4.5 > 22 distinct
# characters of it (entropy <= log2 of the distinct count).
_MIN_DISTINCT_BASE64 = 23


def _may_hold_keyword_secret(text: str) -> bool:
    """False only when the KeywordDetector + entropy check cannot find a secret in ``text``."""
    if not (_HEX_RUN.search(text) or any(
            len(_BASE64_CHARS.intersection(run)) >= _MIN_DISTINCT_BASE64
            for run in _QUOTE_FREE_RUN.findall(text))):
        return False  # no value could reach the entropy limits (_high_entropy)
    return bool(_KW_ASSIGN.search(text)
                or (";" in text and _KW_SEMICOLON.search(text))
                or (("==" in text or "!=" in text) and _KW_COMPARED.search(text)))


def plugin_kind(plugin) -> str:
    """``Slack Token`` -> ``slack_token``."""
    return re.sub(r"[^a-z0-9]+", "_", plugin.secret_type.lower()).strip("_")


def _high_entropy(value: str) -> bool:
    if len(value) < MIN_ENTROPY_SECRET_CHARS:
        return False
    if _HEX_RE.match(value):
        return _HEX.calculate_shannon_entropy(value) >= _HEX.entropy_limit
    return _BASE64.calculate_shannon_entropy(value) >= _BASE64.entropy_limit


# Plugins whose match can stop short of the token's end (detect-secrets' JWT pattern is lazy and
# leaves the signature out): the redaction runs on to the end of the token.
_RUN_ON = {"json_web_token": re.compile(r"[A-Za-z0-9_\-+/=.]*")}


def _plugin_spans(plugin, text: str) -> list[tuple[int, int]]:
    """Where each of the plugin's rules matches. A rule whose group captures the value after a
    key (``://user:(password)@``, ``_authToken=(...)``) redacts that group; a rule whose group
    is a prefix of the token (GitLab's ``(glpat|...)-...``) or that has none redacts it all."""
    spans = []
    for regex in plugin.denylist:
        for match in regex.finditer(text):
            groups = [g for g in range(1, regex.groups + 1) if match.group(g)]
            if not groups or any(match.start(g) == match.start() for g in groups):
                spans.append(match.span())
            else:
                spans.append(match.span(max(groups, key=lambda g: match.end(g) - match.start(g))))
    return spans


def _redact_spans(text: str, spans, kind: str, kinds: list[str]) -> str:
    run_on = _RUN_ON.get(kind)
    out, last = [], 0
    for start, end in sorted(spans):
        if start < last:
            continue  # overlaps a span already redacted
        if run_on is not None:
            end = run_on.match(text, end).end()
        if text.startswith("[REDACTED:", start) or start == end:
            continue
        out += [text[last:start], f"[REDACTED:{kind}]"]
        kinds.append(kind)
        last = end
    return "".join(out) + text[last:] if out else text


def plugins_for(text: str) -> tuple:
    """The maintained plugins that match anywhere in ``text``: one scan of a whole file per
    rule, so that the line-by-line pass runs only those (usually none) on each line."""
    return tuple(p for p in MAINTAINED_PLUGINS if any(r.search(text) for r in p.denylist))


def _redact_maintained(text: str, kinds: list[str], plugins=MAINTAINED_PLUGINS) -> str:
    """detect-secrets' regex plugins, then the keyword + entropy check."""
    for plugin in plugins:
        spans = _plugin_spans(plugin, text)
        if spans:
            text = _redact_spans(text, spans, plugin_kind(plugin), kinds)
    lowered = text.lower()
    if not any(hint in lowered for hint in _KEYWORD_HINTS) or not _may_hold_keyword_secret(text):
        return text
    for secret in set(_KEYWORD.analyze_string(text)):
        if _high_entropy(secret) and secret in text:
            spans = [(m.start(), m.end()) for m in re.finditer(re.escape(secret), text)]
            text = _redact_spans(text, spans, "high_entropy_secret", kinds)
    return text


def redact_text(text: str, plugins=MAINTAINED_PLUGINS) -> tuple[str, list[str]]:
    """Redact every single-line secret in ``text``; returns (new text, kinds found in order).
    ``plugins``: the maintained plugins to run (default all; scan_file passes plugins_for())."""
    kinds: list[str] = []
    if not _TRIGGER.search(text):
        return _redact_maintained(text, kinds, plugins), kinds
    for kind, pattern, group in PATTERNS:
        def repl(match: re.Match, kind=kind, group=group) -> str:
            kinds.append(kind)
            if group == 0:
                return f"[REDACTED:{kind}]"
            start, end = match.span(group)
            base = match.start()
            whole = match.group(0)
            return whole[: start - base] + f"[REDACTED:{kind}]" + whole[end - base:]

        text = pattern.sub(repl, text)
    return _redact_maintained(text, kinds, plugins), kinds


def _redact_line_stream(lines, out, rel_path: str, findings: list[SecretFinding],
                        plugins=MAINTAINED_PLUGINS) -> bool:
    """Redact a file line by line (PEM blocks may span lines). Returns True if anything changed."""
    changed = False
    in_pem = False
    for number, raw in enumerate(lines, start=1):
        line = raw
        if in_pem:
            end = _PEM_END.search(line)
            if end is None:
                out.write("")  # the whole line is inside the key: drop it
                changed = True
                continue
            line = line[end.end():]
            in_pem = False
            changed = True
        new, kinds = redact_text(line, plugins)
        for kind in kinds:
            findings.append(SecretFinding(rel_path, number, kind))
        begin = _PEM_BEGIN.search(new)
        if begin is not None and _PEM_END.search(new, begin.end()) is None:
            # A multi-line PEM block starts here: keep the text before it.
            findings.append(SecretFinding(rel_path, number, "private_key"))
            newline = "\n" if new.endswith("\n") else ""
            new = new[: begin.start()] + "[REDACTED:private_key]" + newline
            in_pem = True
        if new != raw:
            changed = True
        out.write(new)
    return changed


def _redact_json_strings(value, state=None):
    """Redact every string of a JSON document, in document order; a PEM block split over
    several strings (BEGIN in one, END in a later one) is redacted in all of them."""
    state = {"in_pem": False} if state is None else state
    if isinstance(value, str):
        if state["in_pem"]:
            end = _PEM_END.search(value)
            if end is None:
                return "[REDACTED:private_key]"
            state["in_pem"] = False
            value = "[REDACTED:private_key]" + value[end.end():]
        value = redact_text(value)[0]
        begin = _PEM_BEGIN.search(value)
        if begin is not None and _PEM_END.search(value, begin.end()) is None:
            state["in_pem"] = True
            value = value[: begin.start()] + "[REDACTED:private_key]"
        return value
    if isinstance(value, list):
        return [_redact_json_strings(v, state) for v in value]
    if isinstance(value, dict):
        return {redact_text(k)[0]: _keyword_value(k, _redact_json_strings(v, state))
                for k, v in value.items()}
    return value


def _keyword_value(key, value):
    """The keyword + entropy check for one key/value pair of a parsed JSON object."""
    if isinstance(value, str) and _high_entropy(value) and value in set(
            _KEYWORD.analyze_string(json.dumps({key: value}))):
        return "[REDACTED:high_entropy_secret]"
    return value


def _is_json_text(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except (ValueError, RecursionError):
        return False


def scan_file(path: Path, rel_path: str, findings: list[SecretFinding], *,
              max_file_bytes: int = MAX_FILE_BYTES) -> None:
    try:
        st = os.lstat(path)
    except OSError:
        return
    if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
        return
    if st.st_size > max_file_bytes:
        findings.append(SecretFinding(rel_path, 0, "not_scanned_too_large"))
        return
    with open(path, "rb") as fh:
        head = fh.read(BINARY_SNIFF)
    if b"\0" in head:
        return
    with open(path, encoding="utf-8", errors="surrogateescape") as fh:
        whole = fh.read()
    plugins = plugins_for(whole)
    original_was_json = path.suffix.lower() == ".json" and _is_json_text(whole)
    del whole
    before = len(findings)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".redact-")
    try:
        with open(path, encoding="utf-8", errors="surrogateescape", newline="") as src, \
                os.fdopen(fd, "w", encoding="utf-8", errors="surrogateescape",
                          newline="") as dst:
            changed = _redact_line_stream(src, dst, rel_path, findings, plugins)
        if not changed:
            os.unlink(tmp)
            return
        if original_was_json:
            with open(tmp, encoding="utf-8", errors="surrogateescape") as fh:
                redacted_ok = _is_json_text(fh.read())
            if not redacted_ok:
                with open(path, encoding="utf-8", errors="surrogateescape") as fh:
                    doc = json.load(fh)
                with open(tmp, "w", encoding="utf-8", errors="surrogateescape") as fh:
                    json.dump(_redact_json_strings(doc), fh, indent=2, ensure_ascii=False)
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, path)
    except BaseException:
        del findings[before:]
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def scan_and_redact(root: Path | str, *, max_file_bytes: int = MAX_FILE_BYTES
                    ) -> list[SecretFinding]:
    """Scan every text file under ``root``, redact in place, return the findings (sorted)."""
    root = Path(root)
    findings: list[SecretFinding] = []
    count = 0
    for base, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            count += 1
            if count > MAX_FILES:
                return sorted(findings, key=lambda f: (f.file, f.line, f.kind))
            path = Path(base) / name
            if name.startswith(".redact-"):
                continue
            scan_file(path, path.relative_to(root).as_posix(), findings,
                      max_file_bytes=max_file_bytes)
    return sorted(findings, key=lambda f: (f.file, f.line, f.kind))
