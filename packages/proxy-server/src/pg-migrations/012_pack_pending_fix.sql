-- Version 12: a 17th row of pack_pending (slot 16) that no trigger writes, for the corrections
-- of store/pack-pending-reconcile.ts. The triggers of version 11 are exact one transaction at
-- a time, but two that commit at once — one adding a small file whose content the other packs
-- (or whose pack it removes) — can each miss the other's row under READ COMMITTED and leave
-- the sum one off. The reconcile recounts under a REPEATABLE READ snapshot and adds
-- (recount − sum under that snapshot) to this row in the same transaction: only reconciles
-- update it, so two at once conflict (a serialization failure) instead of both correcting.
ALTER TABLE pack_pending DROP CONSTRAINT pack_pending_slot_check;
ALTER TABLE pack_pending ADD CONSTRAINT pack_pending_slot_check CHECK (slot >= 0 AND slot <= 16);
INSERT INTO pack_pending (slot, n) VALUES (16, 0);
