"""Link-preview cards (Open Graph / Twitter): 1200 x 630 PNG images the site
renders from its own figures, for the leaderboard and each agent. Pillow with its bundled
FreeType font; pure functions of the entries, cached by the views with the aggregates."""

from __future__ import annotations

import io

from PIL import Image, ImageDraw, ImageFont

from leaderboard.sharing import level_of

WIDTH, HEIGHT = 1200, 630
BACKGROUND = (24, 32, 44)
TEXT = (245, 247, 250)
MUTED = (170, 182, 198)
ACCENT = (102, 187, 106)
MARGIN = 64


def _font(size: int) -> ImageFont.FreeTypeFont:
    return ImageFont.load_default(size=size)


def _fit(draw: ImageDraw.ImageDraw, text: str, size: int, width: int) -> tuple[str, ImageFont]:
    """The text at the largest size up to ``size`` that fits ``width`` (shortened with an
    ellipsis below 60% of it)."""
    floor = int(size * 0.6)
    for s in range(size, floor - 1, -2):
        font = _font(s)
        if draw.textlength(text, font=font) <= width:
            return text, font
    font = _font(floor)
    while text and draw.textlength(text + "…", font=font) > width:
        text = text[:-1]
    return text + "…", font


def _png(image: Image.Image) -> bytes:
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _canvas(benchmark_slug: str) -> tuple[Image.Image, ImageDraw.ImageDraw]:
    image = Image.new("RGB", (WIDTH, HEIGHT), BACKGROUND)
    draw = ImageDraw.Draw(image)
    draw.text((MARGIN, MARGIN), f"HealthAgentBench · {benchmark_slug}", fill=MUTED, font=_font(36))
    draw.rectangle((0, HEIGHT - 12, WIDTH, HEIGHT), fill=ACCENT)
    return image, draw


def agent_card(entry, benchmark_slug: str, *, note: str = "") -> bytes:
    image, draw = _canvas(benchmark_slug)
    inner = WIDTH - 2 * MARGIN
    name, font = _fit(draw, entry.agent.display_name, 72, inner)
    draw.text((MARGIN, 150), name, fill=TEXT, font=font)
    draw.text((MARGIN, 270), f"{entry.success_rate:.1%}", fill=ACCENT, font=_font(120))
    draw.text((MARGIN, 410), f"success, 95% interval {entry.ci_low:.1%}–{entry.ci_high:.1%}",
              fill=TEXT, font=_font(40))
    place = f"rank {entry.rank}" if entry.rank is not None else "not ranked"
    draw.text((MARGIN, 480), f"{entry.successes}/{entry.attempts} attempts · {place} · "
              f"{level_of(entry)}" + (f" · {note}" if note else ""), fill=MUTED, font=_font(36))
    return _png(image)


def leaderboard_card(entries: list, benchmark_slug: str) -> bytes:
    """The top rows (rank, agent, success): at most five."""
    image, draw = _canvas(benchmark_slug)
    draw.text((MARGIN, 130), "Leaderboard", fill=TEXT, font=_font(64))
    y = 230
    for entry in entries[:5]:
        rate = f"{entry.success_rate:.1%}"
        rate_w = draw.textlength(rate, font=_font(44))
        name, font = _fit(draw, f"{entry.rank}. {entry.agent.display_name}", 44,
                          WIDTH - 2 * MARGIN - int(rate_w) - 40)
        draw.text((MARGIN, y), name, fill=TEXT, font=font)
        draw.text((WIDTH - MARGIN - rate_w, y), rate, fill=ACCENT, font=_font(44))
        y += 68
    if not entries:
        draw.text((MARGIN, y), "No published results yet", fill=MUTED, font=_font(44))
    return _png(image)
