"""The extraction policy shared by the zip and tar paths of evaluation.archive: limits, error
codes, name normalisation, the size budget, format detection, the no-follow writer, and the
capped tar stream. See evaluation/archive.py for the policy as a whole.
"""

from __future__ import annotations

import contextlib
import errno
import gzip
import logging
import os
import re
import shutil
import stat
import tarfile
import unicodedata
import zlib
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

MiB = 1024 * 1024
CHUNK = MiB

ERROR_CODES = (
    "unsupported_format",
    "bad_archive",
    "encrypted",
    "unsafe_path",
    "link_member",
    "special_member",
    "too_large",
    "too_many_entries",
    "too_deep",
    "name_too_long",
    "compression_ratio",
    "duplicate_name",
    "truncated",
)


@dataclass(frozen=True)
class ArchiveLimits:
    max_compressed_bytes: int = 200 * MiB  # the uploaded archive itself
    max_total_bytes: int = 1024 * MiB  # sum of uncompressed file sizes
    max_entries: int = 20_000  # files + directories
    max_depth: int = 24  # path components
    max_component_bytes: int = 255  # per path component (UTF-8 bytes)
    max_path_bytes: int = 1024  # whole normalised path (UTF-8 bytes)
    max_member_ratio: float = 200.0  # uncompressed / compressed, per zip member
    max_overall_ratio: float = 100.0  # uncompressed / archive size
    max_file_bytes: int = 256 * MiB  # one file
    ratio_floor_bytes: int = MiB  # ratios are not enforced below this uncompressed size
    max_tar_header_bytes: int = 4 * MiB  # one pax / GNU long-name header


class ArchiveError(Exception):
    """A refused archive. `code` is one of ERROR_CODES; `member` the archive path concerned."""

    def __init__(self, code: str, message: str, member: str | None = None):
        if code not in ERROR_CODES:
            raise ValueError(f"unknown archive error code {code!r}")
        super().__init__(code, message, member)  # args round-trip through pickle (Celery)
        self.code = code
        self.message = message
        self.member = member

    def __str__(self):
        return self.message

    def as_dict(self) -> dict:
        return {"code": self.code, "message": self.message, "member": self.member}

    def __repr__(self):
        return f"ArchiveError({self.code!r}, {self.message!r}, member={self.member!r})"


@dataclass
class ExtractReport:
    files: int
    total_bytes: int
    members: list[str]  # normalised relative paths of the extracted regular files, archive order
    directories: list[str] = field(default_factory=list)
    nested_archives: list[str] = field(default_factory=list)  # files that are archives themselves


# ----------------------------------------------------------------------------- helpers


def show_name(name, limit=120) -> str:
    """A printable, bounded rendering of a (possibly hostile) member name for messages."""
    if isinstance(name, str) and len(name) <= limit and name.isascii() and name.isprintable():
        return name
    text = name if isinstance(name, str) else repr(name)
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    text = "".join(ch if ch.isprintable() else repr(ch)[1:-1] for ch in text)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


_DRIVE = re.compile(r"^[A-Za-z]:")
ARCHIVE_MAGIC = (
    b"PK\x03\x04",
    b"PK\x05\x06",
    b"\x1f\x8b",
    b"BZh",
    b"\xfd7zXZ\x00",
    b"7z\xbc\xaf\x27\x1c",
    b"Rar!",
    b"\x28\xb5\x2f\xfd",
)


class Entry:
    __slots__ = ("raw", "path", "is_dir", "size", "info")

    def __init__(self, raw, path, is_dir, size, info=None):
        self.raw, self.path, self.is_dir, self.size, self.info = raw, path, is_dir, size, info


def normalise_name(raw: str, limits: ArchiveLimits) -> tuple[str, bool]:
    """Validate a member name; return (normalised relative path, ends_with_slash)."""

    def bad(code, problem):
        shown = show_name(raw)
        return ArchiveError(code, f"{shown}: {problem}", shown)

    if len(raw) > 4 * limits.max_path_bytes + 16:
        raise bad("name_too_long", f"path is too long ({len(raw)} characters)")
    if "\x00" in raw:
        raise bad("unsafe_path", "name contains a NUL byte")
    if not raw.isprintable() and any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in raw):
        raise bad("unsafe_path", "name contains a control character")
    if not raw.isascii() and any(0xD800 <= ord(ch) <= 0xDFFF for ch in raw):
        raise bad("unsafe_path", "name is not valid UTF-8")
    if "\\" in raw:
        raise bad("unsafe_path", "name contains a backslash (Windows path separator)")
    if raw.startswith("/"):
        raise bad("unsafe_path", "absolute path")
    if _DRIVE.match(raw):
        raise bad("unsafe_path", "path starts with a drive letter")
    parts = []
    for part in raw.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            raise bad("unsafe_path", "path contains a '..' component")
        if len(part.encode("utf-8")) > limits.max_component_bytes:
            raise bad(
                "name_too_long",
                f"a path component is longer than {limits.max_component_bytes} bytes",
            )
        parts.append(part)
    path = "/".join(parts)
    if len(path.encode("utf-8")) > limits.max_path_bytes:
        raise bad("name_too_long", f"path is longer than {limits.max_path_bytes} bytes")
    if len(parts) > limits.max_depth:
        raise bad("too_deep", f"path is {len(parts)} levels deep (limit {limits.max_depth})")
    return path, raw.endswith("/")


