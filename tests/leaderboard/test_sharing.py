"""Results people can share: the SVG badge per agent and benchmark version,
and the citation as BibTeX and CFF, on the paper's demo data (hand-checked figures: Codex
(GPT 5.5) 68/162 = 42.0%, 95% interval [32.2%, 52.4%], reconstructed)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
import yaml

from leaderboard import sharing

pytestmark = pytest.mark.django_db
SVG = "{http://www.w3.org/2000/svg}"
Q = "?benchmark=healthagentbench@1.0"


def _codex_slug(demo_bv):
    return demo_bv.entries.get(agent__display_name="Codex (GPT 5.5)").agent.slug


def test_the_badge_says_the_sites_rate_interval_and_level(client, demo_bv):
    slug = _codex_slug(demo_bv)
    response = client.get(f"/badge/{slug}.svg{Q}")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml; charset=utf-8"
    root = ET.fromstring(response.content)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert texts == ["HealthAgentBench healthagentbench@1.0",
                     "42.0% [32.2%–52.4%] · reconstructed"]
    assert root.find(f"{SVG}title").text == ": ".join(texts)
    assert root.get("role") == "img" and root.get("aria-label") == ": ".join(texts)
    # The two parts are as wide as their text, and the whole as both.
    rects = [r for r in root.iter(f"{SVG}rect") if r.get("fill")]
    left, right = (int(r.get("width")) for r in rects)
    assert int(root.get("width")) == left + right
    assert right == round(sharing.text_width(texts[1]) + 12)


def test_the_badge_is_cached_and_revalidated_with_the_aggregates(client, demo_bv):
    slug = _codex_slug(demo_bv)
    first = client.get(f"/badge/{slug}.svg{Q}")
    etag = first["ETag"]
    assert etag and "no-cache" in first["Cache-Control"] and first["Last-Modified"]
    again = client.get(f"/badge/{slug}.svg{Q}", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b""
    assert client.get(f"/badge/{slug}.svg{Q}").content == first.content  # from the cache


def test_an_unknown_agent_or_version_gets_a_404(client, demo_bv):
    missing = client.get(f"/badge/no-such-agent.svg{Q}")
    assert missing.status_code == 404
    texts = [t.text for t in ET.fromstring(missing.content).iter(f"{SVG}text")]
    assert texts[1] == "no published result"
    slug = _codex_slug(demo_bv)
    assert client.get(f"/badge/{slug}.svg?benchmark=nothing@9").status_code == 404


def test_hostile_names_are_escaped_in_the_svg_and_the_citation():
    hostile = '<script>alert("x")</script> & {co} 100%_$'
    svg = sharing.badge_svg(hostile, hostile, "#000")
    root = ET.fromstring(svg)  # well-formed: every text and attribute escaped
    assert [t.text for t in root.iter(f"{SVG}text")] == [hostile, hostile]
    assert "<script>" not in svg and root.get("aria-label") == f"{hostile}: {hostile}"
    facts = {"agent": hostile, "org": "A&B {Lab}", "benchmark": "x@1", "rate": "1.0%",
             "interval": "0.1%–2.0%", "level": "verified", "submission": 7, "date": "2026-12-05",
             "url": "https://example.org/agents/a/?benchmark=x@1", "key": "hab-a-x-1"}
    bib = sharing.bibtex(facts)
    title = next(line for line in bib.splitlines() if line.strip().startswith("title"))
    assert r"\& \{co\} 100\%\_\$" in title
    assert bib.count("{") == bib.count("}")  # escaped braces count on both sides
    doc = yaml.safe_load(sharing.cff(facts))
    assert doc["title"] == f"{hostile} on HealthAgentBench x@1"


def test_the_agent_page_shows_the_badge_snippet_and_citations(client, demo_bv):
    slug = _codex_slug(demo_bv)
    page = client.get(f"/agents/{slug}/{Q}").content.decode()
    share = page.split('data-testid="share"')[1]
    badge_url = f"http://testserver/badge/{slug}.svg{Q}"
    assert f"[![HealthAgentBench healthagentbench@1.0]({badge_url})]" in share
    bib = client.get(f"/agents/{slug}/cite.bib{Q}")
    assert bib.status_code == 200 and bib["Content-Type"] == "application/x-bibtex; charset=utf-8"
    text = bib.content.decode()
    assert text.startswith(f"@misc{{hab-{slug}-healthagentbench-1-0,")
    assert "42.0\\% success (95\\% interval 32.2\\%–52.4\\%) on healthagentbench@1.0" in text
    assert "verification level: reconstructed" in text and "arXiv:2606.31179" in text
    cff = client.get(f"/agents/{slug}/cite.cff{Q}")
    doc = yaml.safe_load(cff.content)
    assert doc["cff-version"] == "1.2.0" and doc["authors"] and doc["title"].startswith(
        "Codex (GPT 5.5) on HealthAgentBench healthagentbench@1.0")
    assert {"message", "title", "authors"} <= set(doc)  # CFF 1.2.0's required keys
    assert doc["references"][0]["identifiers"][0]["value"] == "arXiv:2606.31179"
    assert client.get(f"/agents/{slug}/cite.txt{Q}").status_code == 404


def _png_size(data: bytes) -> tuple[int, int]:
    from io import BytesIO

    from PIL import Image

    with Image.open(BytesIO(data)) as image:
        assert image.format == "PNG"
        return image.size


def _ink(data: bytes) -> int:
    """How many pixels differ from the card's background (text and the accent bar)."""
    from io import BytesIO

    from PIL import Image

    from leaderboard.cards import BACKGROUND

    with Image.open(BytesIO(data)) as image:
        pixels = image.convert("RGB").get_flattened_data()
        return sum(1 for p in pixels if p != BACKGROUND)


