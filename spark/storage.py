"""Where captures are read from and results written to: a path or URI resolved to a
``pyarrow.fs`` file system.

- a local path, or a ``file:`` URI (``file:///x``, ``file://localhost/x``, ``file:/x``):
  :class:`pyarrow.fs.LocalFileSystem`;
- ``s3://BUCKET/KEY`` (``s3a://``, ``s3n://``: the Hadoop spellings, the same objects):
  :class:`pyarrow.fs.S3FileSystem`. The endpoint is ``--s3-endpoint URL``, else
  ``AWS_ENDPOINT_URL_S3`` or ``AWS_ENDPOINT_URL`` (an S3-compatible store: MinIO, Ceph,
  ...); the region ``AWS_REGION`` or ``AWS_DEFAULT_REGION``, else the bucket's own (asked
  of AWS); credentials the AWS SDK's usual chain (``AWS_ACCESS_KEY_ID``,
  ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_PROFILE`` and ``~/.aws``, an
  instance role);
- ``hdfs://NAMENODE[:PORT]/PATH``: :class:`pyarrow.fs.HadoopFileSystem`, through Hadoop's
  ``libhdfs`` and a JVM (``JAVA_HOME``, ``HADOOP_HOME`` or ``ARROW_LIBHDFS_DIR``, and
  ``CLASSPATH`` holding Hadoop's jars); when it cannot load, a :class:`StorageError` that
  says so.

The job's outputs (``--out``) go through the same functions: :func:`make_dirs`,
:func:`remove_tree`, :func:`write_bytes`, and ``pyarrow.parquet`` given the file system
:func:`filesystem` returns (a part is written under a hidden name, then renamed: on S3
a server-side copy and a delete, :class:`trocket.spark.arrow.PartWriter`).

The driver reads the settings once (:meth:`Storage.from_environment`); the
:class:`Storage` travels to the executors with the job's closures, so they reach the
store the same way (as ``spark-submit`` hands the driver's AWS keys to its executors'
``s3a`` settings). Each process keeps one file system per store
(:func:`filesystem`). A file is read through :func:`open_input`: a seekable, buffered
binary file (the plain ``open()`` interface the readers use), whatever the store.
"""

from __future__ import annotations

import functools
import io
import os
import posixpath
import urllib.parse
from typing import BinaryIO

import attrs

__all__ = [
    "Storage", "StorageError", "LOCAL", "filesystem", "open_input", "file_size", "local_path", "is_local", "list_files", "stat",
    "join", "make_dirs", "remove_tree", "write_bytes", "store_root", "hidden_name", "error_reason",
]

#: a remote file's read buffer: the readers' small reads (headers, packet records) come
#: from it, their large ones (8 MiB chunks) go straight to the store, one ranged GET each
REMOTE_BUFFER_BYTES = 1 << 20

_S3_SCHEMES = ("s3", "s3a", "s3n")
_HDFS_SCHEMES = ("hdfs",)


class StorageError(Exception):
    """A path or URI this job cannot reach: an unknown scheme, a store that cannot load
    (the text says why; the caller names the path)."""


@attrs.frozen(slots=True)
class Storage:
    """How remote stores are reached (small and picklable: it goes to the executors)."""

    s3_endpoint: str | None = None  # URL of an S3-compatible store (None: AWS)
    s3_region: str | None = None
    # the driver's keys, when its environment holds them (else each process's own chain)
    s3_access_key: str | None = attrs.field(default=None, repr=False)
    s3_secret_key: str | None = attrs.field(default=None, repr=False)
    s3_session_token: str | None = attrs.field(default=None, repr=False)

    @classmethod
    def from_environment(cls, s3_endpoint: str | None = None, environ=os.environ) -> Storage:
        """The settings of the process that names the inputs: ``s3_endpoint`` (the
        command line's) before ``AWS_ENDPOINT_URL_S3`` and ``AWS_ENDPOINT_URL``."""
        access, secret = environ.get("AWS_ACCESS_KEY_ID"), environ.get("AWS_SECRET_ACCESS_KEY")
        keys = access is not None and secret is not None
        return cls(
            s3_endpoint=s3_endpoint or environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or None,
            s3_region=environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or None,
            s3_access_key=access if keys else None,
            s3_secret_key=secret if keys else None,
            s3_session_token=environ.get("AWS_SESSION_TOKEN") if keys else None,
        )


