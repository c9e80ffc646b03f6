"""The one vetted archive extractor for uploaded submissions (matrix rows U4-U12, invariant 1).

Everything that unpacks user-supplied archives goes through `safe_extract()`; nothing in the
project calls `extractall`, `ZipFile.extract` or `TarFile.extract`. Django-free (standard library
only) so it can be tested and fuzzed on its own.

API
    ArchiveLimits(...)                         frozen caps, defaults sized for Harbor job dirs
    ArchiveError(code, message, member=None)   `code` is machine-readable (see ERROR_CODES)
    detect_format(path, claimed_name=None)     -> "zip" | "tar.gz" | "tar" (by magic bytes)
    safe_extract(archive_path, dest, limits=ArchiveLimits(), claimed_name=None) -> ExtractReport
    staging_dir(root)                          private (0o700) folder, always removed afterwards
    sweep_stale_staging(root, older_than)      -> number of leftover staging folders removed
    stream_to_file(src, dest_path, max_bytes)  -> bytes copied (1 MiB chunks, capped)
    load_member_json(root, member, ...)        the graders' strict JSON loader on an extracted file

Decisions (ASVS 5.1.1: permitted types, sizes and behaviour on malicious files):
- Accepted containers: zip (stored or deflated members only), gzip-compressed tar, plain tar
  (ustar/GNU/pax headers). The type is decided by magic bytes only. When the caller passes the
  uploaded file name (`claimed_name`), its extension must agree with the real type (.zip, .tar.gz
  or .tgz, .tar): a `.zip` that is really a tar, or an unknown extension, is `unsupported_format`
  (ASVS 5.2.2). A zip must start with a local file header: data prepended to a zip (PNG+zip
  polyglots, self-extractors) is refused.
- Only regular files and directories are extracted. Any symlink or hardlink is `link_member`;
  devices, FIFOs, sockets, sparse files, unknown tar types and setuid/setgid regular files are
  `special_member` (the matrix asks for a clean reject of setuid, so it is not silently stripped).
  Setgid/sticky bits on directories are ignored (common on shared file systems). Every check runs
  over all headers before the first byte is written.
- Written files are 0o644, directories 0o755, whatever the archive says; the archive's owners,
  times and modes are ignored. Files are created with O_EXCL|O_NOFOLLOW relative to directory
  file descriptors opened with O_NOFOLLOW, and each target is also resolved and checked to be
  under `dest`. `dest` must be empty (or not exist yet).
- Names: NUL bytes, control characters, backslashes, absolute paths, drive letters (`C:`), `..`
  components and names that are not valid UTF-8 are `unsafe_path`; `.` and empty components
  are dropped (`./job/x` is `job/x`). Limits on path bytes, component bytes and depth apply to the
  normalised name. Two members whose names are equal after Unicode NFC normalisation and
  case folding (or a file that is also used as a directory) are `duplicate_name`.
- Sizes: the declared total, per-file size, entry count and compression ratios are checked before
  anything is written (zip: end record + central directory, walked by hand so a lying entry count
  cannot blow up memory; tar: a first pass over all headers with a capped decompressed-byte
  counter). Then every member is streamed with a byte counter: a zip member that inflates beyond
  its declared size is `too_large` at that point, never written past the cap. Ratios are only
  enforced above `ratio_floor_bytes` (tiny files of zeros compress thousands of times).
  For tar.gz (one compressed stream) there is no per-member ratio: the declared content total over
  the archive size is checked after the header pass, and while inflating, the tar stream minus a
  3 KiB allowance per header (tar headers of small files compress ~100x) is held to the overall
  ratio, so a gzip bomb stops after inflating about 100 x its size.
- Zip members are read by the standard library's zipfile, which checks that local and central
  names match and that no member's data runs into the next one (overlap bombs, CVE-2024-0450,
  fixed in 3.12.2). A thin layer around it keeps what zipfile does not enforce: the end record
  and the central directory's entry count are checked by hand before zipfile parses anything
  (a lying or huge count never builds 200,000 ZipInfo objects; data prepended to the archive is
  refused), encryption is read from the local flags too (zipfile reads the central ones only),
  and each member is read one byte past its declared size so that a member inflating beyond
  its header is `too_large` at that point (zipfile alone would cut it off and report a CRC
  error); CRC-32 is then checked over what was written. Encrypted members (flag bit 0 or 6, or
  method 99) are `encrypted`.
- Tar members are parsed by tarfile through a capped reader, and each one must also pass
  tarfile's `data` extraction filter (tarfile.data_filter) before anything is written.
- Nested archives are not expanded: they are ordinary files, counted in the totals and listed in
  `ExtractReport.nested_archives`.
- Truncation: a zip without its end record, a gzip stream that ends early, or a tar whose data or
  end-of-archive marker is missing is `truncated`; other structural damage is `bad_archive`.
  No exception other than ArchiveError escapes safe_extract for any input bytes.
- On any error safe_extract removes everything it wrote under `dest`. `ArchiveError.member` is a
  printable, length-bounded rendering of the member name (safe to show and log).
- Known false rejects, by design: Windows zips with backslash separators (old .NET /
  PowerShell), archives with hard links or sparse files, bzip2/lzma/zstd zip members, pre-POSIX
  (v7) tars without the "ustar" magic, tars ending with a single zero block.
"""

