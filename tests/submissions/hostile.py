"""Builders for hostile archives (reliability matrix U4-U11). Every shape is built here, from the
standard library or hand-written headers where the standard library refuses to produce it.
No Django."""

import io
import os
import stat
import struct
import tarfile
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

# ----------------------------------------------------------------------------- raw zip


@dataclass
class RawMember:
    name: bytes | str
    data: bytes = b""  # the bytes stored in the archive (already compressed if method 8)
    method: int = 0  # 0 stored, 8 deflate
    file_size: int | None = None  # declared uncompressed size (default: len of the real content)
    crc: int | None = None
    flags: int = 0x800  # UTF-8 names
    local_flags: int | None = None
    external_attr: int = 0o100644 << 16
    create_system: int = 3  # Unix
    local_name: bytes | None = None  # to make the local header disagree with the central one


def _b(name):
    return name.encode("utf-8") if isinstance(name, str) else name


def deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    return c.compress(data) + c.flush()


def member(name, content: bytes = b"", *, method=8, **kw) -> RawMember:
    """A correct member holding `content` (compressed when method is 8)."""
    data = deflate(content) if method == 8 else content
    kw.setdefault("file_size", len(content))
    kw.setdefault("crc", zlib.crc32(content))
    return RawMember(name=name, data=data, method=method, **kw)


def raw_zip(
    members,
    *,
    prefix: bytes = b"",
    entries_override: int | None = None,
    offsets_override: dict | None = None,
    extra_data: list | None = None,
) -> bytes:
    """Hand-assemble a zip: local headers, data, central directory, end record (zip64 when a
    size needs it). `offsets_override` maps member index -> header offset written in the central
    directory; `extra_data` is raw bytes laid out instead of the generated local records."""
    out = io.BytesIO()
    out.write(prefix)
    central = []
    for i, m in enumerate(members):
        name = _b(m.name)
        offset = out.tell()
        size = m.file_size if m.file_size is not None else len(m.data)
        crc = m.crc if m.crc is not None else zlib.crc32(m.data)
        zip64 = size >= 0xFFFFFFFF or len(m.data) >= 0xFFFFFFFF
        extra = b""
        csize32 = len(m.data)
        usize32 = size
        if zip64:
            extra = struct.pack("<HHQQ", 1, 16, size, len(m.data))
            csize32 = usize32 = 0xFFFFFFFF
        local_name = m.local_name if m.local_name is not None else name
        lflags = m.flags if m.local_flags is None else m.local_flags
        out.write(
            struct.pack(
                "<4s5H3L2H",
                b"PK\x03\x04",
                45 if zip64 else 20,
                lflags,
                m.method,
                0,
                0x21,
                crc,
                csize32,
                usize32,
                len(local_name),
                len(extra),
            )
        )
        out.write(local_name + extra)
        out.write(m.data)
        if offsets_override and i in offsets_override:
            offset = offsets_override[i]
        central.append((name, m, crc, csize32, usize32, extra, offset, zip64))
    cd_start = out.tell()
    for name, m, crc, csize32, usize32, extra, offset, zip64 in central:
        out.write(
            struct.pack(
                "<4s6H3L5H2L",
                b"PK\x01\x02",
                (m.create_system << 8) | 20,
                45 if zip64 else 20,
                m.flags,
                m.method,
                0,
                0x21,
                crc,
                csize32,
                usize32,
                len(name),
                len(extra),
                0,
                0,
                0,
                m.external_attr,
                offset,
            )
        )
        out.write(name + extra)
    cd_size = out.tell() - cd_start
    count = len(central) if entries_override is None else entries_override
    if count >= 0xFFFF:
        z64_at = out.tell()
        out.write(
            struct.pack(
                "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, cd_size, cd_start
            )
        )
        out.write(struct.pack("<4sLQL", b"PK\x06\x07", 0, z64_at, 1))
        out.write(
            struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0)
        )
    else:
        out.write(struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, count, count, cd_size, cd_start, 0))
    return out.getvalue()


def many_entries_zip(n: int) -> bytes:
    """A real central directory of n empty stored files, built fast by hand."""
    local = bytearray()
    central = bytearray()
    crc = 0
    for i in range(n):
        name = b"f%06d" % i
        offset = len(local)
        local += struct.pack("<4s5H3L2H", b"PK\x03\x04", 20, 0, 0, 0, 0x21, crc, 0, 0, len(name), 0)
        local += name
        central += struct.pack(
            "<4s6H3L5H2L",
            b"PK\x01\x02",
            (3 << 8) | 20,
            20,
            0,
            0,
            0,
            0x21,
            crc,
            0,
            0,
            len(name),
            0,
            0,
            0,
            0,
            0o100644 << 16,
            offset,
        )
        central += name
    out = bytearray(local)
    cd_start = len(out)
    out += central
    if n >= 0xFFFF:
        z64_at = len(out)
        out += struct.pack(
            "<4sQ2H2L4Q", b"PK\x06\x06", 44, 45, 45, 0, 0, n, n, len(central), cd_start
        )
        out += struct.pack("<4sLQL", b"PK\x06\x07", 0, z64_at, 1)
        out += struct.pack(
            "<4s4H2LH", b"PK\x05\x06", 0, 0, 0xFFFF, 0xFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0
        )
    else:
        out += struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(central), cd_start, 0)
    return bytes(out)


