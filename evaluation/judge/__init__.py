"""The site's LLM judges in one package: the X-ray report judge and the trajectory judge.

    client.py                  the OpenAI-compatible chat client of the X-ray judge (standard
                               library only: it also runs in verifier containers, copied to
                               /opt/hab with this file and the prompts)
    xray_judge_prompt.txt      the X-ray judge's versioned system prompt
    cache.py                   the site side of the X-ray judge: configuration, the gateway a
                               verifier gets, the judgement cache (JudgeCacheEntry)
    synthetic.py               make run's synthetic judge (a rule, not an LLM)

The Docker-facing half lives in the runner, the only package that talks to Docker (house style
HS21): evaluation/runner/judge/ (container.py starts the gateway container, server.py runs in
it). The X-ray client's and prompt's bytes are part of xray-report-correction's grader digest
(evaluation/grader_versions.py hashes them under their former evaluation/graders/ paths), so
they moved without a byte changed: client.py's docstring still names the gateway server by its
former path (evaluation/runner/judge_gateway.py, now evaluation/runner/judge/server.py) and the
category's spec (evaluation/categories/xray_report_correction/__init__.py, also hashed) the
client by its (evaluation/graders/judge.py); the grader's next version bump updates both.

Nothing is imported here: verifier containers import evaluation.judge.client without Django.
"""