from __future__ import annotations

import contextlib
import copy
import errno
import logging
import os
import shutil
import stat
import struct
import tarfile
import tempfile
import time
import zipfile
import zlib
from datetime import timedelta
from pathlib import Path

from evaluation.archive_policy import (
    ARCHIVE_MAGIC,
    CHUNK,
    ERROR_CODES,  # noqa: F401 - re-exported: part of the extractor's surface
    ArchiveError,
    ArchiveLimits,
    ExtractReport,
    Budget,
    CappedReader,  # noqa: F401 - re-exported for tests that instrument the stream
    check_mode,
    clear_dir,
    Entry,
    normalise_name,
    open_tar_stream,
    ratio_error,
    show_name,
    Sink,
    tar_member_check,
    tar_next,
    tar_open,
    Writer,
    detect_format,
)
from evaluation import grading

log = logging.getLogger(__name__)

STAGING_PREFIX = "staging-"

# ----------------------------------------------------------------------------- zip


# sig, disk, cd disk, entries here, entries total, cd size, cd offset, comment length
_EOCD = struct.Struct("<4s4H2LH")
_ZIP64_LOCATOR = struct.Struct("<4sLQL")
_ZIP64_EOCD = struct.Struct("<4sQ2H2L4Q")
_CDH = struct.Struct("<4s6H3L5H2L")  # central directory header (46 bytes)
_LFH = struct.Struct("<4s5H3L2H")  # local file header (30 bytes)


def _zip_end_record(handle, size, label):
    """Locate the end of central directory; return (cd_offset, cd_size, entries, cd_end)."""
    tail_len = min(size, _EOCD.size + 65535 + _ZIP64_LOCATOR.size)
    handle.seek(size - tail_len)
    tail = handle.read(tail_len)
    pos = tail.rfind(b"PK\x05\x06")
    while pos >= 0 and len(tail) - pos < _EOCD.size:
        pos = tail.rfind(b"PK\x05\x06", 0, pos)
    if pos < 0:
        raise ArchiveError(
            "truncated",
            f"{label}: the zip end record (central directory) is missing; the file is truncated "
            "or not a zip archive",
        )
    (_, disk, cd_disk, _here, entries, cd_size, cd_offset, _clen) = _EOCD.unpack_from(tail, pos)
    eocd_at = size - tail_len + pos
    cd_end = eocd_at
    if disk != 0 or cd_disk != 0:
        raise ArchiveError(
            "unsupported_format", f"{label}: multi-disk (spanned) zip archives are not supported"
        )
    loc = pos - _ZIP64_LOCATOR.size
    if loc >= 0 and tail[loc : loc + 4] == b"PK\x06\x07":
        _, _, z64_at, _ = _ZIP64_LOCATOR.unpack_from(tail, loc)
        handle.seek(z64_at)
        rec = handle.read(_ZIP64_EOCD.size)
        if len(rec) != _ZIP64_EOCD.size or rec[:4] != b"PK\x06\x06":
            raise ArchiveError("bad_archive", f"{label}: corrupt zip64 end record")
        fields = _ZIP64_EOCD.unpack(rec)
        entries, cd_size, cd_offset = fields[7], fields[8], fields[9]
        cd_end = z64_at
    if cd_offset + cd_size != cd_end:
        raise ArchiveError(
            "bad_archive",
            f"{label}: the zip central directory is not where the end record says (data "
            "prepended or appended to the archive, or a damaged file)",
        )
    return cd_offset, cd_size, entries, cd_end