def _key(path: str) -> str:
    return unicodedata.normalize("NFC", path).casefold()


class _NameTable:
    """Detects exact, case-insensitive and Unicode-form collisions, and file/dir clashes."""

    def __init__(self):
        self.files: dict[str, str] = {}
        self.dirs: dict[str, tuple[str, bool]] = {}  # key -> (spelling, explicit)

    def _clash(self, path, other, raw):
        what = (
            "the same name" if path == other else "a name that differs only in case or Unicode form"
        )
        raise ArchiveError(
            "duplicate_name",
            f"{show_name(raw)}: ambiguous archive, {show_name(path)} and {show_name(other)} are {what}",
            show_name(raw),
        )

    def _add_dir(self, path, raw, explicit):
        key = _key(path)
        if key in self.files:
            self._clash(path, self.files[key], raw)
        if key in self.dirs:
            spelling, was_explicit = self.dirs[key]
            if spelling != path or (explicit and was_explicit):
                self._clash(path, spelling, raw)
            if explicit:
                self.dirs[key] = (spelling, True)
            return
        self.dirs[key] = (path, explicit)

    def add(self, path, is_dir, raw):
        parts = path.split("/")
        for i in range(1, len(parts)):
            self._add_dir("/".join(parts[:i]), raw, explicit=False)
        if is_dir:
            self._add_dir(path, raw, explicit=True)
            return
        key = _key(path)
        if key in self.files:
            self._clash(path, self.files[key], raw)
        if key in self.dirs:
            self._clash(path, self.dirs[key][0], raw)
        self.files[key] = path


class Budget:
    """Declared (pre-extraction) accounting shared by both formats."""

    def __init__(self, limits: ArchiveLimits):
        self.limits = limits
        self.count = 0
        self.total = 0
        self.names = _NameTable()

    def entry(self, raw: str, size: int, is_dir: bool) -> str:
        limits = self.limits
        self.count += 1
        if self.count > limits.max_entries:
            raise ArchiveError(
                "too_many_entries", f"archive has more than {limits.max_entries} entries"
            )
        path, _ = normalise_name(raw, limits)
        if not path:
            return path
        if size < 0:
            raise ArchiveError("bad_archive", f"{show_name(raw)}: negative size", show_name(raw))
        if is_dir:
            if size:
                raise ArchiveError(
                    "bad_archive", f"{show_name(raw)}: directory entry with data", show_name(raw)
                )
        else:
            if size > limits.max_file_bytes:
                raise ArchiveError(
                    "too_large",
                    f"{show_name(raw)}: file is {size} bytes (limit {limits.max_file_bytes})",
                    show_name(raw),
                )
            self.total += size
            if self.total > limits.max_total_bytes:
                raise ArchiveError(
                    "too_large",
                    f"archive unpacks to more than {limits.max_total_bytes} bytes "
                    f"(reached at {show_name(raw)})",
                    show_name(raw),
                )
        self.names.add(path, is_dir, raw)
        return path


def check_mode(mode: int, raw: str, *, is_dir: bool):
    """Unix mode bits from a zip external attribute or tar header."""
    kind = stat.S_IFMT(mode)
    if kind in (0, stat.S_IFREG, stat.S_IFDIR) and (
        is_dir or not mode & (stat.S_ISUID | stat.S_ISGID)
    ):
        return
    shown = show_name(raw)
    if kind == stat.S_IFLNK:
        raise ArchiveError("link_member", f"{shown}: symbolic links are not allowed", shown)
    if kind in (stat.S_IFCHR, stat.S_IFBLK, stat.S_IFIFO, stat.S_IFSOCK):
        raise ArchiveError(
            "special_member", f"{shown}: device, FIFO or socket entries are not allowed", shown
        )
    if not is_dir and mode & (stat.S_ISUID | stat.S_ISGID):
        raise ArchiveError("special_member", f"{shown}: setuid/setgid files are not allowed", shown)


