"""manage.py publish_packages --out DIR [--images FILE] [--commit]

Writes the task packages the site serves to `harbor run -d`: every package of a public benchmark
version (the versions /registry.json lists) at its path in this repository (``tasks/<category>/
<task_id>/``), its task.toml naming the image `IMAGE_REGISTRY=... make images` pushed for it, by
digest (evaluation/published.py). The committed packages are not touched. A version is written
only when every one of its packages has a published image; the others are listed and skipped.
With --commit, DIR becomes (or stays) a git repository and the packages are committed; the
command prints the commit. Push that repository where Harbor can clone it, then set
REGISTRY_GIT_URL and REGISTRY_GIT_COMMIT (docs/images.md). Running it twice writes the same files.
"""

import shutil
import subprocess
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluation.models import BenchmarkTask, BenchmarkVersion
from evaluation.published import PublishedImagesError, read_record, write_served_package
from evaluation.task_specs import load_task_package


def _git(*args: str, cwd: Path) -> str:
    env = {"GIT_AUTHOR_NAME": "HealthAgentBench", "GIT_AUTHOR_EMAIL": "noreply@healthagentbench",
           "GIT_COMMITTER_NAME": "HealthAgentBench",
           "GIT_COMMITTER_EMAIL": "noreply@healthagentbench", "PATH": "/usr/bin:/bin"}
    done = subprocess.run(["git", "-c", "commit.gpgsign=false", *args], cwd=cwd,  # noqa: S603, S607
                          env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CommandError(f"git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout.strip()


class Command(BaseCommand):
    help = "Write the served task packages (task.toml naming the published image) into DIR."

    def add_arguments(self, parser):
        parser.add_argument("--out", type=Path, required=True, help="the packages repository")
        parser.add_argument("--images", type=Path,
                            help="the published-images record (default: PUBLISHED_IMAGES_FILE, "
                                 "else var/published-images.json)")
        parser.add_argument("--commit", action="store_true",
                            help="commit the packages in DIR (git init when needed)")

    def handle(self, *args, out, images, commit, **options):
        images = images or Path(settings.PUBLISHED_IMAGES_FILE
                                or Path(settings.BASE_DIR) / "var" / "published-images.json")
        try:
            record = read_record(images)
        except PublishedImagesError as exc:
            raise CommandError(str(exc)) from None
        out.mkdir(parents=True, exist_ok=True)
        written = self._write(record, out)
        if not written:
            raise CommandError(f"no benchmark version has every package published in {images}")
        if commit:
            if not (out / ".git").exists():
                _git("init", "-q", cwd=out)
            _git("add", "--", *sorted(written), cwd=out)
            if _git("status", "--porcelain", cwd=out):
                _git("commit", "-q", "-m", "Task packages naming their published images", cwd=out)
            self.stdout.write(_git("rev-parse", "HEAD", cwd=out))

    def _write(self, record, out: Path) -> set[str]:
        written: set[str] = set()
        versions = BenchmarkVersion.objects.filter(is_reconstructed=False).prefetch_related(
            "tasks").order_by("name", "version")
        for bv in versions:
            tasks: list[BenchmarkTask] = list(bv.tasks.all())
            public = tasks and all(t.package_path and not t.package_path.startswith("/")
                                   for t in tasks)
            missing = [t.name for t in tasks if t.content_digest not in record]
            changed = [t.name for t in tasks if public and not missing and load_task_package(
                Path(settings.BASE_DIR) / t.package_path).content_digest != t.content_digest]
            if not public or missing or changed:
                why = ("not public" if not public else f"no image for {', '.join(missing)}"
                       if missing else f"changed on disk: {', '.join(changed)}")
                self.stdout.write(f"skipped {bv.slug}: {why}")
                continue
            for t in tasks:
                src = Path(settings.BASE_DIR) / t.package_path
                dst = out / t.package_path
                if dst.exists():
                    shutil.rmtree(dst)
                write_served_package(src, dst, record[t.content_digest].image)
                written.add(t.package_path)
            self.stdout.write(f"wrote {bv.slug}: {len(tasks)} packages")
        return written
