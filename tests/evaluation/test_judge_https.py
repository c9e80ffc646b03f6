"""The X-ray judge over https: the judge gateway (a base-image container, which has no CA
certificates of its own) verifies the configured endpoint's certificate against the bundle the
site gives it: the worker's CA bundle plus XRAY_JUDGE_CA_FILE. Tested against a local https
judge whose certificate is signed by a CA the test makes and passes in; without that CA the
gateway refuses the endpoint (nothing is sent, the grade is an infrastructure error, never a
pass through an unverified connection)."""

import ssl
import subprocess

import pytest

from tests.evaluation import verification_support as vs
from tests.evaluation.judge_standin import JudgeStandIn, docker_bridge_ip

pytestmark = [pytest.mark.docker, pytest.mark.django_db]

XRAY = "xray-report-correction/synthetic_01"
KEY = "sk-judge-https-1234"


def _openssl(*args, cwd):
    done = subprocess.run(["openssl", *args], cwd=cwd, capture_output=True, text=True,  # noqa: S603, S607
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr


def _test_ca_and_server_cert(tmp_path, ip: str):
    """A throwaway CA and a server certificate for `ip` signed by it: (ca.pem, cert, key)."""
    d = tmp_path / "pki"
    d.mkdir()
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out",
             "ca.pem", "-days", "2", "-subj", "/CN=HealthAgentBench test judge CA", cwd=d)
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key", "-out",
             "server.csr", "-subj", f"/CN={ip}", cwd=d)
    (d / "ext.cnf").write_text(f"subjectAltName=IP:{ip}\nbasicConstraints=CA:FALSE\n"
                               "keyUsage=digitalSignature,keyEncipherment\n"
                               "extendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    return d / "ca.pem", d / "server.pem", d / "server.key"


def test_the_judge_gateway_verifies_an_https_judge_against_the_ca_it_is_given(
        settings, tmp_path, docker_engine):
    from evaluation import runner
    from evaluation.judge import cache as judging

    host = docker_bridge_ip()
    ca, cert, key = _test_ca_and_server_cert(tmp_path, host)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    oracle = vs.oracle_outputs(tmp_path / "oracle", only=[XRAY])[XRAY]
    task = vs.REPO / "tasks" / XRAY
    settings.XRAY_JUDGE_MODEL = "judge-https"
    settings.XRAY_JUDGE_API_KEY = KEY
    with JudgeStandIn(host=host, rule="injected-errors", ssl_context=context) as judge:
        assert judge.url == f"https://{host}:{judge.port}"
        settings.XRAY_JUDGE_URL = judge.url

        # The worker's own bundle does not know the test's CA: refused, nothing sent.
        settings.XRAY_JUDGE_CA_FILE = ""
        spec = judging.judge_for(task)
        assert spec.ca_pem and ca.read_bytes() not in spec.ca_pem
        with pytest.raises(runner.InfrastructureError, match="the grader reported an"):
            runner.run_verifier(task, job_id=f"{vs.RUN_PREFIX}judge-tls-no-ca",
                                artifacts_dir=oracle, judge=spec)
        assert judge.requests == []

        # With the CA passed in: verified, and the grade is the judge's.
        settings.XRAY_JUDGE_CA_FILE = str(ca)
        spec = judging.judge_for(task)
        assert spec.ca_pem.endswith(ca.read_bytes())
        v = runner.run_verifier(task, job_id=f"{vs.RUN_PREFIX}judge-tls", artifacts_dir=oracle,
                                judge=spec)
        assert v.reward == 1.0, (v.error, v.result.text)
        assert len(judge.requests) == 5 and all(h.get("Authorization") == f"Bearer {KEY}"
                                                for h in judge.headers)
        assert [e.get("hit") for e in v.judge_log if "key" in e] == [False] * 5, v.judge_log

    # An unreadable CA file is the operator's error, named.
    settings.XRAY_JUDGE_CA_FILE = str(tmp_path / "missing.pem")
    with pytest.raises(runner.InfrastructureError, match="missing.pem cannot be read"):
        judging.judge_for(task)
