#!/bin/bash
# Oracle: customise the ETL the way SPEC.md asks (cohort filter on, race events on) and run it.
set -euo pipefail
cd /workspace/data/etl
cp /solution/config.toml config.toml
python3 -m meds_etl_lite --config config.toml --raw /workspace/data/raw --output /workspace/output
