"""Admission and promotion of inputs (steer and queue)."""
