"""Runnable jobs: windowed estimation and the report simulator."""
