"""The tables of users, their tokens, session owners and share links (migration 26).

Invariant: a token or a share link is stored as the SHA-256 of its text (and a token also as
its inspector cookie, an HMAC of that digest), never as the text itself; an owner is recorded
on a root session only, and a child or a fork reads it through its root (`_access.py`).
"""

from __future__ import annotations

ACCESS_TABLES = """
CREATE TABLE users (
  name TEXT PRIMARY KEY,
  created_ms BIGINT NOT NULL
);
CREATE TABLE user_tokens (
  id TEXT PRIMARY KEY,
  user_name TEXT NOT NULL,
  digest TEXT NOT NULL UNIQUE,
  cookie TEXT NOT NULL UNIQUE,
  scopes TEXT NOT NULL,
  label TEXT,
  created_ms BIGINT NOT NULL,
  expires_ms BIGINT,
  revoked_ms BIGINT
);
CREATE INDEX user_tokens_user ON user_tokens (user_name);
CREATE TABLE session_owners (
  root_id TEXT PRIMARY KEY,
  user_name TEXT NOT NULL
);
CREATE INDEX session_owners_user ON session_owners (user_name);
CREATE TABLE share_links (
  id TEXT PRIMARY KEY,
  digest TEXT NOT NULL UNIQUE,
  session_id TEXT NOT NULL,
  turn_id TEXT,
  created_by TEXT,
  created_ms BIGINT NOT NULL,
  expires_ms BIGINT NOT NULL,
  revoked_ms BIGINT
)
"""

# Migration 28: what stays of a deleted session tree, and who deleted it (`_access.Deletion`).
DELETIONS_TABLE = """
CREATE TABLE session_deletions (
  session_id TEXT NOT NULL,
  parent_id TEXT,
  owner TEXT,
  actor TEXT,
  deleted_ms BIGINT NOT NULL,
  how TEXT NOT NULL
);
CREATE INDEX session_deletions_session ON session_deletions (session_id)
"""
