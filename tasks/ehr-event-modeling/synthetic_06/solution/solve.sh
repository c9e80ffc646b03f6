#!/bin/bash
# Oracle: value-aware features + logistic regression (numpy only), trained on the labelled
# patients; it beats the count-feature gradient-boosting baseline.
set -euo pipefail
python3 /solution/solve.py --data /workspace/data --output /workspace/submission.json
