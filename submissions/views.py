"""HTML pages for accounts, tokens, uploads, status, moderation and trajectories. Thin: each
view parses input, calls one service or selector, renders. Foreign ids answer 404."""

from __future__ import annotations

import json
from functools import wraps
from pathlib import Path

from allauth.account import views as allauth_views
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.core.files.storage import default_storage
from django.http import FileResponse, Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from submissions import citation, linking
from submissions import client as submit_client
from submissions import selectors, services
from submissions.accounts import client_address
from submissions.api import submission_status_payload
from submissions.forms import ReasonForm, TokenForm, UploadForm
from submissions.harbor_intake import served_run, submittable_benchmark_versions
from submissions.intake import submission_receive
from submissions.metadata import helper_models
from submissions.models import ApiToken, SubmissionStatus
from submissions.pricing import price_table
from submissions import workspace
from submissions.trajectory import KINDS, SOURCES, trajectory_view
from submissions.uploads import request_upload_too_large, uploaded_sha256
from submissions.verification import verification_progress

def staff_required(view):
    """Maintainers only: anonymous callers are sent to sign in; a signed-in non-maintainer gets
    403 (signing in again would not help, so a login redirect would only confuse)."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path())
        if not (request.user.is_active and request.user.is_staff):
            raise PermissionDenied("maintainers only")
        return view(request, *args, **kwargs)

    return wrapper


@require_http_methods(["GET", "POST"])
def sign_up(request: HttpRequest) -> HttpResponse:
    """allauth's sign-up, behind the per-address limit: a new account gets a confirmation e-mail
    and signs in from its link, then lands on the page it was asked for (`next`, this site's
    only) or the account page, where the API token is created."""
    if request.method == "POST":
        wait = services.signup_wait_seconds(address=client_address(request))
        if wait:
            response = render(request, "account/signup_limited.html", {
                "limit": settings.ACCOUNT_SIGNUPS_PER_ADDRESS_PER_HOUR,
                "minutes": -(-wait // 60)}, status=429)
            response["Retry-After"] = str(wait)
            return response
    return allauth_views.signup(request)


@login_required
@require_GET
def show_account(request: HttpRequest) -> HttpResponse:
    tokens = ApiToken.objects.filter(user=request.user, revoked_at__isnull=True)
    return render(request, "submissions/account.html", {
        "tokens": list(tokens),
        "form": TokenForm(initial={"name": services.token_name_free(user=request.user,
                                                                     base="cli")}),
        "submissions": selectors.submission_list_for_user(user=request.user),
        "new_token": request.session.pop("new_token", None),
        "site_url": request.build_absolute_uri("/").rstrip("/"),
    })


@login_required
@require_POST
def create_token(request: HttpRequest) -> HttpResponse:
    form = TokenForm(request.POST)
    if form.is_valid():
        try:
            _token, raw = services.token_issue(user=request.user,
                                               name=form.cleaned_data["name"])
        except services.TokenNameTaken as exc:
            messages.error(request, str(exc))
        else:
            # Shown once on the next page, then gone from the session.
            request.session["new_token"] = raw
    return redirect("account")


@login_required
@require_POST
def revoke_token(request: HttpRequest, token_id: int) -> HttpResponse:
    if not services.token_revoke(user=request.user, token_id=token_id):
        raise Http404("no such token")
    messages.info(request, "Token revoked.")
    return redirect("account")


def _submit_guide(request: HttpRequest) -> dict:
    """The Submit page's how-to: the chosen (or first) version this site re-grades, its task
    packages (one Harbor job each: a category directory also holds other versions' packages),
    and this site's URL."""
    versions = submittable_benchmark_versions()
    wanted = request.GET.get("benchmark", "")
    bv = next((v for v in versions if v.slug == wanted), versions[0] if versions else None)
    packages = sorted(task.package_path for task in (bv.tasks.all() if bv else []))
    version, _data, sha256 = submit_client.release()
    return {"versions": versions, "bv": bv, "packages": packages,
            "served": served_run(bv) if bv else None,
            "site_url": request.build_absolute_uri("/").rstrip("/"),
            "client": {"version": version, "sha256": sha256},
            "repository_url": settings.REPOSITORY_URL}


@require_GET
def client_script(request: HttpRequest) -> HttpResponse:
    """The upload client, one standard-library file (submissions/client.py) that needs nothing
    cloned: its bytes as the Submit page's sha256 names them, revalidated by that digest."""
    version, data, sha256 = submit_client.release()
    etag = f'"{sha256}"'
    if etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
        response = HttpResponse(status=304)
    else:
        response = HttpResponse(data, content_type="text/x-python; charset=utf-8")
        response["Content-Disposition"] = 'inline; filename="hab-submit.py"'
    response["ETag"] = etag
    response["Cache-Control"] = "public, max-age=300, must-revalidate"
    response["X-Client-Version"] = version
    return response


@require_http_methods(["GET", "POST"])
def submit_agent(request: HttpRequest) -> HttpResponse:
    """Public: how to run Harbor and submit; signed-in users also get the upload form."""
    if request.method == "POST" and not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    form = UploadForm(request.POST or None, request.FILES or None)
    problems, status = [], 200
    if request.method == "POST":
        if request_upload_too_large(request):
            problems, status = [{"code": "too_large", "path": "archive",
                                 "message": "the upload is larger than the limit"}], 413
        elif form.is_valid():
            meta = form.cleaned_data.get("metadata")
            try:
                submission, _ = submission_receive(
                    owner=request.user,
                    archive_path=Path(form.cleaned_data["archive"].temporary_file_path()),
                    archive_name=form.cleaned_data["archive"].name,
                    archive_sha256=uploaded_sha256(form.cleaned_data["archive"]),
                    metadata_text=meta.read(64 * 1024).decode("utf-8", "replace") if meta else "")
            except services.QuotaExceeded as exc:
                problems, status = [{"code": exc.code, "path": "", "message": str(exc)}], 429
            except services.StorageUnavailable as exc:
                problems, status = [{"code": exc.code, "path": "", "message": str(exc)}], 503
            else:
                # The live status page follows the validation, then the verdict.
                return redirect("submission-status", pk=submission.pk)
    return render(request, "submissions/submit.html",
                  {"form": form, "problems": problems, **_submit_guide(request)}, status=status)


@require_GET
def show_pricing(request: HttpRequest) -> HttpResponse:
    return render(request, "submissions/pricing.html", {"table": price_table()})


def _with_rerun_figures(submission, trials: list) -> dict:
    """Each trial row gets ``rerun``: the site's re-run of its task and attempt (measured
    figures), or None; returns how many re-ran and how many report a cost far below it."""
    figures = selectors.rerun_figures(submission=submission, trials=trials)
    for t in trials:
        t.rerun = figures.get(t.pk)
    return {"count": len(figures),
            "far_below": sum(f.cost_far_below for f in figures.values())}


@require_GET
def show_submission(request: HttpRequest, pk: int) -> HttpResponse:
    user = request.user if request.user.is_authenticated else None
    submission = selectors.submission_get_for_user(user=user, pk=pk)
    if submission is None:
        raise Http404("no such submission")
    private = user is not None and (user.is_staff or submission.owner_id == user.pk)
    return render(request, "submissions/status.html", {
        "submission": submission, "private": private,
        "status_json": submission_status_payload(submission, include_private=private),
        "trials": (trials := selectors.trial_list(submission=submission)),
        "cost_computed": any(t.cost_computed for t in trials),
        "rerun_figures": _with_rerun_figures(submission, trials),
        "cost_min_ratio": settings.VERIFICATION_REPORTED_COST_MIN_RATIO,
        "cost_max_ratio": settings.VERIFICATION_REPORTED_COST_MAX_RATIO,
        "reason_form": ReasonForm(), "statuses": SubmissionStatus,
        "verification": verification_progress(submission=submission),
        "screen": selectors.screen_findings(submission=submission),
        "screened": selectors.screened_count(submission=submission),
        "infra": (infra := selectors.infra_claims(submission=submission)),
        "infra_confirmed": sum(c["trial"].infra_confirmed for c in infra),
        "share": _submission_share(request, submission),
        "lineage": linking.lineage_summary(submission) if user and user.is_staff else None,
        "helper_models": helper_models(submission.metadata),
    })


def _submission_share(request: HttpRequest, submission) -> dict | None:
    """A published submission's citation and link-preview card (nothing before it is public:
    an unpublished submission is seen by its owner and the maintainers only)."""
    entry = selectors.published_entry(submission=submission)
    if entry is None:
        return None
    slug = entry.benchmark_version.slug
    page = request.build_absolute_uri(reverse("submission-status", args=[submission.pk]))
    facts = citation.citation_facts(entry, benchmark_slug=slug, url=page)
    query = f"?benchmark={slug}"
    return {"bibtex": citation.bibtex(facts),
            "bib_url": reverse("agent-cite", args=[entry.agent.slug, "bib"]) + query,
            "cff_url": reverse("agent-cite", args=[entry.agent.slug, "cff"]) + query,
            "card_url": reverse("card-submission", args=[submission.pk]),
            "rate": entry.success_rate, "level": citation.level_of(entry)}


@staff_required
@require_GET
def list_moderation(request: HttpRequest) -> HttpResponse:
    return render(request, "submissions/moderation.html",
                  {"submissions": selectors.moderation_queue(), "reason_form": ReasonForm()})


@staff_required
@require_POST
def moderate_submission(request: HttpRequest, pk: int, action: str) -> HttpResponse:
    submission = selectors.submission_get_for_user(user=request.user, pk=pk)
    if submission is None:
        raise Http404("no such submission")
    form = ReasonForm(request.POST)
    reason = form.data.get("reason", "")
    try:
        if action == "publish":
            services.submission_publish(submission=submission, actor=request.user)
        elif action == "reject":
            services.submission_reject(submission=submission, actor=request.user, reason=reason)
        elif action == "reverify":
            services.submission_reverify(submission=submission, actor=request.user,
                                         reason=reason)
        elif action == "rescore":
            services.submission_rescore(submission=submission, actor=request.user,
                                        reason=reason)
            messages.info(request, "re-score queued: the leaderboard switches when it is done")
        elif action == "withdraw":
            services.submission_withdraw(submission=submission, actor=request.user,
                                         reason=reason)
        else:
            raise Http404("unknown action")
    except services.SubmissionError as exc:
        messages.error(request, str(exc))
    return redirect("submission-status", pk=pk)


def _trial_file(request: HttpRequest, pk: int, trial_pk: int):
    user = request.user if request.user.is_authenticated else None
    trial = selectors.trial_get_for_user(user=user, submission_pk=pk, trial_pk=trial_pk)
    if trial is None or not trial.trajectory_path:
        raise Http404("no trajectory for this trial")
    return trial, f"{trial.submission.files_prefix}/{trial.trajectory_path}"


@require_GET
def show_trajectory(request: HttpRequest, pk: int, trial_pk: int) -> HttpResponse:
    trial, name = _trial_file(request, pk, trial_pk)
    with default_storage.open(name, "rb") as fh:
        raw = fh.read(workspace.MAX_TRAJECTORY_BYTES)
    try:
        view = trajectory_view(json.loads(raw), query=request.GET.get("q", "")[:200],
                               sources=request.GET.getlist("source"),
                               kinds=request.GET.getlist("show"))
    except (ValueError, RecursionError):
        view = None
    previous, following = selectors.trial_neighbours(trial=trial)
    return render(request, "submissions/trajectory.html", {
        "trial": trial, "view": view, "steps": view.steps if view else None,
        "previous": previous, "next": following, "kinds": KINDS, "sources": SOURCES,
        "workspace": workspace.workspace_changes(trial),
        "screen": selectors.screen_findings(submission=trial.submission, trial=trial),
        "isolation": selectors.trial_isolation(trial=trial),
        "reason_form": ReasonForm()})


@staff_required
@require_POST
def clear_screen_flag(request: HttpRequest, pk: int, trial_pk: int) -> HttpResponse:
    """A maintainer clears a trial's reward-hacking flags with a written reason."""
    trial = selectors.trial_get_for_user(user=request.user, submission_pk=pk, trial_pk=trial_pk)
    if trial is None:
        raise Http404("no such trial")
    try:
        services.screen_flag_clear(trial=trial, actor=request.user,
                                   reason=ReasonForm(request.POST).data.get("reason", ""))
    except services.SubmissionError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, "Reward-hacking flag cleared; the trial counts by its grade again.")
    return redirect(f"{reverse('submission-status', kwargs={'pk': pk})}#screen")


