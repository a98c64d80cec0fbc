"""The Beam form of a job's windows (`ldp_telemetry.ldp.config.windows.WindowSpec`): window
functions, and the windowing and triggers of slices and of windows on the pane path."""
from __future__ import annotations

import apache_beam as beam
from apache_beam.transforms import trigger as beam_trigger
from apache_beam.transforms import window as beam_window
from apache_beam.utils.timestamp import Duration, Timestamp

from ldp_telemetry.ldp.config.windows import WindowSpec


def beam_duration(ms: int) -> Duration:
    """Exact Beam duration of `ms` milliseconds (Beam truncates float seconds * 1e6)."""
    return Duration(micros=ms * 1000)


def beam_window_fn(spec: WindowSpec) -> beam_window.WindowFn:
    """FixedWindows or SlidingWindows of the spec, with its offset."""
    size, period = beam_duration(spec.size_ms), beam_duration(spec.period_ms)
    offset = Timestamp(micros=spec.offset_ms * 1000)
    return (beam_window.FixedWindows(size, offset) if spec.is_fixed
            else beam_window.SlidingWindows(size, period, offset))


def into_slices(spec: WindowSpec) -> beam.WindowInto:
    """Slices as Beam windows: FixedWindows of the slice firing a pane per arriving batch
    (Repeatedly(AfterCount(1))), DISCARDING, with the allowed lateness. Each slice pane is a
    delta holding reports no other pane holds; the runner drops a batch whose slice expired
    (watermark past slice end + allowed lateness)."""
    slices = beam_window.FixedWindows(beam_duration(spec.slice_ms),
                                      Timestamp(micros=spec.slice_offset_ms * 1000))
    return beam.WindowInto(
        slices, trigger=beam_trigger.Repeatedly(beam_trigger.AfterCount(1)),
        accumulation_mode=beam_trigger.AccumulationMode.DISCARDING,
        allowed_lateness=beam_duration(spec.allowed_lateness_ms))


def into_windows(spec: WindowSpec) -> beam.WindowInto:
    """The job's windows with the dashboard trigger: AfterWatermark(early=AfterProcessingTime(
    early every), late=AfterCount(1)), ACCUMULATING, with the allowed lateness.

    A window ends no earlier than any slice in it, so a delta accepted by the slice stage is
    never too late for the window stage. The late trigger is there even without lateness: a
    batch that arrives with the watermark exactly at its slice's end is still accepted, and must
    not meet a closed window. So no pane is marked last: a window expires silently.
    """
    early = (None if spec.early_every_ms is None
             else beam_trigger.AfterProcessingTime(spec.early_every_ms // 1000))
    return beam.WindowInto(
        beam_window_fn(spec),
        trigger=beam_trigger.AfterWatermark(early=early, late=beam_trigger.AfterCount(1)),
        accumulation_mode=beam_trigger.AccumulationMode.ACCUMULATING,
        allowed_lateness=beam_duration(spec.allowed_lateness_ms))
