"""The OpenAPI schema at /api/schema/ is the API's exact contract: schemathesis (pinned in the dev
dependencies) generates requests from it against a live server of the whole site, the
authenticated operations with a real API token, and every check of every phase (coverage,
fuzzing, stateful: it walks the schema's OpenAPI link upload -> status, starting from uploads of
a real Harbor run that tests/leaderboard/schemathesis_hooks.py puts in half the valid ones)
must pass: each status code an operation answers is documented with its
body, each parameter bound, enum and pattern is enforced (a schema-valid request is accepted,
a schema-violating one refused), and every response matches its schema.

The example budget keeps the run well under two minutes on two cores; HAB_FUZZ_MAX_EXAMPLES
raises it (`HAB_FUZZ_MAX_EXAMPLES=100 pytest -m fuzz` is the heavier run, the CLI's default).

Beside it, what the fuzzer cannot tell: the figures behind a documented answer, as a client sees
them.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import call_command
from django.test import Client

from devtools.harbor_fixtures import HarborJobBuilder, build_metadata
from submissions.services import token_issue
from tests.submissions.intake_support import targz

ST = Path(sys.executable).with_name("st")
MAX_EXAMPLES = int(os.environ.get("HAB_FUZZ_MAX_EXAMPLES", "15"))
Q = "?benchmark=healthagentbench@1.0"
HOOKS = Path(__file__).with_name("schemathesis_hooks.py")


@pytest.fixture
def fuzzed_site(live_server, transactional_db, settings, tmp_path, django_user_model):
    """The live site with the paper's data and a user's API token (uploads land in tmp_path)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    settings.SUBMISSION_STAGING_DIR = tmp_path / "staging"
    # Uploads are accepted (202) rather than mostly over the daily quota (429).
    settings.SUBMISSION_DAILY_QUOTA = 10_000
    # Likewise past the API throttles: the fuzz checks the contract, not the rates (A14 does).
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        scope: "100000/minute" for scope in settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]}}
    call_command("load_demo", verbosity=0)
    user = django_user_model.objects.create_user("fuzzer", "fuzz@example.org", "pw-fuzz-123!")
    return live_server.url, token_issue(user=user)[1]


@pytest.fixture
def fuzz_hooks_env(tmp_path):
    """The schemathesis hooks' environment: a valid Harbor run (every task of the synthetic
    benchmark, 3 attempts, as tests/submissions/test_upload_api.py's queued upload) and its
    metadata, which half the generated uploads carry; the call log."""
    from evaluation.models import BenchmarkVersion

    call_command("sync_tasks", verbosity=0)
    bv = BenchmarkVersion.objects.get(name="healthagentbench-synthetic", version="1.0")
    HarborJobBuilder({t.name: t.content_digest for t in bv.tasks.all()}, agent="codex",
                     model="openai/gpt-5.5").build(tmp_path / "jobs")
    (tmp_path / "run.tar.gz").write_bytes(targz(tmp_path / "jobs"))
    (tmp_path / "metadata.yaml").write_text(yaml.safe_dump(build_metadata()))
    return {**os.environ, "SCHEMATHESIS_HOOKS": str(HOOKS),
            "HAB_FUZZ_ARCHIVE": str(tmp_path / "run.tar.gz"),
            "HAB_FUZZ_METADATA": str(tmp_path / "metadata.yaml"),
            "HAB_FUZZ_LOG": str(tmp_path / "calls.jsonl")}