@staff_required
@require_POST
def confirm_infra_error(request: HttpRequest, pk: int, trial_pk: int, action: str) -> HttpResponse:
    """A maintainer confirms a claimed infrastructure error (or revokes a confirmation) with a
    written reason."""
    trial = selectors.trial_get_for_user(user=request.user, submission_pk=pk, trial_pk=trial_pk)
    if trial is None or action not in ("confirm", "revoke"):
        raise Http404("no such trial")
    reason = ReasonForm(request.POST).data.get("reason", "")
    try:
        if action == "confirm":
            services.infra_error_confirm(trial=trial, actor=request.user, reason=reason)
        else:
            services.infra_error_revoke(trial=trial, actor=request.user, reason=reason)
    except services.SubmissionError as exc:
        messages.error(request, str(exc))
    else:
        messages.info(request, "Infrastructure error confirmed: the trial leaves the denominator."
                      if action == "confirm" else
                      "Confirmation revoked: the trial counts as a failure again.")
    return redirect(f"{reverse('submission-status', kwargs={'pk': pk})}#infra")


def _trial_download(request: HttpRequest, pk: int, trial_pk: int):
    """A trial's files download for the public once published, else for its owner and staff."""
    trial, name = _trial_file(request, pk, trial_pk)
    if trial.submission.status != SubmissionStatus.PUBLISHED and not (
        request.user.is_authenticated
        and (request.user.is_staff or trial.submission.owner_id == request.user.pk)
    ):
        raise Http404("no such trajectory")
    return trial, name


def _attachment(response: HttpResponse) -> HttpResponse:
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"
    return response


@require_GET
def download_trajectory(request: HttpRequest, pk: int, trial_pk: int) -> FileResponse:
    trial, name = _trial_download(request, pk, trial_pk)
    return _attachment(FileResponse(
        default_storage.open(name, "rb"), as_attachment=True,
        filename=f"submission-{pk}-trial-{trial_pk}-trajectory.json",
        content_type="application/octet-stream"))


@require_GET
def download_trial(request: HttpRequest, pk: int, trial_pk: int) -> HttpResponse:
    """The trial as one zip: trajectory, declared outputs and the site's record of it."""
    trial, _ = _trial_download(request, pk, trial_pk)
    response = HttpResponse(workspace.trial_zip(trial), content_type="application/zip")
    response["Content-Disposition"] = (
        f'attachment; filename="submission-{pk}-trial-{trial_pk}.zip"')
    return _attachment(response)