def _zip_walk_directory(handle, cd_offset, cd_size, entries, limits, label):
    if entries > limits.max_entries:
        raise ArchiveError(
            "too_many_entries",
            f"{label}: archive declares {entries} entries (limit {limits.max_entries})",
        )
    handle.seek(cd_offset)
    data = handle.read(cd_size)
    if len(data) != cd_size:
        raise ArchiveError("truncated", f"{label}: the zip central directory is cut short")
    pos = count = 0
    while pos < cd_size:
        if data[pos : pos + 4] != b"PK\x01\x02" or pos + _CDH.size > cd_size:
            raise ArchiveError("bad_archive", f"{label}: corrupt zip central directory")
        fields = _CDH.unpack_from(data, pos)
        pos += _CDH.size + fields[10] + fields[11] + fields[12]
        count += 1
        if count > limits.max_entries:
            raise ArchiveError(
                "too_many_entries", f"{label}: archive has more than {limits.max_entries} entries"
            )
    if pos != cd_size or count != entries:
        raise ArchiveError(
            "bad_archive", f"{label}: the zip central directory and end record disagree"
        )


def _zip_plan(path: Path, limits: ArchiveLimits, label: str):
    size = path.stat().st_size
    with open(path, "rb") as handle:
        # Before zipfile parses anything: the end record is where it says (nothing prepended),
        # and the central directory's real entry count is under the cap (zipfile would build
        # every ZipInfo of a 200,000-entry directory in memory first).
        cd_offset, cd_size, entries, _ = _zip_end_record(handle, size, label)
        _zip_walk_directory(handle, cd_offset, cd_size, entries, limits, label)
        try:
            with zipfile.ZipFile(handle) as zf:
                infos = zf.infolist()
                if len(infos) != entries:
                    raise ArchiveError(
                        "bad_archive", f"{label}: the zip central directory and end record disagree"
                    )
                plan = _zip_check_members(zf, infos, handle, size, limits, label)
        except (ArchiveError, RecursionError):
            raise
        except Exception as exc:  # BadZipFile, struct.error, UnicodeDecodeError, ValueError...
            raise ArchiveError(
                "bad_archive", f"{label}: corrupt zip archive ({show_name(str(exc))})"
            ) from None
    return plan


def _zip_check_members(zf, infos, handle, size, limits, label):
    budget = Budget(limits)
    plan = []
    for info in infos:
        raw = info.orig_filename  # keeps NUL bytes (zipfile cuts .filename at the first NUL)
        shown = show_name(raw)
        if info.flag_bits & 0x41 or info.compress_type == 99:
            raise ArchiveError("encrypted", f"{shown}: encrypted zip members are not allowed", shown)
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ArchiveError(
                "unsupported_format",
                f"{shown}: compression method {info.compress_type} is not supported "
                "(only stored and deflate)",
                shown,
            )
        mode = info.external_attr >> 16
        is_dir = raw.endswith("/") or stat.S_IFMT(mode) == stat.S_IFDIR
        check_mode(mode, raw, is_dir=is_dir)
        if not is_dir:  # the ratio first: it is the precise diagnosis of a bomb
            ratio_error(limits, info.file_size, info.compress_size, limits.max_member_ratio,
                         f"{shown}", raw)
        rel = budget.entry(raw, info.file_size, is_dir)
        plan.append(Entry(raw, rel, is_dir, info.file_size, info))
    ratio_error(limits, budget.total, size, limits.max_overall_ratio, f"{label}: the archive")
    for entry in plan:
        # zipfile.open() reads the local header: names must match the central directory and
        # the data must end before the next entry (overlap bombs, CVE-2024-0450). It decides
        # encryption from the central flags only, so the local flags are read here too.
        shown = show_name(entry.raw)
        handle.seek(entry.info.header_offset)
        header = handle.read(_LFH.size)
        if len(header) == _LFH.size and _LFH.unpack(header)[2] & 0x41:
            raise ArchiveError("encrypted", f"{shown}: encrypted zip members are not allowed", shown)
        try:
            zf.open(entry.info).close()
        except zipfile.BadZipFile as exc:
            what = "overlapping zip entries" if "Overlapped" in str(exc) else "bad local header"
            raise ArchiveError("bad_archive", f"{shown}: {what} ({show_name(str(exc))})", shown) from None
    return plan


