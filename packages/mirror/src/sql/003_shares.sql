-- Share management: shares, their members (each with one replica), invitations, and the
-- members' provider credentials, encrypted at rest (see vault.ts).

CREATE TABLE shares (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL,
  owner      TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);

CREATE TABLE share_members (
  share_id   TEXT NOT NULL REFERENCES shares (id) ON DELETE CASCADE,
  member     TEXT NOT NULL,
  -- The replica: which provider account and which folder in it.
  provider   TEXT NOT NULL,
  account_id TEXT NOT NULL,
  root       TEXT NOT NULL,
  role       TEXT NOT NULL CHECK (role IN ('owner', 'member')),
  joined_ms  INTEGER NOT NULL,
  PRIMARY KEY (share_id, member)
);

-- Only the SHA-256 of an invitation token is kept; the token itself goes to the invitee.
CREATE TABLE share_invites (
  token_sha256 TEXT PRIMARY KEY,
  share_id     TEXT NOT NULL REFERENCES shares (id) ON DELETE CASCADE,
  invited_by   TEXT NOT NULL,
  expires_ms   INTEGER NOT NULL,
  used_by      TEXT
);

-- Provider credentials (OAuth tokens) per connected account: AES-256-GCM, key from the
-- configuration; the account id is the additional authenticated data.
CREATE TABLE provider_accounts (
  account_id TEXT PRIMARY KEY,
  owner      TEXT NOT NULL,
  provider   TEXT NOT NULL,
  key_id     TEXT NOT NULL,
  iv         BLOB NOT NULL,
  ciphertext BLOB NOT NULL,
  tag        BLOB NOT NULL
);
