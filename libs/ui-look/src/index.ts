import { readFileSync } from 'node:fs';
import path from 'node:path';

let cached: string | undefined;

/** The shared stylesheet (`look.css`), for pages that carry their style inline (the identity provider's). */
export function lookCss(): string {
  cached ??= readFileSync(path.join(__dirname, 'look.css'), 'utf8');
  return cached;
}
