"""Coordinator, claims and leases, interruption, recovery, workers."""