@pytest.mark.fuzz
def test_schemathesis_finds_no_contract_failure(fuzzed_site, fuzz_hooks_env, tmp_path):
    url, token = fuzzed_site
    run = subprocess.run(
        [str(ST), "run", f"{url}/api/schema/", "--checks", "all",
         "--phases", "examples,coverage,fuzzing,stateful",
         "--max-examples", str(MAX_EXAMPLES), "--seed", "31", "--workers", "1",
         "--header", f"Authorization: Token {token}", "--no-color",
         "--report", "junit", "--report-dir", str(tmp_path / "report")],
        capture_output=True, text=True, timeout=600, check=False, cwd=tmp_path,
        env=fuzz_hooks_env)
    out = run.stdout + run.stderr
    summary = out[out.find("SUMMARY"):] if "SUMMARY" in out else out[-3000:]
    print(summary)  # the figures: operations, phases, cases generated, failures
    (tmp_path / "st-output.txt").write_text(out)  # whole, binary upload bodies included
    assert run.returncode == 0, out[-20000:]
    assert "Tested: 10" in out and "10 selected / 10 total" in out, summary
    generated = re.search(r"(\d+) generated", out)
    assert generated and int(generated.group(1)) >= 10 * MAX_EXAMPLES, summary
    # The token worked: no operation answered only 401 (schemathesis warns otherwise).
    assert "Authentication failed" not in out, summary
    assert "Rate limited" not in out, summary
    # The stateful phase walked the declared links (config.api.LINKS) ...
    links = re.search(r"API Links:\s+(\d+) covered / (\d+) selected / (\d+) total", out)
    assert links and int(links.group(1)) == int(links.group(2)) >= 1, summary
    # ... the upload -> status one among them: a status request for an id that a fixture
    # upload's 202 returned, answered 200 while the intake worker has it (received/validating).
    calls = [json.loads(line) for line in
             Path(fuzz_hooks_env["HAB_FUZZ_LOG"]).read_text().splitlines()]
    uploaded = {c["id"] for c in calls if c["method"] == "POST" and c["status"] == 202
                and c["fixture"]}
    followed = [c for c in calls if c["phase"] == "stateful" and c["method"] == "GET"
                and c["path"] == "/api/v1/submissions/{id}/" and c["status"] == 200
                and int(c["path_parameters"].get("id", "0")) in uploaded]
    assert followed, summary
    assert {c["submission_status"] for c in followed} <= {"received", "validating"}, followed
    print(f"links: {links.group(0)}; fixture uploads accepted: {len(uploaded)}; "
          f"their statuses followed by the stateful phase: {len(followed)}")


def _problem(response):
    return response.status_code, response.json()


def test_bounds_and_enums_are_refused_with_the_parameters_named(client, demo_bv):
    for query, field in [("limit=0", "limit"), ("limit=1001", "limit"), ("offset=-1", "offset"),
                         (f"offset={2**31}", "offset"), ("limit=1_0", "limit"),
                         ("sort=price", "sort"), ("order=up", "order"),
                         ("verified=maybe", "verified"), ("benchmark=nameonly", "benchmark"),
                         ("limit=5&limit=6", "limit")]:
        status, body = _problem(client.get(f"/api/v1/leaderboard/?{query}"))
        assert status == 400 and body["detail"] == "invalid query parameters", (query, body)
        assert list(body["errors"]) == [field], (query, body)
    status, body = _problem(client.get("/api/v1/trials/?limit=5001"))
    assert status == 400 and list(body["errors"]) == ["limit"]
    assert client.get("/api/v1/trials/?limit=5000").status_code == 200
    assert client.get("/api/v1/trials/?offset=9223372036854775807").status_code == 400


def test_an_unknown_benchmark_is_a_404_with_detail(client, demo_bv):
    for path in ("leaderboard", "trials", "categories", "groups", "harness-families"):
        status, body = _problem(client.get(f"/api/v1/{path}/?benchmark=nosuch@9"))
        assert status == 404 and set(body) == {"detail"}, (path, body)


def test_unlisted_query_parameters_are_ignored_everywhere(client, demo_bv):
    """Documented as ignored: the same answer with and without them (?format= included: the
    API answers JSON only, to any Accept header too)."""
    def rows(url):
        body = client.get(url).json()
        # a page's next/previous links keep the query string as sent
        return body if isinstance(body, list) else (body["count"], body["results"])

    for path in ("leaderboard", "trials", "categories", "groups", "harness-families"):
        plain = rows(f"/api/v1/{path}/{Q}")
        assert rows(f"/api/v1/{path}/{Q}&utm_source=x&format=xml") == plain, path
    # harness-families aggregates every agent: the entry filters are not among its parameters
    fams = client.get(f"/api/v1/harness-families/{Q}").json()
    assert client.get(f"/api/v1/harness-families/{Q}&verified=maybe").json() == fams
    answer = client.get("/api/v1/benchmarks/", HTTP_ACCEPT="text/html")
    assert answer.status_code == 200 and answer["Content-Type"] == "application/json"


