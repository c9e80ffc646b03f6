"""pathology-tumor-region: a small pyramidal tiled TIFF (OpenSlide "generic tiled TIFF").

Level 0 is 2048 x 2048 RGB cut into a fixed 8 x 8 grid of 256-px tiles; two tumour
blobs (denser, larger, darker purple nuclei on a darker stroma) cover whole grid tiles,
with a ragged edge that never covers more than a sliver of a neighbouring tile.
The answer is the set of tumour tiles.
"""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import tifffile

from evaluation.generating import SYNTHETIC_NOTICE, reset_dir, write_bytes, write_json, write_readme

SIZE = 2048
TILE = 256
GRID = SIZE // TILE
LEVELS = 3
BACKGROUND = (243, 242, 244)
STROMA = (232, 182, 204)
TUMOUR_STROMA = (205, 140, 186)
NUCLEUS = (128, 78, 160)
TUMOUR_NUCLEUS = (72, 34, 112)


def _box_blur(a: np.ndarray, r: int) -> np.ndarray:
    """Separable box blur (edge-padded) with integral images; numpy only."""
    out = a.astype(np.float64)
    for axis in (0, 1):
        pad = [(0, 0), (0, 0)]
        pad[axis] = (r + 1, r)
        c = np.cumsum(np.pad(out, pad, mode="edge"), axis=axis)
        hi = np.take(c, np.arange(2 * r + 1, c.shape[axis]), axis=axis)
        lo = np.take(c, np.arange(0, c.shape[axis] - 2 * r - 1), axis=axis)
        out = (hi - lo) / (2 * r + 1)
    return out


def _grow_blob(rng: np.random.Generator, tissue: np.ndarray, start, size: int, taken,
               grid: int = GRID) -> set:
    blob = {start}
    while len(blob) < size:
        r, c = sorted(blob)[rng.integers(len(blob))]
        dr, dc = ((0, 1), (1, 0), (0, -1), (-1, 0))[rng.integers(4)]
        nr, nc = r + dr, c + dc
        # Blobs stay apart: a new tile may not touch (even diagonally) another blob.
        apart = all(max(abs(nr - r2), abs(nc - c2)) > 1 for r2, c2 in taken)
        if 0 <= nr < grid and 0 <= nc < grid and tissue[nr, nc] and apart:
            blob.add((nr, nc))
    return blob


def _tissue_mask(rng: np.random.Generator, size: int = SIZE) -> np.ndarray:
    """Pixel mask of an irregular ellipse of tissue covering most of the slide."""
    yy, xx = np.mgrid[0:size:8, 0:size:8] / size - 0.5
    wobble = _box_blur(rng.normal(size=yy.shape), 12) * 6.0
    low = (xx / 0.47) ** 2 + (yy / 0.44) ** 2 + 0.15 * wobble < 1.0
    return np.kron(low, np.ones((8, 8), dtype=bool))


def _tumour_tiles(rng: np.random.Generator, tissue: np.ndarray, blobs=(7, 4),
                  grid: int = GRID) -> set:
    # A tile is eligible when it is almost fully inside the tissue.
    cover = tissue.reshape(grid, TILE, grid, TILE).mean(axis=(1, 3))
    inner = cover > 0.98
    candidates = sorted(zip(*np.nonzero(inner), strict=True))
    tiles: set = set()
    for size in blobs:
        for _ in range(10_000):
            start = tuple(int(v) for v in candidates[rng.integers(len(candidates))])
            near = any(max(abs(start[0] - r), abs(start[1] - c)) < 3 for r, c in tiles)
            if start not in tiles and not near:
                break
        else:
            raise ValueError(f"no room for a {size}-tile blob apart from {sorted(tiles)}")
        tiles |= _grow_blob(rng, inner, start, size, tiles, grid)
    return tiles


def _stamp(img: np.ndarray, y: int, x: int, radius: int, colour) -> None:
    yy, xx = np.mgrid[-radius : radius + 1, -radius : radius + 1]
    disc = yy**2 + xx**2 <= radius**2
    y0, y1 = max(y - radius, 0), min(y + radius + 1, img.shape[0])
    x0, x1 = max(x - radius, 0), min(x + radius + 1, img.shape[1])
    sub = disc[y0 - (y - radius) : y1 - (y - radius), x0 - (x - radius) : x1 - (x - radius)]
    img[y0:y1, x0:x1][sub] = colour


