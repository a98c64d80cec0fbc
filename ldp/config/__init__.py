"""What a metric is configured as: the registry, window settings, the privacy budget, the
planner, configuration fingerprints and memoization. Imports `estimation`, `integrity`,
`protocols` and `base`."""
