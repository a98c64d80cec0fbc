"""Shard files that replace a run's earlier shards: temporary files, then one finalize step.

A batch run writes `<prefix>-SSSSS-of-NNNNN<suffix>` (`output.layout.shard_pattern`). Its
writers write under a temporary folder of the run (`temp_dir`, next to the shards, as Beam's
FileBasedSink does), each file under a name of its own (`temp_stem`: a new one for every
attempt at a bundle). `finalize_shards`, run once after every writer has finished, renames the
temporary files it is given into place (a reader never sees a half-written shard), then deletes
every earlier shard of the same prefix and suffix with another count, then the temporary folder.
Only the files it is given are renamed: a failed or retried bundle's files are never listed, and
go with the folder. Every file operation is `FileSystems`', so gs:// and s3:// outputs work.
"""
from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Sequence

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

#: The name of a run's temporary folder, next to its shards: `.temp-<name>-<32 hex digits>`.
TEMP_DIR_FORMAT = ".temp-{name}-{uid}"

_LOGGER = logging.getLogger(__name__)


def temp_dir(output_dir: str, name: str) -> str:
    """A new temporary folder for the shards of `name` under `output_dir` (not created: file
    systems create a file's folders, or have none)."""
    return FileSystems.join(output_dir, TEMP_DIR_FORMAT.format(name=name, uid=uuid.uuid4().hex))


def temp_stem(folder: str) -> str:
    """A new, unique path in `folder` for one writer's files (each format adds its suffix)."""
    return FileSystems.join(folder, uuid.uuid4().hex)


def shard_name(prefix: str, index: int | str, count: int, suffix: str) -> str:
    """`<prefix>-SSSSS-of-NNNNN<suffix>` (more digits past 99,999); index "*" for a glob."""
    index = index if isinstance(index, str) else f"{index:05d}"
    return f"{prefix}-{index}-of-{count:05d}{suffix}"


def finalize_shards(prefix: str, suffixes: Sequence[str], stems: Sequence[str],
                    folder: str) -> list[str]:
    """Rename `stem + suffix` to shard i of len(stems) for each of `suffixes`, stems in sorted
    order; then delete the shards `<prefix>-*-of-MMMMM<suffix>` with M ≠ len(stems), then
    `folder` and anything left in it. Returns the shards' paths.

    Idempotent: a retried finalize finds the files it renamed in place and skips them. A stem
    whose temporary file and shard are both missing raises BeamIOError naming both.
    """
    count = len(stems)
    if not count:
        raise ValueError("finalize_shards needs at least one shard")
    pairs = [(stem + suffix, shard_name(prefix, index, count, suffix))
             for suffix in suffixes for index, stem in enumerate(sorted(stems))]
    present = _matching([FileSystems.join(folder, "*"),
                         *(shard_name(prefix, "*", count, suffix) for suffix in suffixes)])
    renames = []
    for source, shard in pairs:
        if source in present:
            renames.append((source, shard))
        elif shard not in present:
            raise BeamIOError(f"neither the temporary file {source} nor the shard {shard} "
                              "exists: the writer's output is lost")
    if renames:
        FileSystems.rename(*map(list, zip(*renames, strict=True)))
    _delete_stale(prefix, suffixes, count)
    _delete_folder(folder)
    return [shard for _, shard in pairs]


def _matching(patterns: list[str]) -> set[str]:
    """The paths that match any of the globs (one listing each, not one request per file)."""
    return {metadata.path for result in FileSystems.match(patterns)
            for metadata in result.metadata_list}


def _delete_stale(prefix: str, suffixes: Sequence[str], count: int) -> None:
    """Delete `<prefix>-SSSSS-of-MMMMM<suffix>` for every M ≠ count: an earlier run's shards
    (with a shard per bundle the count changes from run to run, and readers of `<prefix>-*`
    would mix the earlier run's records into this one's)."""
    stale = []
    for suffix in suffixes:
        shard = re.compile(re.escape(prefix) + r"-\d{5,}-of-(\d{5,})" + re.escape(suffix) + "$")
        stale += [metadata.path
                  for result in FileSystems.match([f"{prefix}-*-of-*{suffix}"])
                  for metadata in result.metadata_list
                  if (found := shard.match(metadata.path)) and int(found[1]) != count]
    if stale:
        FileSystems.delete(stale)


def _delete_folder(folder: str) -> None:
    """Delete the files left in `folder` (a failed bundle's) and the folder; a folder already
    gone (a retried finalize) is not an error."""
    left = sorted(_matching([FileSystems.join(folder, "*")]))
    try:
        FileSystems.delete([*left, folder])
    except BeamIOError as error:  # object stores have no folder to delete; a retry finds none
        _LOGGER.info("deleting the temporary folder %s: %s", folder, error)
