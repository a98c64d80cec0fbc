"""Beam-free core of ldp-telemetry: the mathematics, the configuration and the counting engine.

Sub-packages, lowest first; a module imports only its own sub-package and those below it
(tests/test_import_contract.py checks it):

    engine       report batches, reasons, counting, one window counted and finalized
    config       the registry, windows, privacy budget, planner, fingerprints, memoization
    estimation   estimators, EM, ADMM, Wiener, post-processing, uncertainty, queries
    integrity    integrity statistics of a window's reports (beside estimation)
    protocols    the protocols with their noise model, channels and hashing
    base         errors, validation, time helpers, named catalogs
"""
