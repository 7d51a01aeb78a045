"""The HTTP server and its client."""
