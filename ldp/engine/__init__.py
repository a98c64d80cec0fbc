"""The Beam-free counting engine: report batches and dead-letter reasons, counting a slice's
batches into its statistic, and one window counted and finalized in process. The Beam steps in
`ldp_telemetry.transforms` move batches and call it."""
