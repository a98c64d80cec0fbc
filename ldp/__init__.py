"""Beam-free mathematics of locally differentially private frequency estimation."""