def _zip_member_stream(zf, info):
    """zipfile's reader for one member, allowed one byte past the declared size and without
    its CRC check: a member inflating beyond its header is then seen by the size counter
    (Sink: too_large, nothing past the declared size written) instead of being cut off at the
    declared size with a CRC error; the CRC is checked by the caller over what was written."""
    probe = copy.copy(info)
    probe.file_size = info.file_size + 1
    del probe.CRC  # ZipExtFile checks a CRC only when the ZipInfo has one
    return zf.open(probe)


def _zip_extract(path, plan, writer, limits, state, report):
    with zipfile.ZipFile(path) as zf:
        for entry in plan:
            if not entry.path:
                continue
            if entry.is_dir:
                writer.directory(entry.path)
                report.directories.append(entry.path)
                continue
            info = entry.info
            fd = writer.open_file(entry.path)
            try:
                sink = Sink(fd, entry.path, info.file_size, limits, state)
                crc = 0
                try:
                    with _zip_member_stream(zf, info) as src:
                        while chunk := src.read(CHUNK):
                            sink.write(chunk)
                            crc = zlib.crc32(chunk, crc)
                except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                    code = "truncated" if isinstance(exc, EOFError) else "bad_archive"
                    raise ArchiveError(
                        code, f"{show_name(entry.path)}: corrupt or cut-short data ({exc!r})",
                        entry.path,
                    ) from None
                if sink.written != info.file_size:
                    raise ArchiveError(
                        "bad_archive",
                        f"{show_name(entry.path)}: {sink.written} bytes instead of the declared "
                        f"{info.file_size}",
                        entry.path,
                    )
                if crc != info.CRC:
                    raise ArchiveError(
                        "bad_archive", f"{show_name(entry.path)}: CRC-32 mismatch", entry.path
                    )
            finally:
                os.close(fd)
            _record_file(report, entry.path, sink)


def _record_file(report, rel, sink):
    report.files += 1
    report.total_bytes += sink.written
    report.members.append(rel)
    if sink.head.startswith(ARCHIVE_MAGIC) or (sink.head[:2] == b"\x1f\x8b"):
        report.nested_archives.append(rel)


_DATA_FILTER_CODES = (
    (tarfile.AbsoluteLinkError, "link_member"),
    (tarfile.LinkOutsideDestinationError, "link_member"),
    (tarfile.SpecialFileError, "special_member"),
    (tarfile.AbsolutePathError, "unsafe_path"),
    (tarfile.OutsideDestinationError, "unsafe_path"),
)


def _tar_data_filter(member, dest):
    """tarfile's own `data` extraction filter, on top of the policy's checks: a member it
    refuses is refused here with the matching error code."""
    try:
        tarfile.data_filter(member, str(dest))
    except tarfile.FilterError as exc:
        shown = show_name(member.name)
        code = next((c for kind, c in _DATA_FILTER_CODES if isinstance(exc, kind)), "bad_archive")
        raise ArchiveError(code, f"{shown}: refused by tarfile's data filter ({exc})",
                           shown) from None


