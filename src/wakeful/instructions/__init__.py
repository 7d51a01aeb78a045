"""Instruction sources and value deltas."""