#: local files and environment-only settings
LOCAL = Storage()


def local_path(p: str) -> str | None:
    """The local path ``p`` names: itself, or a ``file:`` URI's path (``file:///x``,
    ``file://localhost/x``, ``file:/x``); None for a URI of another scheme."""
    if not p.startswith("file:") and "://" not in p:
        return p
    u = urllib.parse.urlsplit(p)
    if u.scheme == "file" and u.netloc in ("", "localhost"):
        return urllib.parse.unquote(u.path)
    return None


def is_local(p: str) -> bool:
    return local_path(p) is not None


def hidden_name(name: str) -> bool:
    """A file or folder name Spark (and these readers) leave out: ``.`` or ``_`` first."""
    return name.startswith((".", "_"))


def error_reason(exc: BaseException) -> str:
    """How a message says why ``exc`` happened: an OSError's ``strerror``, else the
    first line of its text, else its type's name (pyarrow's errors run over lines)."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


def filesystem(uri: str, storage: Storage = LOCAL):
    """(file system, its path) of a local path or URI; :class:`StorageError` for a
    scheme not read here or a store that cannot load."""
    path = local_path(uri)
    if path is not None:
        return _local(), os.path.abspath(os.path.expanduser(path))
    u = urllib.parse.urlsplit(uri)
    scheme = u.scheme.lower()
    if scheme in _S3_SCHEMES:
        if not u.netloc:
            raise StorageError("no bucket (s3://BUCKET/KEY)")
        return _s3(storage, u.netloc), (u.netloc + urllib.parse.unquote(u.path)).rstrip("/")
    if scheme in _HDFS_SCHEMES:
        return _hdfs(u.hostname or "default", u.port or 0), urllib.parse.unquote(u.path) or "/"
    raise StorageError(f"{scheme}:// is not read (local paths, file://, s3:// or s3a://, and hdfs:// are)")


def uri_of(uri: str, fs_path: str) -> str:
    """The URI (or local path) of ``fs_path``, a path of the file system ``uri`` resolved to."""
    if is_local(uri):
        return fs_path
    u = urllib.parse.urlsplit(uri)
    if u.scheme.lower() in _S3_SCHEMES:
        return f"{u.scheme}://{fs_path}"
    return urllib.parse.urlunsplit((u.scheme, u.netloc, fs_path, "", ""))


@attrs.frozen(slots=True)
class Stat:
    kind: str  # "file", "dir" or "missing"
    size: int


def stat(uri: str, storage: Storage = LOCAL) -> Stat:
    """What ``uri`` is (OSError when the store cannot be asked)."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri, storage)
    info = fs.get_file_info(path)
    if info.type == pafs.FileType.File:
        return Stat("file", info.size or 0)
    if info.type == pafs.FileType.Directory:
        return Stat("dir", 0)
    return Stat("missing", 0)