def _tar_plan(path, fmt, limits, label, dest):
    raw, stream, reader = open_tar_stream(path, fmt, limits, label)
    try:
        tf = tar_open(reader, label)
        budget = Budget(limits)
        plan = []
        while True:
            member = tar_next(tf, label)
            if member is None:
                break
            tar_member_check(member, limits)
            _tar_data_filter(member, dest)
            rel = budget.entry(member.name, member.size, member.isdir())
            reader.entries_seen = budget.count
            plan.append(Entry(member.name, rel, member.isdir(), member.size))
        if fmt == "tar.gz":
            ratio_error(
                limits,
                budget.total,
                reader.compressed_size,
                limits.max_overall_ratio,
                f"{label}: the archive",
            )
        # tarfile stops silently at a missing or garbage header: require a zero end block.
        # POSIX: two zero blocks end the archive. Anything else means truncation or garbage.
        try:
            reader.seek(tf.offset)
            block = reader.read(1024)
        except OSError:
            block = None
        if block is None:
            raise ArchiveError("bad_archive", f"{label}: corrupt tar archive")
        if len(block) < 1024 and not block.strip(b"\x00"):
            raise ArchiveError(
                "truncated", f"{label}: the tar end-of-archive marker is missing (truncated)"
            )
        if block.strip(b"\x00"):
            raise ArchiveError("bad_archive", f"{label}: invalid tar header at offset {tf.offset}")
        if fmt == "tar.gz":
            reader.drain()  # verifies the gzip CRC and detects truncation
        return plan
    finally:
        with contextlib.suppress(Exception):
            stream.close()
        raw.close()


def _tar_extract(path, fmt, plan, writer, limits, state, report, label):
    raw, stream, reader = open_tar_stream(path, fmt, limits, label)
    reader.entries_seen = len(plan)
    try:
        tf = tar_open(reader, label)
        index = 0
        while (member := tar_next(tf, label)) is not None:
            if (
                index >= len(plan)
                or plan[index].raw != member.name
                or plan[index].size != member.size
            ):
                raise ArchiveError(
                    "bad_archive", f"{label}: the tar archive changed between passes"
                )
            entry = plan[index]
            index += 1
            if entry.path:
                if entry.is_dir:
                    writer.directory(entry.path)
                    report.directories.append(entry.path)
                else:
                    fd = writer.open_file(entry.path)
                    try:
                        sink = Sink(fd, entry.path, entry.size, limits, state)
                        try:
                            src = tf.extractfile(member)
                            while True:
                                chunk = src.read(CHUNK)
                                if not chunk:
                                    break
                                sink.write(chunk)
                        except ArchiveError:
                            raise
                        except tarfile.ReadError as exc:
                            raise ArchiveError(
                                "truncated",
                                f"{show_name(entry.path)}: data is cut short ({exc})",
                                entry.path,
                            ) from None
                        except Exception as exc:
                            raise ArchiveError(
                                "bad_archive",
                                f"{show_name(entry.path)}: cannot read ({show_name(str(exc))})",
                                entry.path,
                            ) from None
                        if sink.written != entry.size:
                            raise ArchiveError(
                                "truncated", f"{show_name(entry.path)}: data is cut short", entry.path
                            )
                    finally:
                        os.close(fd)
                    _record_file(report, entry.path, sink)
        if index != len(plan):
            raise ArchiveError("bad_archive", f"{label}: the tar archive changed between passes")
    finally:
        with contextlib.suppress(Exception):
            stream.close()
        raw.close()


# ----------------------------------------------------------------------------- entry point


def safe_extract(
    archive_path,
    dest,
    limits: ArchiveLimits = ArchiveLimits(),
    claimed_name: str | None = None,
) -> ExtractReport:
    """Validate and extract `archive_path` into the empty directory `dest`.

    Raises ArchiveError (and leaves `dest` empty) for anything refused; see the module docstring."""
    archive_path, dest = Path(archive_path), Path(dest)
    label = show_name(claimed_name or archive_path.name)
    try:
        size = os.stat(archive_path).st_size
    except OSError as exc:
        raise ArchiveError(
            "bad_archive", f"{label}: cannot read the archive ({exc.strerror})"
        ) from None
    if size > limits.max_compressed_bytes:
        raise ArchiveError(
            "too_large", f"{label}: archive is {size} bytes (limit {limits.max_compressed_bytes})"
        )
    fmt = detect_format(archive_path, claimed_name)

    if os.path.lexists(dest):
        st = os.lstat(dest)
        if not stat.S_ISDIR(st.st_mode):
            raise ValueError(f"destination {dest} is not a directory")
        if any(os.scandir(dest)):
            raise ValueError(f"destination {dest} is not empty")
    else:
        os.mkdir(dest, 0o700)

    try:
        if fmt == "zip":
            plan = _zip_plan(archive_path, limits, label)
        else:
            plan = _tar_plan(archive_path, fmt, limits, label, dest)
    except ArchiveError:
        raise
    except RecursionError:
        raise ArchiveError("bad_archive", f"{label}: corrupt archive (too deeply nested)") from None
    except Exception as exc:  # never let a malformed archive become a 500
        log.warning("unexpected error while checking archive %s", label, exc_info=True)
        raise ArchiveError("bad_archive", f"{label}: corrupt archive ({show_name(str(exc))})") from None

    report = ExtractReport(files=0, total_bytes=0, members=[])
    state = {"total": 0}
    writer = Writer(dest)
    try:
        if fmt == "zip":
            _zip_extract(archive_path, plan, writer, limits, state, report)
        else:
            _tar_extract(archive_path, fmt, plan, writer, limits, state, report, label)
    except BaseException as exc:
        writer.close()
        clear_dir(dest)
        if isinstance(exc, ArchiveError) or not isinstance(exc, Exception):
            raise
        if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise  # infrastructure, not the submitter's fault
        log.warning("unexpected error while extracting archive %s", label, exc_info=True)
        raise ArchiveError("bad_archive", f"{label}: corrupt archive ({show_name(str(exc))})") from None
    writer.close()
    return report