def test_link_previews_are_the_sites_rendered_cards(client, demo_bv):
    slug = _codex_slug(demo_bv)
    page = client.get(f"/agents/{slug}/{Q}").content.decode()
    card_url = f"http://testserver/card/agents/{slug}.png{Q}"
    assert f'<meta property="og:image" content="{card_url}">' in page
    assert '<meta name="twitter:card" content="summary_large_image">' in page
    assert ('<meta property="og:title" content="Codex (GPT 5.5): 42.0% on HealthAgentBench '
            'healthagentbench@1.0">') in page
    card = client.get(card_url.removeprefix("http://testserver"))
    assert card.status_code == 200 and card["Content-Type"] == "image/png"
    assert _png_size(card.content) == (1200, 630)
    assert card["ETag"] and client.get(card_url.removeprefix("http://testserver"),
                                       HTTP_IF_NONE_MATCH=card["ETag"]).status_code == 304
    # Text is drawn: far more than the accent bar (1200 x 12) differs from the background.
    assert _ink(card.content) > 1200 * 12 * 2
    home = client.get(f"/{Q}").content.decode()
    assert (f'<meta property="og:image" content="http://testserver/card/leaderboard.png{Q}">'
            in home)
    board = client.get(f"/card/leaderboard.png{Q}")
    assert board.status_code == 200 and _png_size(board.content) == (1200, 630)
    assert client.get(f"/card/agents/no-such-agent.png{Q}").status_code == 404


def test_a_card_draws_a_long_name_within_the_image(demo_bv):
    from leaderboard import cards

    entry = demo_bv.entries.get(agent__display_name="Codex (GPT 5.5)")
    entry.agent.display_name = "An agent with a very long name " * 6
    data = cards.agent_card(entry, "healthagentbench@1.0")
    assert _png_size(data) == (1200, 630)
    from io import BytesIO

    from PIL import Image

    with Image.open(BytesIO(data)) as image:  # nothing drawn in the right margin
        strip = image.convert("RGB").crop((1200 - cards.MARGIN + 8, 0, 1200, 600))
        assert set(strip.get_flattened_data()) == {cards.BACKGROUND}


def test_a_published_submission_has_its_card_and_citation_and_no_other_does(client, demo_bv):
    entry = demo_bv.entries.get(agent__display_name="Codex (GPT 5.5)")
    pk = entry.submission_id
    page = client.get(f"/submissions/{pk}/").content.decode()
    assert (f'<meta property="og:image" content="http://testserver/card/submissions/{pk}.png">'
            in page)
    assert f"(submission {pk})" in page.split('property="og:title"')[1].split(">")[0]
    cite = page.split('data-testid="cite-result"')[1].split("</section>")[0]
    assert "verification level: reconstructed" in cite and f"submission {pk}" in cite
    assert f'/agents/{entry.agent.slug}/cite.cff?benchmark=healthagentbench@1.0' in cite
    card = client.get(f"/submissions/{pk}/".replace("/submissions/", "/card/submissions/")
                      .rstrip("/") + ".png")
    assert card.status_code == 200 and _png_size(card.content) == (1200, 630)
    # Taken down, it is no longer public: no card, no citation.
    from submissions.models import Submission

    Submission.objects.filter(pk=pk).update(status="withdrawn")
    try:
        assert client.get(f"/card/submissions/{pk}.png").status_code == 404
        assert client.get("/card/submissions/999999.png").status_code == 404
    finally:  # the module's demo data is shared
        Submission.objects.filter(pk=pk).update(status="published")
