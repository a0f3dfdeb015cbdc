import { randomBytes } from 'node:crypto';
import { Client } from 'pg';

export interface TestDatabase {
  readonly url: string;
  drop(): Promise<void>;
}

/** Creates a fresh, uniquely named database on the server of `adminUrl`, so test runs never share data. */
export async function createTestDatabase(adminUrl: string, prefix = 'ms_test'): Promise<TestDatabase> {
  const name = `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new Client({ connectionString: adminUrl });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/**
 * Whether a message is a probe that tries whether a statement prepares (see pipelinedTransaction):
 * probes go on connections of their own whenever a statement is new, so tests that count a
 * transaction's messages leave them out.
 */
export function isPreparationProbe(message: string): boolean {
  return message.startsWith('PREPARE mission_probe AS ');
}

/**
 * A regular expression's source for a statement starting with `start` (itself a source) in a
 * message: inlined, or as the EXECUTE of its prepared form, prepared in the same message or in an
 * earlier one.
 */
export function sentStatement(start: string): string {
  return `(?:${start}|(?:PREPARE mission_[0-9a-f]{32} AS ${start}[^;]*;\\n)?EXECUTE mission_[0-9a-f]{32}(?:\\([^;]*\\))?)`;
}
