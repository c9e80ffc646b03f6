"""The judge gateway, the Docker-facing half of evaluation/judge/: `container` starts the
gateway container beside a verifier (JudgeGateway, judge_gateway), `server` is the standard
library server copied into it (and imported by the synthetic judge for its protocol)."""

from evaluation.runner.judge.container import JudgeGateway, ca_bundle, judge_gateway, read_log

__all__ = ["JudgeGateway", "ca_bundle", "judge_gateway", "read_log"]
