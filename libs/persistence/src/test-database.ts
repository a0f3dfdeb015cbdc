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