def ratio_error(limits, uncompressed, compressed, limit, what, member=None):
    if uncompressed <= limits.ratio_floor_bytes:
        return
    if uncompressed > limit * max(compressed, 1):
        shown = show_name(member) if member is not None else None
        raise ArchiveError(
            "compression_ratio",
            f"{what} expands {uncompressed} bytes from {compressed} "
            f"(ratio above the limit of {limit:g})",
            shown,
        )


# ----------------------------------------------------------------------------- detection


def _format_from_name(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if lower.endswith(".zip"):
        return "zip"
    if lower.endswith(".tar"):
        return "tar"
    return None


def _describe(head: bytes) -> str:
    if not head:
        return "an empty file"
    if head.startswith(b"\x89PNG"):
        return "a PNG image"
    if head.startswith(b"BZh"):
        return "a bzip2 file"
    if head.startswith(b"\xfd7zXZ"):
        return "an xz file"
    if head.startswith(b"\x28\xb5\x2f\xfd"):
        return "a zstd file"
    if head.startswith(b"7z\xbc\xaf"):
        return "a 7-Zip archive"
    if head.startswith(b"Rar!"):
        return "a RAR archive"
    if head.startswith(b"%PDF"):
        return "a PDF document"
    stripped = head.lstrip()
    if stripped[:1] in (b"<",):
        return "an HTML/XML document"
    if stripped[:1] in (b"{", b"["):
        return "a JSON document"
    if head.startswith(b"PK"):
        return "a zip file that does not start with a local file header"
    return "not a zip or tar archive"


def _is_tar_header(block: bytes) -> bool:
    return len(block) >= 263 and block[257:262] == b"ustar"


def detect_format(path, claimed_name: str | None = None) -> str:
    """Return "zip", "tar.gz" or "tar" from the file's magic bytes (never its name).

    With `claimed_name` (the uploaded file name), its extension must agree with the content."""
    path = Path(path)
    label = claimed_name or path.name
    try:
        with open(path, "rb") as handle:
            head = handle.read(1024)
    except OSError as exc:
        raise ArchiveError(
            "bad_archive", f"{label}: cannot read the archive ({exc.strerror})"
        ) from None
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        real = "zip"
    elif head.startswith(b"\x1f\x8b\x08"):
        with open(path, "rb") as handle:
            data = handle.read(64 * 1024)
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            block = inflater.decompress(data, 512)
        except zlib.error:
            raise ArchiveError("bad_archive", f"{label}: corrupt gzip data") from None
        if _is_tar_header(block):
            real = "tar.gz"
        elif len(block) < 512 and not inflater.eof and len(data) < 64 * 1024:
            raise ArchiveError("truncated", f"{label}: gzip data ends before the first tar header")
        else:
            raise ArchiveError(
                "unsupported_format", f"{label}: a gzip file that does not contain a tar archive"
            )
    elif _is_tar_header(head[:512]):
        real = "tar"
    else:
        raise ArchiveError(
            "bad_archive" if not head else "unsupported_format",
            f"{label}: {_describe(head)}; a .zip, .tar.gz/.tgz or .tar archive is required",
        )
    if claimed_name is not None:
        claimed = _format_from_name(claimed_name)
        if claimed is None:
            raise ArchiveError(
                "unsupported_format",
                f"{label}: the file name must end in .zip, .tar.gz, .tgz or .tar",
            )
        if claimed != real:
            raise ArchiveError(
                "unsupported_format",
                f"{label}: named like a {claimed} archive but the content is a {real} archive",
            )
    return real


# ----------------------------------------------------------------------------- writing


class Writer:
    """Creates directories and files under dest through O_NOFOLLOW directory descriptors.

    Every directory is opened relative to its parent's descriptor with O_NOFOLLOW and every file
    is created with O_CREAT|O_EXCL|O_NOFOLLOW, so an existing link is never followed. Each new
    directory is additionally resolved (realpath) and checked to be inside dest; a file's target
    is its checked directory plus a validated single component. At most MAX_FDS directory
    descriptors stay open."""

    MAX_FDS = 128

    def __init__(self, dest: Path):
        self.dest = dest
        self.real_dest = os.path.realpath(dest)
        self.root_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        self.fds: dict[str, int] = {"": self.root_fd}

    def close(self):
        for fd in self.fds.values():
            with contextlib.suppress(OSError):
                os.close(fd)
        self.fds = {}

    def _check_target(self, rel: str):
        target = os.path.realpath(os.path.join(self.real_dest, rel))
        if not target.startswith(self.real_dest + os.sep):
            raise ArchiveError(
                "unsafe_path", f"{show_name(rel)}: resolves outside the destination", rel
            )

    def directory(self, rel: str) -> int:
        if rel in self.fds:
            return self.fds[rel]
        parent, _, name = rel.rpartition("/")
        parent_fd = self.directory(parent)
        self._check_target(rel)
        if len(self.fds) >= self.MAX_FDS:
            for key, fd in list(self.fds.items()):
                if key and key != parent and not parent.startswith(key + "/"):
                    os.close(fd)
                    del self.fds[key]
        try:
            os.mkdir(name, 0o700, dir_fd=parent_fd)
        except FileExistsError:
            pass
        fd = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=parent_fd)
        st = os.fstat(fd)
        if not stat.S_ISDIR(st.st_mode):  # pragma: no cover - O_DIRECTORY guarantees it
            os.close(fd)
            raise ArchiveError("unsafe_path", f"{show_name(rel)}: not a directory", rel)
        os.fchmod(fd, 0o755)
        self.fds[rel] = fd
        return fd

    def open_file(self, rel: str) -> int:
        parent, _, name = rel.rpartition("/")
        parent_fd = self.directory(parent)
        if not name or name in (".", "..") or "/" in name:  # pragma: no cover - names are validated
            raise ArchiveError("unsafe_path", f"{show_name(rel)}: bad file name", rel)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        try:
            fd = os.open(name, flags, 0o600, dir_fd=parent_fd)
        except FileExistsError:
            raise ArchiveError("duplicate_name", f"{show_name(rel)}: written twice", rel) from None
        os.fchmod(fd, 0o644)
        return fd