def _render(rng: np.random.Generator, tissue: np.ndarray, tumour: np.ndarray) -> np.ndarray:
    img = np.empty((*tissue.shape, 3), dtype=np.uint8)
    img[:] = BACKGROUND
    img[tissue] = STROMA
    img[tumour] = TUMOUR_STROMA
    area = float(tissue.sum())
    for mask, density, radii, colour in (
        (tissue & ~tumour, 1 / 700, (2, 3), NUCLEUS),
        (tumour, 1 / 160, (4, 5, 6), TUMOUR_NUCLEUS),
    ):
        ys, xs = np.nonzero(mask[::4, ::4])
        n = int(len(ys) * 16 * density) if mask is tumour else int(area * density * 0.9)
        pick = rng.integers(0, len(ys), size=n)
        jitter = rng.integers(-12, 13, size=(n, 3))
        sizes = rng.choice(radii, size=n)
        for i in range(n):
            y = int(ys[pick[i]] * 4 + rng.integers(4))
            x = int(xs[pick[i]] * 4 + rng.integers(4))
            c = np.clip(np.array(colour) + jitter[i], 0, 255).astype(np.uint8)
            _stamp(img, y, x, int(sizes[i]), c)
    return img


def _pyramid_tiff(level0: np.ndarray) -> bytes:
    buf = io.BytesIO()
    level = level0
    with tifffile.TiffWriter(buf) as tif:
        for i in range(LEVELS):
            tif.write(
                level,
                tile=(TILE, TILE),
                photometric="rgb",
                compression="zlib",
                compressionargs={"level": 6},
                resolution=(5000.0, 5000.0),
                resolutionunit="CENTIMETER",
                metadata=None,
                # OpenSlide sniffs vendors from the first ImageDescription; keep it neutral.
                description=f"{SYNTHETIC_NOTICE} level={i}" if i == 0 else None,
                software="healthagentbench-synthetic",
                # OpenSlide only takes IFDs after the first as levels if marked reduced-resolution.
                subfiletype=1 if i else 0,
            )
            h, w = level.shape[0] // 2, level.shape[1] // 2
            level = level.reshape(h, 2, w, 2, 3).mean(axis=(1, 3)).round().astype(np.uint8)
    return buf.getvalue()


def generate(task_dir: Path, rng: np.random.Generator, case_id: str = "case_01", *,
             grid: int = GRID, tumour_blobs: tuple[int, ...] = (7, 4)) -> None:
    """A ``grid`` x ``grid`` slide of 256-px tiles whose tumour is blobs of ``tumour_blobs``
    tiles each (their sum over grid**2 is the tumour fraction)."""
    if grid < 4:
        raise ValueError("the grid needs at least 4 x 4 tiles")
    data = reset_dir(task_dir / "environment" / "data")
    tissue = _tissue_mask(rng, grid * TILE)
    tiles = _tumour_tiles(rng, tissue, tuple(tumour_blobs), grid)
    tile_mask = np.zeros((grid, grid))
    for r, c in tiles:
        tile_mask[r, c] = 1.0
    # Ragged tumour edge: blur the tile mask at 1/8 scale and threshold with noise.
    coarse = np.kron(tile_mask, np.ones((TILE // 8, TILE // 8)))
    noise = _box_blur(rng.normal(size=coarse.shape), 4)
    ragged = _box_blur(coarse, 5) + 0.12 * noise / max(noise.std(), 1e-9) > 0.5
    tumour = np.kron(ragged, np.ones((8, 8), dtype=bool)) & tissue
    slide = _pyramid_tiff(_render(rng, tissue, tumour))

    write_bytes(data / case_id / "slide.tif", slide)
    write_json(
        data / case_id / "grid.json",
        {
            "_synthetic": SYNTHETIC_NOTICE,
            "case_id": case_id,
            "slide": "slide.tif",
            "level": 0,
            "tile_size_px": TILE,
            "rows": grid,
            "cols": grid,
            "tile_origin": "tile [row, col] covers level-0 pixels y in [row*256, row*256+256), "
            "x in [col*256, col*256+256)",
        },
    )
    write_readme(
        data / "README.md",
        "Pathology slide (synthetic)",
        "One H&E-like whole-slide image per case, stored as a tiled pyramidal TIFF "
        "(3 levels, 256-px tiles, deflate), readable by OpenSlide, tifffile or Pillow. "
        "`grid.json` defines the fixed tile grid used for answers.",
    )
    answer_tiles = sorted([int(r), int(c)] for r, c in tiles)
    write_json(
        task_dir / "tests" / "answer.json",
        {"grid": {"rows": grid, "cols": grid}, "tumor_tiles": answer_tiles},
    )
    write_json(task_dir / "solution" / "submission.json", {"tumor_tiles": answer_tiles})
