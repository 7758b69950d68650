-- Version 7: every table STRICT. The tables of 001–005 were created without it, so SQLite
-- would keep a value of the wrong type (a text in an INTEGER column) instead of refusing it.
-- Each is rebuilt the usual way — create the STRICT table under a new name, copy every row
-- (named columns: 005 added two columns to provider_accounts at the end), drop the old,
-- rename — and its indexes are made again. Rows keep their values, AUTOINCREMENT counters
-- included (sqlite_sequence is keyed by name and survives the rename). The runner turns
-- foreign keys off around this file, so dropping `shares` cascades nothing.

CREATE TABLE replica_cursor_v7 (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  cursor     TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id)
) STRICT;
INSERT INTO replica_cursor_v7 (share_id, replica_id, cursor)
  SELECT share_id, replica_id, cursor FROM replica_cursor;
DROP TABLE replica_cursor;
ALTER TABLE replica_cursor_v7 RENAME TO replica_cursor;

CREATE TABLE known_v7 (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  path       TEXT NOT NULL,
  kind       TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  revision   TEXT NOT NULL,
  sha256     TEXT NOT NULL,
  PRIMARY KEY (share_id, replica_id, path)
) STRICT;
INSERT INTO known_v7 (share_id, replica_id, path, kind, revision, sha256)
  SELECT share_id, replica_id, path, kind, revision, sha256 FROM known;
DROP TABLE known;
ALTER TABLE known_v7 RENAME TO known;

CREATE TABLE head_v7 (
  share_id TEXT NOT NULL,
  path     TEXT NOT NULL,
  kind     TEXT NOT NULL CHECK (kind IN ('file', 'dir')),
  sha256   TEXT NOT NULL,
  PRIMARY KEY (share_id, path)
) STRICT;
INSERT INTO head_v7 (share_id, path, kind, sha256) SELECT share_id, path, kind, sha256 FROM head;
DROP TABLE head;
ALTER TABLE head_v7 RENAME TO head;

CREATE TABLE log_v7 (
  seq          INTEGER PRIMARY KEY AUTOINCREMENT,
  share_id     TEXT NOT NULL,
  origin       TEXT NOT NULL,
  op           TEXT NOT NULL,
  data         BLOB,
  done_targets TEXT NOT NULL DEFAULT '[]',
  done         INTEGER NOT NULL DEFAULT 0,
  created_ms   INTEGER NOT NULL
) STRICT;
INSERT INTO log_v7 (seq, share_id, origin, op, data, done_targets, done, created_ms)
  SELECT seq, share_id, origin, op, data, done_targets, done, created_ms FROM log;
-- The next seq continues after the highest ever given, as before (rows may have been pruned).
UPDATE sqlite_sequence SET seq = (SELECT seq FROM sqlite_sequence WHERE name = 'log')
  WHERE name = 'log_v7' AND EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'log');
INSERT INTO sqlite_sequence (name, seq)
  SELECT 'log_v7', seq FROM sqlite_sequence
  WHERE name = 'log' AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'log_v7');
DROP TABLE log;
ALTER TABLE log_v7 RENAME TO log;
CREATE INDEX log_pending ON log (share_id, done, seq);

CREATE TABLE touched_v7 (
  share_id   TEXT NOT NULL,
  replica_id TEXT NOT NULL,
  path       TEXT NOT NULL,
  seq        INTEGER NOT NULL,
  PRIMARY KEY (share_id, replica_id, path)
) STRICT;
INSERT INTO touched_v7 (share_id, replica_id, path, seq)
  SELECT share_id, replica_id, path, seq FROM touched;
DROP TABLE touched;
ALTER TABLE touched_v7 RENAME TO touched;

CREATE TABLE shares_v7 (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  owner      TEXT NOT NULL,
  created_ms INTEGER NOT NULL
) STRICT;
INSERT INTO shares_v7 (id, name, owner, created_ms) SELECT id, name, owner, created_ms FROM shares;

CREATE TABLE share_members_v7 (
  share_id   TEXT NOT NULL REFERENCES shares (id) ON DELETE CASCADE,
  member     TEXT NOT NULL,
  provider   TEXT NOT NULL,
  account_id TEXT NOT NULL,
  root       TEXT NOT NULL,
  role       TEXT NOT NULL CHECK (role IN ('owner', 'member')),
  joined_ms  INTEGER NOT NULL,
  PRIMARY KEY (share_id, member)
) STRICT;
INSERT INTO share_members_v7 (share_id, member, provider, account_id, root, role, joined_ms)
  SELECT share_id, member, provider, account_id, root, role, joined_ms FROM share_members;

CREATE TABLE share_invites_v7 (
  token_sha256 TEXT PRIMARY KEY,
  share_id     TEXT NOT NULL REFERENCES shares (id) ON DELETE CASCADE,
  invited_by   TEXT NOT NULL,
  expires_ms   INTEGER NOT NULL,
  used_by      TEXT
) STRICT;
INSERT INTO share_invites_v7 (token_sha256, share_id, invited_by, expires_ms, used_by)
  SELECT token_sha256, share_id, invited_by, expires_ms, used_by FROM share_invites;

-- The members and invites refer to `shares` by name: the old tables go first, then the new
-- ones take the names, so each reference ends up on the rebuilt `shares`.
DROP TABLE share_members;
DROP TABLE share_invites;
DROP TABLE shares;
ALTER TABLE shares_v7 RENAME TO shares;
ALTER TABLE share_members_v7 RENAME TO share_members;
ALTER TABLE share_invites_v7 RENAME TO share_invites;

CREATE TABLE provider_accounts_v7 (
  account_id   TEXT PRIMARY KEY,
  owner        TEXT NOT NULL,
  provider     TEXT NOT NULL,
  key_id       TEXT NOT NULL,
  iv           BLOB NOT NULL,
  ciphertext   BLOB NOT NULL,
  tag          BLOB NOT NULL,
  label        TEXT NOT NULL DEFAULT '',
  connected_ms INTEGER NOT NULL DEFAULT 0
) STRICT;
INSERT INTO provider_accounts_v7
  (account_id, owner, provider, key_id, iv, ciphertext, tag, label, connected_ms)
  SELECT account_id, owner, provider, key_id, iv, ciphertext, tag, label, connected_ms
  FROM provider_accounts;
DROP TABLE provider_accounts;
ALTER TABLE provider_accounts_v7 RENAME TO provider_accounts;

CREATE TABLE conflict_copies_v7 (
  share_id TEXT NOT NULL,
  copy     TEXT NOT NULL,
  seq      INTEGER NOT NULL,
  PRIMARY KEY (share_id, copy)
) STRICT;
INSERT INTO conflict_copies_v7 (share_id, copy, seq) SELECT share_id, copy, seq FROM conflict_copies;
DROP TABLE conflict_copies;
ALTER TABLE conflict_copies_v7 RENAME TO conflict_copies;
CREATE INDEX conflict_copies_seq ON conflict_copies (share_id, seq);