class Sink:
    """Streaming byte counter for one member and the archive total."""

    def __init__(self, fd, rel, declared, limits, state):
        self.fd, self.rel, self.declared, self.limits, self.state = fd, rel, declared, limits, state
        self.written = 0
        self.head = b""

    def write(self, data: bytes):
        if not data:
            return
        self.written += len(data)
        self.state["total"] += len(data)
        if self.written > self.declared:
            raise ArchiveError(
                "too_large",
                f"{show_name(self.rel)}: expands beyond its declared size of {self.declared} bytes "
                "(the header lies)",
                self.rel,
            )
        if (
            self.written > self.limits.max_file_bytes
            or self.state["total"] > self.limits.max_total_bytes
        ):
            raise ArchiveError(
                "too_large", f"{show_name(self.rel)}: size cap exceeded while extracting", self.rel
            )
        if len(self.head) < 8:
            self.head += data[: 8 - len(self.head)]
        view = memoryview(data)
        while view:
            n = os.write(self.fd, view)
            view = view[n:]


def clear_dir(dest: Path):
    for child in list(os.scandir(dest)):
        if child.is_dir(follow_symlinks=False):
            shutil.rmtree(child.path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.unlink(child.path)


# ----------------------------------------------------------------------------- tar


class CappedReader:
    """Forward-only view of a (decompressed) byte stream with a hard cap on bytes delivered,
    a ratio guard, bounded single reads and short backward seeks into a retained tail."""

    TAIL = 64 * 1024
    HEADER_ALLOWANCE = 3 * 1024  # header + pax/GNU extension + padding, per member

    def __init__(self, raw, *, cap, max_read, compressed_size, limits, label, gzipped):
        self.raw, self.cap, self.max_read = raw, cap, max_read
        self.compressed_size = compressed_size
        self.limits, self.label, self.gzipped = limits, label, gzipped
        self.produced = 0  # bytes pulled from raw
        self.pos = 0
        self.tail = b""  # the last bytes pulled, ending at self.produced
        self.eof = False
        self.entries_seen = 0  # tar headers are compressible overhead, not content

    def _pull(self, n):
        allowed = self.cap - self.produced
        if allowed <= 0:
            raise ArchiveError("too_large", f"{self.label}: the tar stream exceeds the size cap")
        n = min(n, allowed + 1)
        try:
            data = self.raw.read(n)
        except EOFError:
            raise ArchiveError(
                "truncated", f"{self.label}: compressed data ends early (truncated)"
            ) from None
        except (zlib.error, gzip.BadGzipFile, OSError) as exc:
            raise ArchiveError(
                "bad_archive", f"{self.label}: corrupt compressed data ({exc})"
            ) from None
        if not data:
            self.eof = True
            return b""
        self.produced += len(data)
        if self.produced > self.cap:
            raise ArchiveError(
                "too_large",
                f"{self.label}: the tar stream exceeds the size cap of {self.cap} bytes",
            )
        if self.gzipped:
            content = self.produced - (self.entries_seen + 2) * self.HEADER_ALLOWANCE
            ratio_error(
                self.limits,
                content,
                self.compressed_size,
                self.limits.max_overall_ratio,
                f"{self.label}: the gzip stream",
            )
        self.tail = (
            (self.tail + data)[-self.TAIL :] if len(data) < self.TAIL else data[-self.TAIL :]
        )
        return data

    def read(self, n=-1):
        if n is None or n < 0 or n > self.max_read:
            raise ArchiveError(
                "bad_archive", f"{self.label}: a tar header asks for an oversized read ({n} bytes)"
            )
        out = b""
        if self.pos < self.produced:  # inside the retained tail
            start = len(self.tail) - (self.produced - self.pos)
            out = self.tail[start : start + n]
            self.pos += len(out)
        while len(out) < n:
            data = self._pull(min(max(n - len(out), 64 * 1024), self.max_read))
            if not data:
                break
            need = n - len(out)
            out += data[:need]
            self.pos += min(need, len(data))  # any surplus stays readable from self.tail
        return out

    def seek(self, offset, whence=0):
        if whence == 1:
            offset += self.pos
        elif whence == 2:
            raise OSError(errno.ESPIPE, "cannot seek from the end")
        if offset < self.produced - len(self.tail):
            raise OSError(errno.ESPIPE, "cannot seek backwards that far")
        if offset <= self.produced:
            self.pos = offset
            return self.pos
        self.pos = self.produced
        while self.pos < offset:
            data = self._pull(min(CHUNK, offset - self.pos))
            if not data:
                break
            self.pos += len(data)
        return self.pos

    def tell(self):
        return self.pos

    def drain(self):
        while self._pull(CHUNK):
            pass


def open_tar_stream(path, fmt, limits, label):
    raw = open(path, "rb")
    compressed_size = os.fstat(raw.fileno()).st_size
    stream = gzip.GzipFile(fileobj=raw, mode="rb") if fmt == "tar.gz" else raw
    overhead = limits.max_entries * 3 * 512 + 4 * limits.max_tar_header_bytes + MiB
    reader = CappedReader(
        stream,
        cap=limits.max_total_bytes + overhead,
        max_read=max(CHUNK, limits.max_tar_header_bytes) + 512,
        compressed_size=compressed_size,
        limits=limits,
        label=label,
        gzipped=fmt == "tar.gz",
    )
    return raw, stream, reader


def tar_open(reader, label):
    try:
        return tarfile.open(fileobj=reader, mode="r:", encoding="utf-8", errors="surrogateescape")
    except ArchiveError:
        raise
    except Exception as exc:
        raise ArchiveError(
            "bad_archive", f"{label}: not a readable tar archive ({show_name(str(exc))})"
        ) from None


def tar_next(tf, label):
    try:
        return tf.next()
    except ArchiveError:
        raise
    except tarfile.ReadError as exc:
        code = "truncated" if "unexpected end" in str(exc) else "bad_archive"
        raise ArchiveError(
            code,
            f"{label}: {'truncated' if code == 'truncated' else 'corrupt'} tar archive ({exc})",
        ) from None
    except Exception as exc:
        raise ArchiveError(
            "bad_archive", f"{label}: corrupt tar archive ({show_name(str(exc))})"
        ) from None


def tar_member_check(member, limits):
    raw = member.name
    shown = show_name(raw)
    if member.issym() or member.islnk():
        raise ArchiveError(
            "link_member", f"{shown}: symbolic and hard links are not allowed", shown
        )
    if member.ischr() or member.isblk() or member.isfifo():
        raise ArchiveError(
            "special_member", f"{shown}: device and FIFO entries are not allowed", shown
        )
    if member.issparse():
        raise ArchiveError("special_member", f"{shown}: sparse files are not allowed", shown)
    if member.type not in (tarfile.REGTYPE, tarfile.AREGTYPE, tarfile.CONTTYPE, tarfile.DIRTYPE):
        raise ArchiveError(
            "special_member", f"{shown}: unsupported tar entry type {member.type!r}", shown
        )
    if member.linkname:
        raise ArchiveError("link_member", f"{shown}: entry carries a link target", shown)
    check_mode(member.mode & 0o7777, raw, is_dir=member.isdir())


