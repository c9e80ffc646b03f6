"""python -m evaluation.synthetic <category> <task_dir> [--task-id ID]"""

import argparse
import sys
from pathlib import Path

from . import CATEGORIES, generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluation.synthetic", description=__doc__)
    parser.add_argument("category", choices=CATEGORIES)
    parser.add_argument("task_dir", type=Path)
    parser.add_argument("--task-id", help="seed name (default: the task directory's name)")
    args = parser.parse_args(argv)
    generate(args.category, args.task_dir, task_id=args.task_id)
    print(f"generated {args.category} data in {args.task_dir}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
