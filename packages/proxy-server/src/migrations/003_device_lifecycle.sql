-- Version 3: devices can be listed and revoked, invites expire.
--
-- A revoked device keeps its row (with `revoked_ms`) so that its token is answered with
-- 401 DEVICE_REVOKED rather than a bare "unknown token"; revoked devices are not listed.
-- `last_seen_ms` is the last authenticated request or feed connection (written at most
-- once a minute per device).
ALTER TABLE devices ADD COLUMN last_seen_ms INTEGER;
ALTER TABLE devices ADD COLUMN revoked_ms INTEGER;

CREATE INDEX devices_user ON devices (user_id);

-- An invite is refused after `expires_ms`. Invites made before this version had no expiry:
-- they get the default lifetime (7 days) from their creation.
ALTER TABLE invites ADD COLUMN expires_ms INTEGER NOT NULL DEFAULT 0;
UPDATE invites SET expires_ms = created_ms + 7 * 24 * 3600 * 1000;
