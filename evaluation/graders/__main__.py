"""Command line of the graders, run by verifier containers (Python 3.11, no Django):

    python3 -m evaluation.graders <category> --answer A --submission S
        [--reward-file PATH] [--judge-url U] [--judge-model M] [--judge-key-env VAR]
        [--judge-timeout SECONDS]

stdout: one JSON object {"passed": true|false, "metrics": {...}} when the attempt was graded.
Exit codes:
  0  graded (passed or not)
  2  GradingInputError: malformed/oversized/unknown-id input; the message is on stderr
  3  JudgeUnavailable: the LLM judge timed out, failed or replied garbage; infrastructure error
With --reward-file, also writes grader.json beside it: {"category", "version", "grader"}, the
version of the grader that ran (the site records it with the score), and Harbor's flat numeric
reward JSON:
  graded       {"reward": 1 or 0, "<metric>": number, ...}
  input error  {"reward": 0, "input_error": 1}
  judge error  nothing is written, so Harbor records a verifier error (to retry), not a 0.
Judge settings default to the environment: XRAY_JUDGE_URL, XRAY_JUDGE_MODEL, the API key in the
variable named by --judge-key-env (default XRAY_JUDGE_API_KEY), XRAY_JUDGE_TIMEOUT_S.
"""

import argparse
import json
import math
import os
import sys

from . import (
    CATEGORIES,
    JUDGE_CATEGORIES,
    VERSIONS,
    ChatJudge,
    GradingInputError,
    JudgeUnavailable,
    grade,
    version_label,
)


def reward_payload(passed, metrics):
    """Harbor's reward.json: flat, numeric only (bools as 0/1, non-numbers dropped)."""
    payload = {"reward": 1 if passed else 0}
    for key, value in metrics.items():
        if key == "reward":
            continue
        if isinstance(value, bool):
            payload[key] = int(value)
        elif isinstance(value, (int, float)) and math.isfinite(value):
            payload[key] = value
    return payload


def write_json_atomically(path, payload):
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, allow_nan=False)
        handle.write("\n")
    os.replace(tmp, path)


def _env_float(name, default):
    try:
        return float(os.environ.get(name) or default)
    except ValueError:
        return default


def build_parser():
    parser = argparse.ArgumentParser(
        prog="python3 -m evaluation.graders",
        description="Grade one HealthAgentBench attempt.",
    )
    parser.add_argument("category", choices=CATEGORIES)
    parser.add_argument("--answer", required=True, help="hidden answer file (or directory)")
    parser.add_argument("--submission", required=True, help="agent output file (or directory)")
    parser.add_argument("--reward-file", help="also write Harbor's reward JSON here")
    parser.add_argument("--judge-url", default=os.environ.get("XRAY_JUDGE_URL", ""))
    parser.add_argument("--judge-model", default=os.environ.get("XRAY_JUDGE_MODEL", "gpt-5.4"))
    parser.add_argument(
        "--judge-key-env", default="XRAY_JUDGE_API_KEY",
        help="name of the environment variable holding the judge API key",
    )
    parser.add_argument(
        "--judge-timeout", type=float,
        default=_env_float("XRAY_JUDGE_TIMEOUT_S", 60.0),
        help="seconds per judge request",
    )
    return parser


def write_provenance(reward_file, category):
    """grader.json beside the reward file: which grader version graded (read by the site)."""
    path = os.path.join(os.path.dirname(os.path.abspath(reward_file)), "grader.json")
    write_json_atomically(path, {"category": category, "version": VERSIONS[category],
                                 "grader": version_label(category)})


def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.reward_file:
        write_provenance(args.reward_file, args.category)
    try:
        judge = None
        if args.category in JUDGE_CATEGORIES and args.judge_url:
            judge = ChatJudge(
                args.judge_url,
                args.judge_model,
                api_key=os.environ.get(args.judge_key_env, ""),
                timeout_s=args.judge_timeout,
            )
        result = grade(args.category, args.answer, args.submission, judge=judge)
    except GradingInputError as exc:
        print(f"grading input error: {exc}", file=sys.stderr)
        if args.reward_file:
            write_json_atomically(args.reward_file, {"reward": 0, "input_error": 1})
        return 2
    except JudgeUnavailable as exc:
        print(f"judge unavailable (infrastructure error, not a failure): {exc}", file=sys.stderr)
        return 3
    print(json.dumps(result.as_dict(), allow_nan=False, sort_keys=True))
    if args.reward_file:
        write_json_atomically(args.reward_file, reward_payload(result.passed, result.metrics))
    return 0


if __name__ == "__main__":
    sys.exit(main())
