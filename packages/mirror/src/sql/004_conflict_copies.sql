-- The conflicted-copy name given to each log entry's version: every target where that
-- entry conflicts writes the same name, and no two entries ever share one.
CREATE TABLE conflict_copies (
  share_id TEXT NOT NULL,
  copy     TEXT NOT NULL,
  seq      INTEGER NOT NULL,
  PRIMARY KEY (share_id, copy)
);
CREATE INDEX conflict_copies_seq ON conflict_copies (share_id, seq);
