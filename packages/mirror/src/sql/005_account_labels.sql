-- How a user recognises a connected account (e.g. its e-mail address) and when it was
-- connected: shown by the share API, never the credentials themselves.
ALTER TABLE provider_accounts ADD COLUMN label TEXT NOT NULL DEFAULT '';
ALTER TABLE provider_accounts ADD COLUMN connected_ms INTEGER NOT NULL DEFAULT 0;
