/**
 * Shared folders in the words the desktop UI shows: a share's state, each member's replica
 * availability ("unavailable since 14:02 — account full; 37 changes waiting").
 */
import type { Share } from '@weft/ui-contract';
import type { ReplicaAvailability, ShareInfo } from '@weft/wire/shares';

const STATE_WORDS: Record<ShareInfo['status']['state'], string> = {
  seeding: 'Copying files to the new member',
  syncing: 'Syncing',
  idle: 'Up to date',
  error: 'Problem (retrying)',
};

const CAUSE_WORDS: Record<NonNullable<ReplicaAvailability['cause']>, string> = {
  full: 'account full',
  unauthorised: 'access revoked or expired — connect the account again',
  failing: 'the service is failing',
};

/** A time as people read it: "14:02" today, else "2026-11-21 14:02" (local time). */
function sinceText(ms: number, nowMs: number): string {
  const d = new Date(ms);
  const two = (n: number): string => String(n).padStart(2, '0');
  const hm = `${two(d.getHours())}:${two(d.getMinutes())}`;
  if (new Date(nowMs).toDateString() === d.toDateString()) return hm;
  return `${d.getFullYear()}-${two(d.getMonth() + 1)}-${two(d.getDate())} ${hm}`;
}

/** A member's replica in words: "unavailable since 14:02 — account full; 37 changes waiting". */
export function availabilityText(a: ReplicaAvailability, nowMs = Date.now()): string {
  const waiting = `${a.waiting} ${a.waiting === 1 ? 'change' : 'changes'} waiting`;
  if (a.state === 'available') return a.waiting > 0 ? `available; ${waiting}` : 'available';
  const since = a.sinceMs !== undefined ? ` since ${sinceText(a.sinceMs, nowMs)}` : '';
  const why = a.cause ? ` — ${CAUSE_WORDS[a.cause]}` : '';
  return `unavailable${since}${why}; ${waiting}`;
}

export function toShare(info: ShareInfo, me: string, nowMs = Date.now()): Share {
  const mine = info.members.find((m) => m.member === me);
  return {
    id: info.id,
    name: info.name,
    role: info.role,
    ...(mine ? { cloud: mine.cloud } : {}),
    ...(mine?.root !== undefined ? { folder: mine.root } : {}),
    members: info.members.map((m) => ({
      name: m.member,
      cloud: m.cloud,
      role: m.role,
      you: m.member === me,
      ...(m.replica
        ? {
            availability: {
              state: m.replica.state,
              ...(m.replica.cause ? { cause: m.replica.cause } : {}),
              ...(m.replica.sinceMs !== undefined ? { sinceMs: m.replica.sinceMs } : {}),
              waiting: m.replica.waiting,
              summary: availabilityText(m.replica, nowMs),
              ...(m.replica.error !== undefined ? { detail: m.replica.error } : {}),
            },
          }
        : {}),
    })),
    state: STATE_WORDS[info.status.state],
    ...(info.status.lastError ? { error: info.status.lastError } : {}),
  };
}
