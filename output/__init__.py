"""The output contract, Beam-free: what a job writes and how it is read back.

One place for everything that a writer and its readers must agree on:

* `layout` — the files and folders of a batch run and of a live run, the injective encoding of
  a metric name into a path segment, the typed window key;
* `reader` — the one reader of both layouts (`show`, `query`, the dashboard and a restarted
  live run all use it);
* `times` — ISO-8601 text and epoch milliseconds, and the span of valid event times;
* `reasons` — the dead-letter reasons (their strings are on the wire and in the store);
* `bands` — the 95% error band;
* `atomic` — writing a file so that no reader ever sees half of it, locally or remotely.
"""
