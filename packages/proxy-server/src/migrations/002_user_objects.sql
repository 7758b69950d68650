-- Version 2: which users have held which object. A delta upload may name as its base any
-- content the user held (the object is kept through the grace period), and dedup commits
-- may link it, without letting a user probe for content only another user holds.
CREATE TABLE user_objects (
  user_id TEXT NOT NULL,
  sha256 TEXT NOT NULL,
  last_linked_ms INTEGER NOT NULL,
  PRIMARY KEY (user_id, sha256)
) STRICT, WITHOUT ROWID;

INSERT OR IGNORE INTO user_objects (user_id, sha256, last_linked_ms)
  SELECT user_id, sha256, 0 FROM entries WHERE tier = 'large' AND sha256 IS NOT NULL;
