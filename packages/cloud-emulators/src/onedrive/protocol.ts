/**
 * The OneDrive emulator's protocol pieces, free of server state: options, constants, name
 * rules, Graph's error body, the upload session record and the request body schemas.
 */
import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { HttpError, type EmulatorOptions } from '../http.ts';

export interface OneDriveEmulatorOptions extends EmulatorOptions {
  /** TLS is required (the Graph SDK only talks https). */
  readonly tls: { readonly cert: string | Buffer; readonly key: string | Buffer };
  /** Largest simple upload (PUT …/content). Default 250 MB, as documented. */
  readonly maxSimpleUploadBytes?: number;
  /** Children per page when the caller gives no $top. Default 200. */
  readonly defaultPageSize?: number;
  /**
   * Each refresh answers a new refresh token and revokes the one redeemed (Microsoft
   * identity rotates them; revoking at once is the strict case). Default: kept valid.
   */
  readonly rotateRefreshTokens?: boolean;
}

export const FRAGMENT = 320 * 1024;
export const DRIVE_ID = 'b!emulatordrive';
export const ROOT_ID = 'EMULATOR!ROOT';
export const INVALID_NAME = /["*:<>?/\\|]/;
export const RESERVED = /^(\.lock|con|prn|aux|nul|com\d|lpt\d|desktop\.ini|_vti_)$/i;

export function graphError(
  status: number,
  code: string,
  message: string,
  headers: Record<string, string> = {},
): HttpError {
  return new HttpError(
    status,
    {
      error: {
        code,
        message,
        innerError: {
          date: new Date().toISOString().slice(0, 19),
          'request-id': randomUUID(),
          'client-request-id': randomUUID(),
        },
      },
    },
    headers,
  );
}

export const notFound = (): HttpError => graphError(404, 'itemNotFound', 'Item not found');

export interface UploadSession {
  id: string;
  parentId: string;
  name: string;
  /** Existing item being replaced, when known at creation. */
  conflict: 'fail' | 'replace' | 'rename';
  ifMatch?: string;
  chunks: Buffer[];
  received: number;
  total?: number;
  expires: number;
}

export const ItemPatch = z
  .object({
    name: z.string().optional(),
    parentReference: z
      .object({ id: z.string().optional(), path: z.string().optional() })
      .partial()
      .optional(),
    fileSystemInfo: z.object({ lastModifiedDateTime: z.string().optional() }).partial().optional(),
    '@microsoft.graph.conflictBehavior': z.enum(['fail', 'replace', 'rename']).optional(),
  })
  .passthrough();

export const NewFolder = z
  .object({
    name: z.string().min(1),
    folder: z.object({}).passthrough(),
    '@microsoft.graph.conflictBehavior': z.enum(['fail', 'replace', 'rename']).optional(),
  })
  .passthrough();

export const SessionBody = z
  .object({
    item: z
      .object({
        '@microsoft.graph.conflictBehavior': z.enum(['fail', 'replace', 'rename']).optional(),
        name: z.string().optional(),
        fileSystemInfo: z.object({ lastModifiedDateTime: z.string().optional() }).partial().optional(),
      })
      .passthrough()
      .optional(),
    deferCommit: z.boolean().optional(),
  })
  .passthrough();

export function decodeURIComponentSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw graphError(400, 'invalidRequest', 'Malformed URL');
  }
}