def list_files(uri: str, storage: Storage = LOCAL, skip=lambda name: False) -> list[tuple[str, str, int]]:
    """(path or URI, its path relative to ``uri``, size) of every file below the folder
    ``uri``, recursively, sorted (none when it is not there); a file or folder whose
    name ``skip`` accepts is left out with all below it."""
    import pyarrow.fs as pafs

    fs, root = filesystem(uri, storage)
    out = []
    for info in fs.get_file_info(pafs.FileSelector(root, recursive=True, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = posixpath.relpath(info.path, root)
        if not any(skip(part) for part in rel.split("/")):
            out.append((uri_of(uri, info.path), rel, info.size or 0))
    out.sort(key=lambda t: t[1].split("/"))
    return out


def open_input(uri: str, storage: Storage = LOCAL) -> BinaryIO:
    """A local path or URI opened for reading: seekable, buffered (OSError when it
    cannot be read, FileNotFoundError when it is not there)."""
    fs, path = filesystem(uri, storage)
    return io.BufferedReader(fs.open_input_file(path), REMOTE_BUFFER_BYTES if not is_local(uri) else io.DEFAULT_BUFFER_SIZE)


def join(uri: str, *parts: str) -> str:
    """``uri`` (a local path or a URI) with ``parts`` appended."""
    return posixpath.join(uri, *parts)


def make_dirs(uri: str, storage: Storage = LOCAL) -> None:
    """The folder ``uri`` and its parents (nothing to do on an object store)."""
    fs, path = filesystem(uri, storage)
    if is_local(uri) or _is_hdfs(uri):
        fs.create_dir(path, recursive=True)


def remove_tree(uri: str, storage: Storage = LOCAL) -> None:
    """The folder ``uri`` and everything below it, gone (nothing there: nothing to do)."""
    import pyarrow.fs as pafs

    fs, path = filesystem(uri, storage)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def write_bytes(uri: str, data: bytes, storage: Storage = LOCAL) -> None:
    """The file ``uri`` holding ``data`` (replaced whole when it exists)."""
    fs, path = filesystem(uri, storage)
    with fs.open_output_stream(path) as f:
        f.write(data)


def store_root(uri: str) -> str:
    """The bucket of an ``s3://`` URI (``s3://BUCKET``); other paths and URIs as given."""
    u = urllib.parse.urlsplit(uri)
    return f"{u.scheme}://{u.netloc}" if u.scheme.lower() in _S3_SCHEMES else uri


def _is_hdfs(uri: str) -> bool:
    return urllib.parse.urlsplit(uri).scheme.lower() in _HDFS_SCHEMES


def file_size(f: BinaryIO) -> int:
    """The size of the open file ``f`` (its position kept)."""
    at = f.tell()
    size = f.seek(0, 2)
    f.seek(at)
    return size


@functools.cache
def _local():
    import pyarrow.fs as pafs

    return pafs.LocalFileSystem()


@functools.lru_cache(maxsize=16)
def _s3(storage: Storage, bucket: str):
    import pyarrow.fs as pafs

    kwargs: dict = {}
    if storage.s3_endpoint:
        u = urllib.parse.urlsplit(storage.s3_endpoint if "://" in storage.s3_endpoint else f"https://{storage.s3_endpoint}")
        kwargs["endpoint_override"] = u.netloc + u.path.rstrip("/")
        kwargs["scheme"] = u.scheme
    if storage.s3_access_key is not None:
        kwargs.update(access_key=storage.s3_access_key, secret_key=storage.s3_secret_key, session_token=storage.s3_session_token)
    region = storage.s3_region
    if region is None and not storage.s3_endpoint:
        try:
            region = pafs.resolve_s3_region(bucket)  # AWS: the bucket's own region
        except OSError:
            region = None  # the SDK's default; a wrong region is reported by the first request
    if region is not None:
        kwargs["region"] = region
    return pafs.S3FileSystem(**kwargs)


#: why HDFS could not load, as first said (pyarrow says "Prior attempt to load libhdfs
#: failed" the second time)
_hdfs_failure: list[str] = []


@functools.lru_cache(maxsize=8)
def _hdfs(host: str, port: int):
    import pyarrow.fs as pafs

    try:
        return pafs.HadoopFileSystem(host, port)
    except OSError as exc:
        reason = error_reason(exc)
        if reason.startswith("Prior attempt") and _hdfs_failure:
            reason = _hdfs_failure[0]
        elif not _hdfs_failure:
            _hdfs_failure.append(reason)
        where = "the default file system (fs.defaultFS)" if host == "default" else f"{host}{f':{port}' if port else ''}"
        raise StorageError(
            f"cannot reach HDFS at {where} ({reason}); pyarrow reads HDFS through Hadoop's libhdfs.so "
            "and a JVM: set JAVA_HOME, HADOOP_HOME (or ARROW_LIBHDFS_DIR, the folder of libhdfs.so) and "
            "CLASSPATH=$(hadoop classpath --glob)"
        ) from None
