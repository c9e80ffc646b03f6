"""Sandbox rows of the reliability matrix against the real Docker engine: images are the
maintainers' own and never pulled (S10)."""

import uuid

import pytest

pytestmark = pytest.mark.docker


def test_s10_images_are_local_digest_tagged_and_never_pulled(docker_engine, base_image):
    """S10: a container starts only from an image already built on this engine (an image name
    a submitter could choose is never pulled: it is an infrastructure error naming
    `make images`); task images are tagged by the digest of their build context and the base
    image; the engine's runc carries the CVE-2024-21626 fix (engine_status, the worker's health
    check)."""
    from evaluation import runner
    from evaluation.task_specs import discover_task_packages
    from tests.tasks.task_package_paths import TASKS_DIR

    c = runner.client()
    before = {i.id for i in c.images.list(all=True)}
    foreign = f"docker.io/library/hab-never-pulled-{uuid.uuid4().hex[:8]}:latest"
    with pytest.raises(runner.InfrastructureError, match="is missing: run `make images`"):
        with runner.ContainerRun(foreign, purpose="test", job_id=f"s10{uuid.uuid4().hex[:6]}"):
            pass
    assert {i.id for i in c.images.list(all=True)} == before, "an image was pulled or built"
    package = discover_task_packages(TASKS_DIR)[0]
    tag = runner.task_image_tag(package)
    repo, digest = tag.rsplit(":", 1)
    assert repo == runner.task_image_repo(package) and len(digest) == 24
    assert runner.task_image_tag(package) == tag  # stable: the same context, the same tag
    assert docker_engine["runc_patched"] is True, docker_engine["runc_version"]
