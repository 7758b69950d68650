/**
 * A user's devices (docs/formats/api.md "Devices"): list them, revoke one. A revoked
 * device's token is refused at once (401 DEVICE_REVOKED: the store is read on every
 * request, nothing is cached) and its open WebSockets (change feed, block stream) are
 * closed as the revocation is recorded. A device may revoke itself (signing out) or any
 * other device of its user; another user's device gets the same 404 as an unknown one.
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod/v4';
import { DeviceIdParam, DeviceListResponse, type FeedServerMessage } from '@weft/wire';
import type { AuthContext } from '../auth.ts';
import { ApiError } from '../errors.ts';
import type { MetadataStore } from '../store/metadata.ts';

/** WebSocket close code sent to a revoked device's sockets (4000–4999: application codes). */
export const CLOSE_DEVICE_REVOKED = 4401;

/** How often a device's `last_seen_ms` is written at most. */
const SEEN_EVERY_MS = 60_000;

interface ClosableSocket {
  readonly readyState: number;
  readonly OPEN: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  once(event: 'close', listener: () => void): unknown;
}

/** The open WebSockets of each device, and when each device was last seen. */
export class DeviceSessions {
  private readonly sockets = new Map<string, Set<ClosableSocket>>();
  private readonly seenAt = new Map<string, number>();
  /** Revoked in this run: a socket upgraded just before the revocation is closed on arrival. */
  private readonly revoked = new Set<string>();

  constructor(private readonly meta: MetadataStore) {}

  /**
   * Keep `socket` until it closes, so a revocation can close it. False (and the socket is
   * closed) when the device was revoked while the socket was being opened.
   */
  track(deviceId: string, socket: ClosableSocket): boolean {
    if (this.revoked.has(deviceId)) {
      closeRevoked(socket);
      return false;
    }
    let set = this.sockets.get(deviceId);
    if (!set) this.sockets.set(deviceId, (set = new Set()));
    set.add(socket);
    socket.once('close', () => {
      set.delete(socket);
      if (set.size === 0 && this.sockets.get(deviceId) === set) this.sockets.delete(deviceId);
    });
    return true;
  }

  /** Open sockets of a device (for tests and metrics). */
  openSockets(deviceId: string): number {
    return this.sockets.get(deviceId)?.size ?? 0;
  }

  /** A sign of life: written to the store at most once a minute per device. */
  async seen(deviceId: string, nowMs: number): Promise<void> {
    const last = this.seenAt.get(deviceId);
    if (last !== undefined && nowMs - last < SEEN_EVERY_MS) return;
    this.seenAt.set(deviceId, nowMs);
    await this.meta.touchDevice(deviceId, nowMs);
  }

  /** Tell the device's sockets why, then close them. */
  closeDevice(deviceId: string): void {
    const set = this.sockets.get(deviceId);
    this.sockets.delete(deviceId);
    this.seenAt.delete(deviceId);
    this.revoked.add(deviceId);
    for (const s of set ?? []) closeRevoked(s);
  }
}

function closeRevoked(s: ClosableSocket): void {
  const message: FeedServerMessage = {
    type: 'error',
    error: { code: 'DEVICE_REVOKED', message: 'this device was removed from its account' },
  };
  try {
    if (s.readyState === s.OPEN) s.send(JSON.stringify(message));
    s.close(CLOSE_DEVICE_REVOKED, 'device revoked');
  } catch {
    /* already closing */
  }
}

export interface DeviceRouteDoc {
  method: string;
  url: string;
  summary: string;
  auth: 'device';
  response?: z.ZodType;
}

export interface DeviceRouteContext {
  route(doc: DeviceRouteDoc, handler: (req: FastifyRequest, reply: FastifyReply) => Promise<unknown>): void;
  auth(req: FastifyRequest): AuthContext;
  parse<T extends z.ZodType>(schema: T, data: unknown): z.infer<T>;
}

export function registerDeviceRoutes(
  ctx: DeviceRouteContext,
  meta: MetadataStore,
  sessions: DeviceSessions,
  now: () => number = Date.now,
): void {
  const { route, auth, parse } = ctx;

  route(
    {
      method: 'GET',
      url: '/v1/devices',
      summary: "The caller's user's devices (current: the calling one)",
      auth: 'device',
      response: DeviceListResponse,
    },
    async (req) => {
      const a = auth(req);
      return {
        devices: (await meta.listDevices(a.userId)).map((d) => ({
          id: d.id,
          name: d.name,
          createdMs: d.createdMs,
          lastSeenMs: d.lastSeenMs,
          current: d.id === a.deviceId,
        })),
      };
    },
  );

  route(
    {
      method: 'DELETE',
      url: '/v1/devices/:id',
      summary: "Revoke one of the caller's user's devices (the caller itself: sign out)",
      auth: 'device',
    },
    async (req, reply) => {
      const a = auth(req);
      const { id } = parse(DeviceIdParam, req.params);
      // Another user's device is answered exactly as an unknown one.
      if (!(await meta.revokeDevice(a.userId, id, now()))) throw new ApiError('NOT_FOUND', 'no such device');
      sessions.closeDevice(id);
      req.log.info({ user: a.userId, device: id, by: a.deviceId }, 'device revoked');
      return reply.code(204).send();
    },
  );
}
