/**
 * Generated icons (no binary files in the repository): one tray icon per state and the app
 * icon, drawn as simple discs and written as PNG with node:zlib.
 */
import * as fsp from 'node:fs/promises';
import * as nodePath from 'node:path';
import { crc32, deflateSync } from 'node:zlib';
import type { TrayIcon } from './common/tray-state.ts';

type Rgb = readonly [number, number, number];

export const TRAY_COLOURS: Record<TrayIcon, Rgb> = {
  'up-to-date': [20, 108, 46],
  syncing: [11, 87, 208],
  paused: [110, 110, 110],
  offline: [70, 70, 70],
  error: [179, 38, 30],
  conflict: [176, 96, 0],
};

function chunk(type: string, data: Buffer): Buffer {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(data.length);
  const body = Buffer.concat([Buffer.from(type, 'ascii'), data]);
  const crc = Buffer.alloc(4);
  crc.writeUInt32BE(crc32(body) >>> 0);
  return Buffer.concat([len, body, crc]);
}

/** RGBA pixels → PNG bytes. */
export function encodePng(width: number, height: number, rgba: Uint8Array): Buffer {
  const raw = Buffer.alloc((width * 4 + 1) * height);
  for (let y = 0; y < height; y++) {
    raw[y * (width * 4 + 1)] = 0;
    Buffer.from(rgba.buffer, rgba.byteOffset + y * width * 4, width * 4).copy(raw, y * (width * 4 + 1) + 1);
  }
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 6;
  return Buffer.concat([
    Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]),
    chunk('IHDR', ihdr),
    chunk('IDAT', deflateSync(raw)),
    chunk('IEND', Buffer.alloc(0)),
  ]);
}

/** A filled disc with a white mark: a ring (syncing), two bars (paused), a dot otherwise. */
export function drawIcon(size: number, colour: Rgb, mark: 'ring' | 'bars' | 'dot' | 'none'): Uint8Array {
  const px = new Uint8Array(size * size * 4);
  const c = (size - 1) / 2;
  const r = size / 2 - 0.5;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const d = Math.hypot(x - c, y - c);
      if (d > r) continue;
      let white = false;
      if (mark === 'ring') white = d > r * 0.45 && d < r * 0.65;
      if (mark === 'bars')
        white = Math.abs(y - c) < r * 0.45 && Math.abs(Math.abs(x - c) - r * 0.22) < r * 0.1;
      if (mark === 'dot') white = d < r * 0.25;
      const i = (y * size + x) * 4;
      px[i] = white ? 255 : colour[0];
      px[i + 1] = white ? 255 : colour[1];
      px[i + 2] = white ? 255 : colour[2];
      px[i + 3] = 255;
    }
  }
  return px;
}

const MARK: Record<TrayIcon, 'ring' | 'bars' | 'dot' | 'none'> = {
  'up-to-date': 'none',
  syncing: 'ring',
  paused: 'bars',
  offline: 'dot',
  error: 'dot',
  conflict: 'ring',
};

/** tray-<state>.png (32 px) into trayDir; 512x512.png (the app icon) into appIconDir. */
export async function writeIcons(trayDir: string, appIconDir: string): Promise<void> {
  await fsp.mkdir(trayDir, { recursive: true });
  await fsp.mkdir(appIconDir, { recursive: true });
  for (const [state, colour] of Object.entries(TRAY_COLOURS) as [TrayIcon, Rgb][]) {
    await fsp.writeFile(
      nodePath.join(trayDir, `tray-${state}.png`),
      encodePng(32, 32, drawIcon(32, colour, MARK[state])),
    );
  }
  await fsp.writeFile(
    nodePath.join(appIconDir, '512x512.png'),
    encodePng(512, 512, drawIcon(512, [11, 87, 208], 'ring')),
  );
}
