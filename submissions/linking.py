"""Re-uploads of the same runs, linked: one archive re-rolled by a byte is one submission again.

At intake every trial gets three fingerprints from the extracted tree: Harbor's trial id (its
result.json ``id``, else its trial name), the sha256 of its trajectory and a digest of its output
files. A new submission is linked to every earlier one with which it shares a trial id or a
trajectory, or most of its outputs including a failing one (identical right answers alone are
what honest agents share). Links cross accounts. The chain's first submission is the lineage: its
archive digest keys the re-run order of every linked upload, and the re-runs already made for
the same agent are reused (submissions.verification.checks.rerun), so a re-roll draws nothing
new. A discrepancy anywhere in the chain makes every linked upload a discrepancy.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from django.db.models import Q

from evaluation.digests import sha256_file
from submissions.models import (
    Submission,
    SubmissionLink,
    SubmissionStatus,
    Trial,
)

# Outputs link only when at least this share of the trials carry an output another submission
# has too, and at least one of those trials is not a pass.
OUTPUT_SHARE = 0.5
_UNLINKED = (SubmissionStatus.RECEIVED, SubmissionStatus.VALIDATING, SubmissionStatus.REFUSED)


def trial_fingerprints(tree: Path, trial: Trial) -> dict:
    """The three fingerprints of one trial, read from the extracted upload ``tree``."""
    trial_dir = tree / (trial.trial_dir or "").strip("/")
    harbor_id = ""
    try:
        result = json.loads((trial_dir / "result.json").read_text())
        harbor_id = str(result.get("id") or result.get("trial_name") or "")[:100]
    except (OSError, ValueError, AttributeError):
        pass
    if not harbor_id and trial.trial_dir:
        harbor_id = Path(trial.trial_dir).name[:100]
    trajectory = ""
    if trial.trajectory_path:
        path = tree / trial.trajectory_path.strip("/")
        if path.is_file():
            trajectory = sha256_file(path)
    outputs = ""
    artifacts = trial_dir / "artifacts"
    if artifacts.is_dir():
        files = sorted(p for p in artifacts.rglob("*") if p.is_file()
                       and p.relative_to(artifacts).as_posix() != "manifest.json")
        if files:
            h = hashlib.sha256()
            for p in files:
                h.update(f"{p.relative_to(artifacts).as_posix()}\0{sha256_file(p)}\n".encode())
            outputs = h.hexdigest()
    return {"harbor_trial_id": harbor_id, "trajectory_sha256": trajectory,
            "outputs_sha256": outputs}


def submission_link(*, submission_id: int, tree: Path) -> list[SubmissionLink]:
    """Fingerprint the submission's trials and link it to every earlier submission that shares
    runs with it; set its lineage. Run inside intake's accepting transaction, before the re-run
    order is committed (the order is keyed by the lineage)."""
    sub = Submission.objects.get(pk=submission_id)
    trials = list(Trial.objects.filter(submission=sub))
    for t in trials:
        for field, value in trial_fingerprints(tree, t).items():
            setattr(t, field, value)
    Trial.objects.bulk_update(trials, ["harbor_trial_id", "trajectory_sha256", "outputs_sha256"])
    return _link(sub, trials)


def _link(sub: Submission, trials: list[Trial]) -> list[SubmissionLink]:
    ids = {t.harbor_trial_id for t in trials if t.harbor_trial_id}
    trajectories = {t.trajectory_sha256 for t in trials if t.trajectory_sha256}
    outputs = {t.outputs_sha256 for t in trials if t.outputs_sha256}
    match = (Q(harbor_trial_id__in=ids) | Q(trajectory_sha256__in=trajectories)
             | Q(outputs_sha256__in=outputs))
    rows = (Trial.objects.filter(match).exclude(submission=sub)
            .exclude(submission__status__in=_UNLINKED)
            .filter(submission__created_at__lte=sub.created_at)
            .values_list("submission_id", "harbor_trial_id", "trajectory_sha256",
                         "outputs_sha256"))
    shared: dict[int, dict] = {}
    for other, hid, traj, out in rows:
        s = shared.setdefault(other, {"ids": set(), "trajectories": set(), "outputs": set()})
        if hid in ids:
            s["ids"].add(hid)
        if traj in trajectories:
            s["trajectories"].add(traj)
        if out in outputs:
            s["outputs"].add(out)
    owners = dict(Submission.objects.filter(pk__in=shared).values_list("pk", "owner_id"))
    links = []
    for other, s in sorted(shared.items()):
        # Counted in this submission's trials that share each kind with the other.
        n_ids = sum(1 for t in trials if t.harbor_trial_id in s["ids"])
        n_traj = sum(1 for t in trials if t.trajectory_sha256 in s["trajectories"])
        same_out = [t for t in trials if t.outputs_sha256 in s["outputs"]]
        outputs_link = (len(same_out) >= OUTPUT_SHARE * len(trials)
                        and any(not t.success for t in same_out))
        if not (n_ids or n_traj or outputs_link):
            continue
        link, _ = SubmissionLink.objects.update_or_create(
            submission=sub, linked_id=other, defaults={
                "shared_trial_ids": n_ids, "shared_trajectories": n_traj,
                "shared_outputs": len(same_out),
                "same_owner": sub.owner_id is not None and owners.get(other) == sub.owner_id})
        links.append(link)
    if links:
        roots = {lineage or pk for pk, lineage in Submission.objects.filter(
            pk__in=[ln.linked_id for ln in links]).values_list("pk", "lineage_id")}
        first = (Submission.objects.filter(pk__in=roots).order_by("created_at", "pk")
                 .values_list("pk", flat=True).first())
        Submission.objects.filter(pk=sub.pk).update(lineage_id=first)
    return links


def lineage_of(sub: Submission) -> list[int]:
    """Every submission of ``sub``'s chain (itself included), oldest first."""
    root = sub.lineage_id or sub.pk
    return list(Submission.objects.filter(Q(pk=root) | Q(lineage_id=root))
                .order_by("created_at", "pk").values_list("pk", flat=True))


def lineage_summary(sub: Submission) -> dict:
    """What maintainers see: the links of this submission (both ways) and the chain's re-rolls
    (uploads after the first), with their owners and verdicts."""
    chain = lineage_of(sub)
    rows = (SubmissionLink.objects.filter(Q(submission=sub) | Q(linked=sub))
            .select_related("submission", "linked"))
    links = []
    for ln in rows:
        other = ln.linked if ln.submission_id == sub.pk else ln.submission
        links.append({"submission": other.pk,
                      "direction": "earlier" if other.pk == ln.linked_id else "later",
                      "owner_id": other.owner_id, "same_owner": ln.same_owner,
                      "shared_trial_ids": ln.shared_trial_ids,
                      "shared_trajectories": ln.shared_trajectories,
                      "shared_outputs": ln.shared_outputs,
                      "verdict": (other.coverage or {}).get("verdict", other.status)})
    return {"lineage": chain[0], "chain": chain, "rerolls": max(0, len(chain) - 1),
            "links": links}