def test_the_verified_filter_takes_true_false_1_and_0(client, demo_bv):
    count = client.get(f"/api/v1/leaderboard/{Q}").json()["count"]
    verified = client.get(f"/api/v1/leaderboard/{Q}&verified=true").json()["count"]
    assert client.get(f"/api/v1/leaderboard/{Q}&verified=1").json()["count"] == verified
    assert client.get(f"/api/v1/leaderboard/{Q}&verified=false").json()["count"] == count
    assert client.get(f"/api/v1/leaderboard/{Q}&verified=0").json()["count"] == count
    assert verified < count  # the paper's agents are reconstructed, not verified


def test_api_urls_nothing_answers_are_json_404s(client, db):
    for path in ("/api/v1/submissions/abc/", "/api/v1/submissions/-1/", "/api/v1/nothing/",
                 "/api/"):
        response = client.get(path)
        assert response.status_code == 404 and response.json() == {"detail": "Not found."}, path
    assert client.get("/api/v1/trials").status_code == 301  # APPEND_SLASH still redirects


def test_the_api_root_lists_every_collection_and_each_answers(client, demo_bv):
    """A client starting at /api/v1/ finds each collection, the schema and its docs, as
    absolute URLs, and every one of them answers (the submissions collection is a signed-in
    submitter's: it asks for a token)."""
    root = client.get("/api/v1/")
    assert root.status_code == 200 and root["Content-Type"] == "application/json"
    links = root.json()
    assert set(links) == {"benchmarks", "leaderboard", "categories", "groups",
                          "harness_families", "trials", "compare", "submissions", "schema",
                          "docs"}
    assert links["trials"] == "http://testserver/api/v1/trials/"
    answers = {key: client.get(url.removeprefix("http://testserver")).status_code
               for key, url in links.items()}
    assert answers.pop("submissions") in (401, 403)
    assert set(answers.values()) == {200}, answers


def test_the_schema_states_the_enforced_bounds_enums_and_answers(client, db):
    schema = client.get("/api/schema/?format=json").json()
    leaderboard = schema["paths"]["/api/v1/leaderboard/"]["get"]
    params = {p["name"]: p["schema"] for p in leaderboard["parameters"]}
    assert params["limit"] == {"type": "integer", "minimum": 1, "maximum": 1000}
    assert params["offset"] == {"type": "integer", "minimum": 0, "maximum": 2**31 - 1}
    assert params["sort"]["enum"] == ["agent", "cost", "rank", "success", "time", "tokens"]
    assert params["order"]["enum"] == ["asc", "desc"]
    assert re.fullmatch(params["benchmark"]["pattern"], "healthagentbench@1.0")
    assert not re.fullmatch(params["benchmark"]["pattern"], "healthagentbench")
    assert not any(p.get("required") for p in leaderboard["parameters"])
    answers = {(path, method): set(op["responses"])
               for path, ops in schema["paths"].items() for method, op in ops.items()}
    for table in ("leaderboard", "trials", "categories", "groups", "harness-families"):
        assert answers[f"/api/v1/{table}/", "get"] == {"200", "400", "404"}, table
    assert answers["/api/v1/submissions/", "get"] == {"200", "401"}
    assert answers["/api/v1/submissions/{id}/", "get"] == {"200", "401", "404"}
    assert answers["/api/v1/submissions/", "post"] == {
        "202", "400", "401", "403", "409", "413", "415", "429", "503"}
    # The OpenAPI link the fuzzer's stateful phase walks: an upload's id to its status.
    created = schema["paths"]["/api/v1/submissions/"]["post"]["responses"]["202"]
    assert created["links"]["SubmissionStatus"] == {
        "operationId": "submissions_retrieve", "parameters": {"id": "$response.body#/id"},
        "description": created["links"]["SubmissionStatus"]["description"]}


def test_an_upload_in_another_media_type_or_a_broken_body_keeps_the_upload_shapes(db):
    from django.contrib.auth import get_user_model

    user = get_user_model().objects.create_user("up", "up@example.org", "pw-up-123!")
    client = Client(HTTP_AUTHORIZATION=f"Token {token_issue(user=user)[1]}")
    response = client.post("/api/v1/submissions/", "{}", content_type="application/json")
    assert response.status_code == 415 and response.json()["code"] == "unsupported_media_type"
    # no boundary: the body cannot be parsed at all
    response = client.post("/api/v1/submissions/", b"--x\r\nbroken",
                           content_type="multipart/form-data")
    assert response.status_code == 400, response.content
    assert [p["code"] for p in response.json()["problems"]] == ["malformed_body"]
