#!/bin/bash
# Verifier: grade the agent's output against the hidden answer in /tests (copied in only after
# the agent has stopped). Writes /logs/verifier/reward.json in every case but one: when the
# grader reports an infrastructure error (exit 3, e.g. the X-ray judge is down) no reward file
# is written, so Harbor records a verifier error to retry instead of a failed attempt.
set -u
REWARD=/logs/verifier/reward.json
mkdir -p /logs/verifier
rm -f "$REWARD"  # /logs/verifier is writable during the agent phase: never trust a stale file
export PYTHONPATH="/opt/hab${PYTHONPATH:+:$PYTHONPATH}"
# -P: never import from the working directory, which the agent controls.
cd /opt/hab 2>/dev/null || cd /
python3 -s -P -m evaluation.graders xray-report-correction \
  --answer /tests/answer.json \
  --submission /workspace/submission.json \
  --reward-file "$REWARD"
status=$?
if [ "$status" -eq 3 ]; then
  rm -f "$REWARD"
  exit 0
fi
if ! python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); assert r["reward"] in (0,1)' \
    "$REWARD" 2>/dev/null; then
  echo "{\"reward\": 0, \"grader_exit_code\": $status}" > "$REWARD"
fi
exit 0
