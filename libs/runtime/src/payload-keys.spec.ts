import { randomBytes } from 'node:crypto';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '@mission/config';
import { z } from 'zod';
import { PayloadKeySettings, resolvePayloadKeys } from './payload-keys';

const key = () => randomBytes(32).toString('base64url');

describe('payload key configuration', () => {
  let dir: string;
  beforeEach(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'payload-keys-'));
  });
  afterEach(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  const schema = z.object(PayloadKeySettings);

  it('validates KEK and KEK_PREVIOUS without echoing them', () => {
    expect(() => loadConfig(schema, { KEK: 'too-short' })).toThrow('KEK: must be base64url of 32 bytes');
    expect(() => loadConfig(schema, { KEK: key(), KEK_PREVIOUS: `${key()},nope` })).toThrow('KEK_PREVIOUS: must be a comma-separated list');
    const secret = 'not-base64url!';
    let message = '';
    try {
      loadConfig(schema, { KEK: secret });
    } catch (error) {
      message = (error as Error).message;
    }
    expect(message).toContain('KEK');
    expect(message).not.toContain(secret);
    expect(loadConfig(schema, { KEK: key(), KEK_PREVIOUS: `${key()}, ${key()}` }).KEK_PREVIOUS).toHaveLength(2);
  });

  it('takes the KEK from KEK or from KEK_FILE, and the same key gives the same KEK id', async () => {
    const kek = key();
    const file = path.join(dir, 'kek');
    await writeFile(file, `${kek}\n`);
    const fromValue = await resolvePayloadKeys({ KEK: kek, KEK_PREVIOUS: [] });
    const fromFile = await resolvePayloadKeys({ KEK_FILE: file, KEK_PREVIOUS: [] });
    expect(fromFile.provider.currentKekId).toBe(fromValue.provider.currentKekId);
    expect(fromValue.generatedFile).toBeUndefined();
  });

  it('refuses both at once, a missing file, a bad file, and none at all for a separate process', async () => {
    await expect(resolvePayloadKeys({ KEK: key(), KEK_FILE: '/x', KEK_PREVIOUS: [] })).rejects.toThrow('set one of them, not both');
    await expect(resolvePayloadKeys({ KEK_FILE: path.join(dir, 'missing'), KEK_PREVIOUS: [] })).rejects.toThrow('KEK_FILE: cannot be read (ENOENT)');
    await writeFile(path.join(dir, 'bad'), 'short');
    await expect(resolvePayloadKeys({ KEK_FILE: path.join(dir, 'bad'), KEK_PREVIOUS: [] })).rejects.toThrow('KEK_FILE: must hold base64url of 32 bytes');
    await expect(resolvePayloadKeys({ KEK_PREVIOUS: [] })).rejects.toThrow('KEK: required');
  });

  it('generates the embedded KEK once, owner-only, and keeps using it', async () => {
    const first = await resolvePayloadKeys({ KEK_PREVIOUS: [] }, { generateIn: dir });
    expect(first.generatedFile).toBe(path.join(dir, 'payload-kek.json'));
    expect((await stat(path.join(dir, 'payload-kek.json'))).mode & 0o777).toBe(0o600);
    const second = await resolvePayloadKeys({ KEK_PREVIOUS: [] }, { generateIn: dir });
    expect(second.generatedFile).toBeUndefined();
    expect(second.provider.currentKekId).toBe(first.provider.currentKekId);
    expect(JSON.parse(await readFile(path.join(dir, 'payload-kek.json'), 'utf8')).kek).toHaveLength(43);
  });
});
