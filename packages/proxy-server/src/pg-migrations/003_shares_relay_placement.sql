-- Version 3 of the proxy's schema on PostgreSQL: what proxy instances sharing one database must
-- agree on besides the metadata of 001 — the relay cache's books (store/relay-book-postgres.ts)
-- and the shares registry with its connected accounts (shares/book-postgres.ts). The mirror
-- engines' own books stay in SQLite for now, opened by the controller only (docs/deployment.md).

-- One row per staged copy in the relay directory (on the shared filesystem tier). `file` is the
-- copy's own name (<sha256>.<random>), so deleting an evicted copy never removes a newer one;
-- `last_used` comes from relay_use_seq, one recency order for every instance.
CREATE TABLE relay_entries (
  sha256 TEXT PRIMARY KEY,
  file TEXT NOT NULL,
  size BIGINT NOT NULL,
  last_used BIGINT NOT NULL,
  staged_ms BIGINT NOT NULL
);
CREATE INDEX relay_entries_lru ON relay_entries (last_used);
CREATE SEQUENCE relay_use_seq;

-- Readers of a copy, per instance (`holder`, random per process): an entry with a pin renewed
-- recently is never evicted; the pins of an instance that died stop counting once stale.
CREATE TABLE relay_pins (
  sha256 TEXT NOT NULL,
  holder TEXT NOT NULL,
  pins INTEGER NOT NULL,
  renewed_ms BIGINT NOT NULL,
  PRIMARY KEY (sha256, holder)
);
CREATE INDEX relay_pins_holder ON relay_pins (holder);

-- The shares registry: the tables of the mirror's SQLite schema (packages/mirror/src/sql,
-- as they stand after its 007), same rows.
CREATE TABLE shares (
  id TEXT PRIMARY KEY,
  name TEXT NOT NULL,
  owner TEXT NOT NULL,
  created_ms BIGINT NOT NULL
);

CREATE TABLE share_members (
  share_id TEXT NOT NULL REFERENCES shares (id) ON DELETE CASCADE,
  member TEXT NOT NULL,
  provider TEXT NOT NULL,
  account_id TEXT NOT NULL,
  root TEXT NOT NULL,
  role TEXT NOT NULL CHECK (role IN ('owner', 'member')),
  joined_ms BIGINT NOT NULL,
  PRIMARY KEY (share_id, member)
);
CREATE INDEX share_members_member ON share_members (member);
CREATE INDEX share_members_account ON share_members (account_id);

-- Single-use invitations by the SHA-256 of the token (the token itself is never stored).
CREATE TABLE share_invites (
  token_sha256 TEXT PRIMARY KEY,
  share_id TEXT NOT NULL REFERENCES shares (id) ON DELETE CASCADE,
  invited_by TEXT NOT NULL,
  expires_ms BIGINT NOT NULL,
  used_by TEXT
);

-- Connected cloud accounts: OAuth tokens encrypted (AES-256-GCM, the mirror's CredentialVault
-- format), so every instance needs the same shares.key.
CREATE TABLE provider_accounts (
  account_id TEXT PRIMARY KEY,
  owner TEXT NOT NULL,
  provider TEXT NOT NULL,
  key_id TEXT NOT NULL,
  iv BYTEA NOT NULL,
  ciphertext BYTEA NOT NULL,
  tag BYTEA NOT NULL,
  label TEXT NOT NULL DEFAULT '',
  connected_ms BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX provider_accounts_owner ON provider_accounts (owner);
