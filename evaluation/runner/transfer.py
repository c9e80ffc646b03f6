"""Data in and out of containers: in-memory tars of host files, capped spooling of streamed
archives, and extraction through the project's one vetted extractor (evaluation.archive)."""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from evaluation import archive
from evaluation.runner.engine import OutputTooLargeError, UnsafeArchiveError
from evaluation.runner.limits import MiB


def tar_from_dir(
    src: Path, *, arcname: str = ".", uid: int = 0, gid: int = 0, writable: bool = False
) -> bytes:
    """A tar (in memory) of a host directory: regular files and directories only, fixed owner.

    Symlinks and special files are refused (ValueError): copies into containers are data.
    """
    src = Path(src)
    buf = io.BytesIO()
    fmode, xmode, dmode = (0o664, 0o775, 0o775) if writable else (0o644, 0o755, 0o755)
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(path: Path, name: str):
            st = path.lstat()
            info = tarfile.TarInfo(name)
            info.uid, info.gid, info.uname, info.gname = uid, gid, "", ""
            info.mtime = int(st.st_mtime)
            if path.is_symlink():
                raise ValueError(f"refusing to copy symlink {path} into a container")
            if path.is_dir():
                info.type, info.mode = tarfile.DIRTYPE, dmode
                tar.addfile(info)
                for child in sorted(path.iterdir()):
                    if child.name == "__pycache__":
                        continue
                    add(child, f"{name}/{child.name}")
            elif path.is_file():
                info.size = st.st_size
                info.mode = xmode if st.st_mode & 0o111 else fmode
                with open(path, "rb") as fh:
                    tar.addfile(info, fh)
            else:
                raise ValueError(f"refusing to copy special file {path} into a container")

        add(src, arcname)
    return buf.getvalue()


def tar_from_files(files: dict[str, bytes], *, uid: int = 0, gid: int = 0, mode=0o644) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), mode, uid, gid
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def safe_extract(
    tar_path_or_obj, dest: Path, *, max_bytes: int, max_members: int = 100_000
) -> list[str]:
    """Extract a container's output archive with the project's one vetted extractor
    (evaluation/archive.py: regular files and directories only, no links, devices, absolute or
    `..` paths, streamed byte caps). Returns the extracted member names."""
    limits = archive.ArchiveLimits(
        max_compressed_bytes=max_bytes + 16 * MiB,  # tar headers: 512 bytes per member
        max_total_bytes=max_bytes, max_file_bytes=max_bytes, max_entries=max_members,
    )
    with tempfile.TemporaryDirectory(prefix="hab-output-") as tmp:
        tar_path = Path(tmp) / "output.tar"
        with open(tar_path, "wb") as fh:
            shutil.copyfileobj(tar_path_or_obj, fh, 1 * MiB)
        staged = Path(tmp) / "out"
        try:
            report = archive.safe_extract(tar_path, staged, limits)
        except archive.ArchiveError as exc:
            if exc.code in ("too_large", "too_many_entries"):
                raise OutputTooLargeError(str(exc)) from exc
            raise UnsafeArchiveError(str(exc)) from exc
        # Several outputs may land in one host folder: merge, never following a link.
        dest = Path(dest)
        dest.mkdir(parents=True, exist_ok=True)
        for top in sorted(staged.iterdir()):
            target = dest / top.name
            if target.is_symlink():
                raise UnsafeArchiveError(f"refusing to write through a link: {target}")
            if top.is_dir():
                shutil.copytree(top, target, symlinks=True, dirs_exist_ok=True)
            else:
                shutil.copy2(top, target)
    return list(report.directories) + list(report.members)


def tar_reowned(data: bytes, *, uid: int, gid: int) -> bytes:
    """The same uncompressed tar with every member owned by uid:gid (what `docker cp -a` does
    for the container's user), e.g. the image's /workspace content seeded into a volume. Only
    headers are rewritten; member bytes are copied from the input as they are (nothing is
    unpacked)."""
    buf = io.BytesIO()
    with (tarfile.open(fileobj=io.BytesIO(data), mode="r:") as src,
          tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as dst):
        for member in src:
            member.uid, member.gid, member.uname, member.gname = uid, gid, "", ""
            body = None
            if member.isreg():
                body = io.BytesIO(data[member.offset_data:member.offset_data + member.size])
            dst.addfile(member, body)
    return buf.getvalue()


def _read_capped(stream: Iterable[bytes], max_bytes: int):
    """Spool a streamed archive to a temp file (memory stays bounded); cap its size."""
    spool = tempfile.SpooledTemporaryFile(max_size=8 * MiB)
    total = 0
    for chunk in stream:
        total += len(chunk)
        if total > max_bytes:
            spool.close()
            raise OutputTooLargeError(f"archive exceeds {max_bytes // MiB} MiB")
        spool.write(chunk)
    spool.seek(0)
    return spool
