"""Shard files that replace a run's earlier shards: temporary files, then one finalize step.

A batch run writes `<prefix>-SSSSS-of-NNNNN<suffix>` (`output.layout.shard_name`). Its
writers write under a temporary folder of the run (`temp_dir`, next to the shards, as Beam's
FileBasedSink does), each file under a name of its own (`temp_stem`: a new one for every
attempt at a bundle). `finalize_shards`, run once after every writer has finished, renames the
temporary files it is given into place (a reader never sees a half-written shard), after deleting
every earlier shard of the same prefix and suffix with another count; then the temporary folder.
Only the files it is given are renamed: a failed or retried bundle's files are never listed, and
go with the folder. Every file operation is `FileSystems`', so gs:// and s3:// outputs work.
"""
from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

from apache_beam.io.filesystem import BeamIOError
from apache_beam.io.filesystems import FileSystems

from ldp_telemetry.output.layout import shard_count, shard_name

#: The name of a run's temporary folder, next to its shards: `.temp-<name>-<32 hex digits>`.
TEMP_DIR_FORMAT = ".temp-{name}-{uid}"

_LOGGER = logging.getLogger(__name__)


#: Characters Beam's file systems read as a pattern in any path they delete or match, with no
#: way to quote them (`FileSystem.translate_pattern`): an output path must not hold them.
GLOB_CHARACTERS = frozenset("*?[")


def check_output_path(output_dir: str) -> None:
    """ValueError when `output_dir` holds a glob character (`GLOB_CHARACTERS`): Beam would
    delete and rename its shards as patterns, which match nothing or other files."""
    found = sorted(GLOB_CHARACTERS.intersection(output_dir))
    if found:
        raise ValueError(f"the output folder {output_dir!r} holds {' '.join(found)}, which file "
                         f"systems read as a pattern when they delete or rename; choose a "
                         f"folder name without * ? [")


def temp_dir(output_dir: str, name: str) -> str:
    """A new temporary folder for the shards of `name` under `output_dir` (not created: file
    systems create a file's folders, or have none)."""
    return FileSystems.join(output_dir, TEMP_DIR_FORMAT.format(name=name, uid=uuid.uuid4().hex))


def temp_stem(folder: str) -> str:
    """A new, unique path in `folder` for one writer's files (each format adds its suffix)."""
    return FileSystems.join(folder, uuid.uuid4().hex)


def finalize_shards(prefix: str, suffixes: Sequence[str], stems: Sequence[str],
                    folder: str) -> list[str]:
    """Delete the shards `<prefix>-*-of-MMMMM<suffix>` with M ≠ len(stems) (an earlier run's),
    then rename `stem + suffix` to shard i of len(stems) for each of `suffixes`, stems in sorted
    order, then delete `folder` and anything left in it. Returns the shards' paths.

    Stale shards go first, as in Beam's FileBasedSink: a finalize that dies half-way leaves a
    partial set of this run's shards, never two runs' shards side by side. Files are found by
    listing the two folders and comparing names, so the output path need not be normalised;
    it must not hold glob characters (`check_output_path`). Idempotent: a retried finalize
    finds the files it renamed in place and skips them. A stem whose temporary file and shard
    are both missing raises BeamIOError naming both.
    """
    count = len(stems)
    if not count:
        raise ValueError("finalize_shards needs at least one shard")
    output_dir, name = FileSystems.split(prefix)
    pairs = [(stem + suffix, FileSystems.join(output_dir, shard_name(name, index, count, suffix)))
             for suffix in suffixes for index, stem in enumerate(sorted(stems))]
    shards = _names_in(output_dir)
    stale = [FileSystems.join(output_dir, filename) for filename in sorted(shards)
             if any(shard_count(filename, name, suffix) not in (None, count)
                    for suffix in suffixes)]
    if stale:
        FileSystems.delete(stale)
    temporary = _names_in(folder)
    renames = []
    for source, shard in pairs:
        if FileSystems.split(source)[1] in temporary:
            renames.append((source, shard))
        elif FileSystems.split(shard)[1] not in shards:
            raise BeamIOError(f"neither the temporary file {source} nor the shard {shard} "
                              "exists: the writer's output is lost")
    if renames:
        FileSystems.rename(*map(list, zip(*renames, strict=True)))
    _delete_folder(folder)
    return [shard for _, shard in pairs]


def _names_in(folder: str) -> set[str]:
    """The names of the files directly in `folder` (one listing; none when it does not exist)."""
    listing = FileSystems.join(folder, "*")
    return {FileSystems.split(metadata.path)[1] for result in FileSystems.match([listing])
            for metadata in result.metadata_list}


def _delete_folder(folder: str) -> None:
    """Delete the files left in `folder` (a failed bundle's) and the folder; a folder already
    gone (a retried finalize) is not an error."""
    left = sorted(FileSystems.join(folder, name) for name in _names_in(folder))
    try:
        FileSystems.delete([*left, folder])
    except BeamIOError as error:  # object stores have no folder to delete; a retry finds none
        _LOGGER.info("deleting the temporary folder %s: %s", folder, error)
