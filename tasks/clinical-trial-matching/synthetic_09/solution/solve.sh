#!/bin/bash
# Oracle: the reference answer, precomputed by the generator (evaluation/synthetic) from the
# same parameters that drew the data.
set -euo pipefail
cp /solution/submission.json /workspace/submission.json
