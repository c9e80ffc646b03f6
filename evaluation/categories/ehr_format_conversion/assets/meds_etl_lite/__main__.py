"""Command line: python -m meds_etl_lite --config config.toml --raw RAW_DIR --output OUT_DIR"""

import argparse
import sys
from pathlib import Path

from .extract import load_config, run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="meds_etl_lite", description=__doc__)
    parser.add_argument("--config", type=Path, default=Path("config.toml"))
    parser.add_argument("--raw", type=Path, required=True, help="directory holding hosp/*.csv")
    parser.add_argument("--output", type=Path, required=True, help="MEDS output directory")
    args = parser.parse_args(argv)
    n = run(load_config(args.config), args.raw, args.output)
    print(f"wrote {n} measurements to {args.output / 'data.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
