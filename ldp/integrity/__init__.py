"""Integrity statistics: per-window signals that a window's reports look manipulated.

Beam-free. `spec` holds the settings and their named limits, `sample` the mergeable bottom-s
report sample counted beside each version's statistic, `support` what each protocol family
lets the tests compute (support matrices, support-size distributions, pair probabilities),
`statistics` the tests themselves and the record section they fill. Reported, never applied:
nothing here changes an estimate. See docs/integrity.md.
"""