def zeros_deflate(total: int, chunk: int = 64 * 1024 * 1024) -> bytes:
    """A raw deflate stream that inflates to `total` zero bytes, built in well under a second:
    one full-flushed (self-contained, byte-aligned) block set for `chunk` zeros, repeated."""
    assert total % chunk == 0
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    piece = c.compress(bytes(chunk)) + c.flush(zlib.Z_FULL_FLUSH)
    end = zlib.compressobj(9, zlib.DEFLATED, -15).flush()  # an empty final block
    return piece * (total // chunk) + end


def tgz_of_zeros(name: str, size: int, chunk: int = 4 * 1024 * 1024) -> bytes:
    """A .tar.gz holding one file of `size` zero bytes, assembled from repeated full-flushed
    deflate pieces (no need to compress `size` bytes)."""
    info = tarfile.TarInfo(name)
    info.size = size
    header = info.tobuf(format=tarfile.GNU_FORMAT)
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    first = c.compress(header) + c.flush(zlib.Z_FULL_FLUSH)
    body = zeros_deflate(size, chunk)[:-2]  # drop the empty final block, appended below
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    tail = c.compress(bytes(1024 + (-size) % 512)) + c.flush()
    crc = _crc_of_zeros(zlib.crc32(header), size)
    crc = zlib.crc32(bytes(1024 + (-size) % 512), crc)
    total = len(header) + size + 1024 + (-size) % 512
    return (
        b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
        + first
        + body
        + tail
        + struct.pack("<LL", crc, total & 0xFFFFFFFF)
    )


def _crc_of_zeros(crc, length):
    """CRC-32 continued over `length` zero bytes (streamed in 1 MiB steps)."""
    block = bytes(1024 * 1024)
    while length:
        step = min(length, len(block))
        crc = zlib.crc32(block[:step], crc)
        length -= step
    return crc


def quoted_overlap_zip(n: int = 10, kernel_size: int = 1024 * 1024) -> bytes:
    """David Fifield's quoted-overlap zip bomb (CVE-2024-0450 shape): every member's deflate data
    quotes the next member's local header in a stored block and then runs into that member's
    data, so all members share one kernel. Sizes and CRCs are correct."""
    kernel = zlib.compressobj(9, zlib.DEFLATED, -15)
    kernel = kernel.compress(bytes(kernel_size)) + kernel.flush()
    names = [b"f%02d" % i for i in range(n)]

    def lfh(name, crc, csize, usize):
        return (
            struct.pack(
                "<4s5H3L2H", b"PK\x03\x04", 20, 0, 8, 0, 0x21, crc, csize, usize, len(name), 0
            )
            + name
        )

    # Work backwards: the data of member i is quote(LFH_{i+1}) + data of member i+1.
    data = kernel
    headers = [None] * n
    sizes = [None] * n
    for i in range(n - 1, -1, -1):
        usize = len(zlib.decompress(data, -15))
        crc = zlib.crc32(zlib.decompress(data, -15))
        headers[i] = lfh(names[i], crc, len(data), usize)
        sizes[i] = (crc, len(data), usize)
        if i:
            quoted = headers[i]
            data = struct.pack("<BHH", 0, len(quoted), len(quoted) ^ 0xFFFF) + quoted + data
    body = headers[0] + data  # member 0's header then its (overlapping) data
    offsets = []
    pos = 0
    for i in range(n):
        offsets.append(pos)
        pos += len(headers[i]) + (5 if i + 1 < n else len(kernel))
    central = bytearray()
    for i in range(n):
        crc, csize, usize = sizes[i]
        central += (
            struct.pack(
                "<4s6H3L5H2L",
                b"PK\x01\x02",
                (3 << 8) | 20,
                20,
                0,
                8,
                0,
                0x21,
                crc,
                csize,
                usize,
                len(names[i]),
                0,
                0,
                0,
                0,
                0o100644 << 16,
                offsets[i],
            )
            + names[i]
        )
    eocd = struct.pack("<4s4H2LH", b"PK\x05\x06", 0, 0, n, n, len(central), len(body), 0)
    return body + bytes(central) + eocd


# ----------------------------------------------------------------------------- tar


def tar_bytes(members, *, fmt=tarfile.PAX_FORMAT, compress=True) -> bytes:
    """members: list of TarInfo (with .data attribute for regular files, or None)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if compress else "w", format=fmt) as tf:
        for info in members:
            data = getattr(info, "_data", None)
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


class _TarInfo(tarfile.TarInfo):
    """TarInfo with a place for the member's content (TarInfo itself has __slots__)."""

    _data = None


def tinfo(name, *, type=tarfile.REGTYPE, data=b"", linkname="", mode=0o644, size=None):
    info = _TarInfo(name)
    info.type = type
    info.mode = mode
    info.linkname = linkname
    if type in (tarfile.REGTYPE, tarfile.AREGTYPE):
        info.size = len(data) if size is None else size
        info._data = data
    return info


def gz(data: bytes) -> bytes:
    import gzip

    return gzip.compress(data, mtime=0)


# ----------------------------------------------------------------------------- misc


PNG_HTML_POLYGLOT = (
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00"
    b"\x1f\x15\xc4\x89\x00\x00\x00\x1etEXt<html><script>alert(document.domain)</script>"
    b"\x00\x00\x00\x00IEND\xaeB`\x82<html><body onload=alert(1)></body></html>"
)


def write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def snapshot(root: Path) -> dict:
    """{relative path: (type, size, mode, mtime_ns)} for the whole tree, links not followed."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            out[str(p.relative_to(root))] = (
                stat.S_IFMT(st.st_mode),
                st.st_size,
                st.st_mode,
                st.st_mtime_ns,
            )
    return out


def stdlib_zip(entries) -> bytes:
    """entries: list of (name, bytes) written by zipfile (deflated)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in entries:
            zf.writestr(name, data)
    return buf.getvalue()
