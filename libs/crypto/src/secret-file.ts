import { randomBytes } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';

const FILE_MODE = 0o600;
const DIRECTORY_MODE = 0o700;

export interface SecretFile<T> {
  readonly value: T;
  /** True when this call created the file (so the caller can announce it once). */
  readonly created: boolean;
}

/**
 * Reads a JSON secret kept on disk, or creates it with `generate` when it does not exist yet.
 * The file is owner-only (0600) and a looser mode left by hand is tightened; missing parent
 * directories are created owner-only. Creation goes through a temporary file and a hard link,
 * which fails if the target exists: two processes starting together never both write, and a
 * reader never sees a half-written file.
 */
export async function readOrCreateSecretFile<T>(file: string, parse: (raw: unknown) => T, generate: () => T | Promise<T>): Promise<SecretFile<T>> {
  await fs.mkdir(path.dirname(file), { recursive: true, mode: DIRECTORY_MODE });
  const existing = await readSecretFile(file, parse);
  if (existing !== undefined) return { value: existing, created: false };

  const value = await generate();
  const temporary = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  await fs.writeFile(temporary, `${JSON.stringify(value, null, 2)}\n`, { mode: FILE_MODE, flag: 'wx' });
  try {
    await fs.link(temporary, file);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    const winner = await readSecretFile(file, parse);
    if (winner === undefined) throw error;
    return { value: winner, created: false };
  } finally {
    await fs.rm(temporary, { force: true });
  }
  return { value, created: true };
}

/** A secret file's parsed content (its mode tightened to owner-only), or undefined when there is none. */
export async function readSecretFile<T>(file: string, parse: (raw: unknown) => T): Promise<T | undefined> {
  let text: string;
  try {
    text = await fs.readFile(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
  await tightenMode(file, FILE_MODE);
  try {
    return parse(JSON.parse(text));
  } catch (error) {
    throw new Error(`${file} is not a valid secret file (${error instanceof Error ? error.message : String(error)}); fix or remove it`);
  }
}

/** Creates `directory` if needed and makes it owner-only, for a directory that holds only our secrets. */
export async function ensurePrivateDirectory(directory: string): Promise<void> {
  await fs.mkdir(directory, { recursive: true, mode: DIRECTORY_MODE });
  await tightenMode(directory, DIRECTORY_MODE);
}

async function tightenMode(target: string, mode: number): Promise<void> {
  const stats = await fs.stat(target);
  if ((stats.mode & 0o777 & ~mode) !== 0) await fs.chmod(target, mode);
}
