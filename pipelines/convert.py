"""`ldp convert`: report files <-> envelope files, through the job's own decoder.

Each input file is read by `ReportDecoder` (the job's reader: per-report files, envelope files
or both kinds in one folder) and every report the job would count is written to a file of the
same name in the output folder, in the other layout: one Avro record per report
(`client.ReportFile`) or report envelopes (`client.EnvelopeFile`, docs/envelopes.md). Written
reports carry the fingerprint of the configuration they were read under (a report without one
is pinned to the registry's current configuration). Reports the job would dead-letter are not
written: they are counted by reason, so that for every input file
    reports read = reports written + dead letters.
A job over the converted files gives the same estimates as over the originals.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field

from ldp_telemetry.client import EncodedReports, EnvelopeFile, ReportFile
from ldp_telemetry.ldp.base.errors import InputError
from ldp_telemetry.ldp.config.registry import Registry
from ldp_telemetry.ldp.engine.batches import REPORT_ID, DeadLetter
from ldp_telemetry.output.atomic import check_writable_folder
from ldp_telemetry.schemas.codec import EVENT_TIME, ReportDecoder
from ldp_telemetry.schemas.envelopes import DEFAULT_ENVELOPE_REPORTS

#: The output layouts of `convert`.
LAYOUTS = ("envelope", "records")
_SLICE_MS = 86_400_000  # the decoder's slices: one day (how batches are cut, nothing else)


@dataclass
class Converted:
    """What a conversion did: reports read, written, and dead-lettered by reason."""

    read: int = 0
    written: int = 0
    dead: Counter = field(default_factory=Counter)
    files: list[str] = field(default_factory=list)


def convert_files(registry: Registry, paths: list[str], out_dir: str, to: str,
                  envelope_reports: int = DEFAULT_ENVELOPE_REPORTS,
                  overwrite: bool = False) -> Converted:
    """Convert each of `paths` into `out_dir` in layout `to` (LAYOUTS); returns the counts.

    InputError (field `out`) when an output file exists and `overwrite` is not set, or when it
    would be one of the inputs; ValueError-free otherwise: bad reports are counted, not raised.
    """
    if to not in LAYOUTS:
        raise InputError(f"to must be one of {', '.join(LAYOUTS)}, got {to!r}", "to")
    check_writable_folder(out_dir, "out")
    targets = [os.path.join(out_dir, os.path.basename(path)) for path in paths]
    inputs = {os.path.realpath(path) for path in paths}
    for target in targets:
        if os.path.realpath(target) in inputs:
            raise InputError(f"output {target} would replace an input file: choose another "
                             "output folder", "out")
        if os.path.exists(target) and not overwrite:
            raise InputError(f"{target} exists; set overwrite or choose another output folder",
                             "out")
    if len(set(targets)) != len(targets):
        raise InputError("two input files have the same name; convert them into different "
                         "folders", "out")
    decoder = ReportDecoder(registry, _SLICE_MS, event_times=True)
    done = Converted()
    for path, target in zip(paths, targets, strict=True):
        before = decoder.records_read
        out = (EnvelopeFile(target, envelope_reports=envelope_reports) if to == "envelope"
               else ReportFile(target))
        with out:
            for item in decoder.decode_file(path):
                if isinstance(item, DeadLetter):
                    done.dead[str(item.reason)] += item.records
                    continue
                columns = dict(item.columns)
                ids, times = columns.pop(REPORT_ID), columns.pop(EVENT_TIME)
                config = registry.version(item.metric, item.version)
                done.written += out.write(EncodedReports(config, ids, times, columns))
        done.read += decoder.records_read - before
        done.files.append(target)
    return done
