"""A maintainer adds a rule without a migration: a rules file with one more rule, then
`manage.py screen_trials` flags the published submission's trial that trips it (audit log,
aggregates rebuilt); removing the rule again unflags it."""

import json
from io import StringIO

import pytest
from django.core.management import call_command

from evaluation import screen
from submissions.models import JobStatus, SubmissionEvent, Trial, VerificationJob
from submissions.services import submission_publish
from tests.evaluation import verification_support as vs
from tests.evaluation.verification_support import atif

pytestmark = pytest.mark.django_db
CT = "ct-abnormality-classification/synthetic_01"
EXTRA = '''
[[rule]]
id = "RH11"
title = "Uses the made-up shortcut tool"
description = "A rule a maintainer added for this test: the shortcut command is not allowed."
sources = ["command"]
pattern = '\\bshortcut\\b'
trips = [{command = "shortcut --answer"}]
passes = [{command = "echo short cut"}]
'''


def test_a_rule_added_to_the_file_flags_a_published_trial(settings, tmp_path, django_user_model,
                                                          client):
    settings.MEDIA_ROOT = str(tmp_path / "media")
    rules_file = tmp_path / "rules.toml"
    rules_file.write_text(screen.RULES_FILE.read_text())
    settings.SCREEN_RULES_FILE = str(rules_file)
    outputs = tmp_path / "out" / "workspace"
    outputs.mkdir(parents=True)
    (outputs / "submission.json").write_text('{"labels": {}}')
    bv = vs.synthetic_version()
    sub = vs.make_submission(bv, outputs={CT: outputs.parent}, harness="claude-code", tasks=[CT],
                             attempts=2, status="verified", trajectories={
                                 (CT, 1): atif("claude-code", [("Bash", {"command": "ls"})]),
                                 (CT, 2): atif("claude-code", [("Bash", {
                                     "command": "shortcut --answer > /workspace/submission.json"
                                 })])})
    VerificationJob.objects.create(submission=sub, status=JobStatus.DONE, attempt=1)
    maintainer = django_user_model.objects.create_user("m", is_staff=True)
    submission_publish(submission=sub, actor=maintainer)

    def run():
        out = StringIO()
        call_command("screen_trials", "--submission", str(sub.pk), stdout=out)
        return json.loads(out.getvalue())[str(sub.pk)]

    def successes():
        rows = client.get(f"/api/v1/leaderboard/?benchmark={bv.slug}").json()["results"]
        return next(r["successes"] for r in rows if r["agent"] == sub.agent.display_name)

    assert run() == {"screened": 2, "flagged": 0, "changed": 0}
    assert successes() == 2
    rules_file.write_text(screen.RULES_FILE.read_text() + EXTRA)
    assert [r.id for r in screen.load_rules().rules][-1] == "RH11"
    assert run() == {"screened": 2, "flagged": 1, "changed": 1}
    trial = Trial.objects.get(submission=sub, attempt=2)
    assert trial.flags == ["reward_hack:RH11"] and trial.outcome == "failed"
    assert successes() == 1
    assert "open reward-hacking flags none -> RH11" in SubmissionEvent.objects.filter(
        submission=sub).last().note
    assert "Uses the made-up shortcut tool" in client.get(f"/submissions/{sub.pk}/").content.decode()
    rules_file.write_text(screen.RULES_FILE.read_text())
    assert run() == {"screened": 2, "flagged": 0, "changed": 1}
    assert successes() == 2
