"""The output contract, Beam-free: what a job writes and how it is read back.

One place for everything that a writer and its readers must agree on (the time helpers every
layer shares, ISO-8601 text and epoch milliseconds, are `ldp_telemetry.ldp.base.times`; the span of
valid event times is `ldp_telemetry.ldp.base.validation`'s):

* `layout` — the files and folders of a batch run and of a live run, the injective encoding of
  a metric name into a path segment, the typed window key;
* `estimate` — the window-estimate record, typed (`EstimateRecord`): window bounds in ms, read
  and written as JSON and Avro, byte-compatible with earlier files;
* `records` — the window-estimate record built from a window's result;
* `reader` — the one reader of both layouts (`show`, `query` and a restarted live run use it;
  `tail` follows a folder while a job writes it, for the dashboard);
* `text` — records as text (`ldp show`, a live run's line per pane);
* `reasons` — the dead-letter reasons (their strings are on the wire and in the store);
* `bands` — the 95% error band;
* `atomic` — writing a file so that no reader ever sees half of it, locally or remotely.
"""
