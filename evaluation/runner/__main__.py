"""`python -m evaluation.runner build-task-images | status | reap` (see cli.py)."""

from evaluation.runner.cli import main

raise SystemExit(main())
