"""Durable event types (the facts) and their projections (the views). No I/O."""
