"""A published result as a citation: BibTeX and Citation File Format 1.2.0, naming the
benchmark version, the submission, the site's rate and interval, the verification level and
the date, with the benchmark's paper. Pure functions of a LeaderboardEntry (read through its
attributes: no import of the leaderboard app), shared by the agent page (leaderboard) and the
submission page (here)."""

from __future__ import annotations

import re

PAPER_URL = "https://arxiv.org/abs/2606.31179"
PAPER_EPRINT = "2606.31179"


def level_of(entry) -> str:
    """The level a badge and a citation name: what the site checked (reconstructed rows are
    the paper's aggregates, which the site could not check)."""
    return "reconstructed" if entry.reconstructed else (entry.verification_level or "claimed")


def _bibtex_text(value: str) -> str:
    """Braces balanced and TeX's special characters escaped (a name is data, not markup)."""
    value = re.sub(r"[\x00-\x1f\x7f]", " ", value)
    out = []
    for c in value:
        if c in "\\":
            out.append(r"\textbackslash{}")
        elif c in "{}&%$#_":
            out.append("\\" + c)
        elif c == "~":
            out.append(r"\textasciitilde{}")
        elif c == "^":
            out.append(r"\textasciicircum{}")
        else:
            out.append(c)
    return "".join(out)


def citation_facts(entry, *, benchmark_slug: str, url: str) -> dict:
    sub = entry.submission
    return {
        "agent": entry.agent.display_name,
        "org": entry.agent.organisation or "",
        "benchmark": benchmark_slug,
        "rate": f"{entry.success_rate:.1%}",
        "interval": f"{entry.ci_low:.1%}–{entry.ci_high:.1%}",
        "level": level_of(entry),
        "submission": sub.pk if sub is not None else None,
        "date": (entry.submitted_on.isoformat() if entry.submitted_on else ""),
        "url": url,
        "key": re.sub(r"[^a-z0-9]+", "-", f"hab-{entry.agent.slug}-{benchmark_slug}".lower())
        .strip("-"),
    }


def bibtex(facts: dict) -> str:
    note = (f"{facts['rate']} success (95% interval {facts['interval']}) on "
            f"{facts['benchmark']}; verification level: {facts['level']}"
            + (f"; submission {facts['submission']}" if facts["submission"] else "")
            + f"; cites arXiv:{PAPER_EPRINT}")
    year = facts["date"][:4]
    fields = [("title", f"{facts['agent']} on HealthAgentBench {facts['benchmark']}"),
              ("author", f"{{{facts['org'] or facts['agent']}}}"),
              ("year", year), ("howpublished", f"\\url{{{facts['url']}}}"), ("note", note)]
    body = ",\n".join(
        f"  {name:<12} = {{{value if name in ('author', 'howpublished') else _bibtex_text(value)}}}"
        for name, value in fields if value)
    return f"@misc{{{facts['key']},\n{body}\n}}\n"


def _yaml_str(value) -> str:
    import json

    return json.dumps(str(value), ensure_ascii=False)


def cff(facts: dict) -> str:
    """Citation File Format 1.2.0: this result, referring to the benchmark's paper."""
    lines = [
        "cff-version: 1.2.0",
        f"message: {_yaml_str('If you use this result, cite it and the HealthAgentBench paper.')}",
        "type: dataset",
        f"title: {_yaml_str(facts['agent'] + ' on HealthAgentBench ' + facts['benchmark'])}",
        "authors:",
        f"  - name: {_yaml_str(facts['org'] or facts['agent'])}",
        f"url: {_yaml_str(facts['url'])}",
    ]
    if facts["date"]:
        lines.append(f"date-released: {_yaml_str(facts['date'])}")
    lines += [
        f"abstract: {_yaml_str(facts['rate'] + ' success (95% interval ' + facts['interval'] + ') on ' + facts['benchmark'] + '; verification level: ' + facts['level'] + (('; submission ' + str(facts['submission'])) if facts['submission'] else ''))}",
        "references:",
        "  - type: article",
        f"    title: {_yaml_str('HealthAgentBench')}",
        "    authors:",
        f"      - name: {_yaml_str('HealthAgentBench authors')}",
        "    identifiers:",
        "      - type: other",
        f"        value: {_yaml_str('arXiv:' + PAPER_EPRINT)}",
        f"    url: {_yaml_str(PAPER_URL)}",
    ]
    return "\n".join(lines) + "\n"