# ----------------------------------------------------------------------------- staging


def _rmtree(path):
    def retry(func, p, _exc):
        with contextlib.suppress(OSError):
            os.chmod(p, 0o700)
            func(p)

    if os.path.islink(path) or not os.path.isdir(path):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        return
    shutil.rmtree(path, onexc=retry)


@contextlib.contextmanager
def staging_dir(root):
    """A private (0o700) unique folder under `root`, removed when the block exits (always)."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=root))
    os.chmod(path, 0o700)
    try:
        yield path
    finally:
        _rmtree(path)


def _latest_mtime(path: Path, not_before: float) -> float:
    """Newest mtime in the tree (stops early once something is newer than `not_before`)."""
    latest = os.lstat(path).st_mtime
    stack = [path]
    while stack and latest < not_before:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            latest = max(latest, st.st_mtime)
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
    return latest


def sweep_stale_staging(root, older_than: timedelta) -> int:
    """Delete staging folders under `root` untouched for longer than `older_than`.
    Returns how many were removed."""
    root = Path(root)
    if not root.is_dir():
        return 0
    cutoff = time.time() - older_than.total_seconds()
    removed = 0
    for entry in os.scandir(root):
        if not entry.name.startswith(STAGING_PREFIX) or not entry.is_dir(follow_symlinks=False):
            continue
        try:
            if _latest_mtime(Path(entry.path), cutoff) >= cutoff:
                continue
        except FileNotFoundError:
            continue
        _rmtree(entry.path)
        removed += 1
    return removed


def stream_to_file(src, dest_path, max_bytes: int) -> int:
    """Copy the file-like `src` to a new file `dest_path` in 1 MiB chunks; raise
    ArchiveError("too_large") as soon as more than `max_bytes` arrive. The partial file is removed
    on any error (including a client disconnect raised by `src.read`)."""
    dest_path = Path(dest_path)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(dest_path, flags, 0o600)
    total = 0
    try:
        with os.fdopen(fd, "wb") as out:
            while True:
                chunk = src.read(min(CHUNK, max_bytes - total + 1))
                if not chunk:
                    break
                total += len(chunk)
                if total > max_bytes:
                    raise ArchiveError(
                        "too_large", f"upload is larger than the limit of {max_bytes} bytes"
                    )
                out.write(chunk)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(dest_path)
        raise
    return total


# ----------------------------------------------------------------------------- JSON members


def load_member_json(root, member: str, *, max_bytes: int | None = None):
    """Load the extracted file `member` (a normalised archive path) under `root` with the graders'
    strict JSON loader (evaluation.grading.load_json). Errors are GradingInputError whose
    message starts with the archive path and gives line and column."""
    root = Path(root)
    rel, _ = normalise_name(member, ArchiveLimits())
    target = root / rel
    real_root = Path(os.path.realpath(root))
    if not Path(os.path.realpath(target)).is_relative_to(real_root):
        raise grading.GradingInputError(f"{show_name(member)}: resolves outside the submission")
    kwargs = {} if max_bytes is None else {"max_bytes": max_bytes}
    return grading.load_json(target, label=rel, **kwargs)
