"""Beam transforms: thin steps that move numpy batches and call `ldp`."""
