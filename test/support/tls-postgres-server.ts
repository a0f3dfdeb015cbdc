/**
 * A PostgreSQL of its own that accepts only TLS connections, for the TLS integration tests, run
 * as its own process:
 *
 *   PG_TLS_DIR=… PG_TLS_PORT=… PG_TLS_CERT=… PG_TLS_KEY=… PG_TLS_PASSWORD=… \
 *     node -r ./tools/register.cjs test/support/tls-postgres-server.ts
 *
 * Prints "ready" once it accepts connections; SIGTERM stops PostgreSQL and exits.
 */
import { chmod, chown, copyFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { startPostgresCluster } from '@mission/persistence';

async function main(): Promise<void> {
  const { PG_TLS_DIR: dir, PG_TLS_PORT: port, PG_TLS_CERT: certFile, PG_TLS_KEY: keyFile, PG_TLS_PASSWORD: password } = process.env;
  if (!dir || !port || !certFile || !keyFile || !password) throw new Error('PG_TLS_DIR, PG_TLS_PORT, PG_TLS_CERT, PG_TLS_KEY and PG_TLS_PASSWORD are required');
  await chmod(dir, 0o755);
  const postgres = await startPostgresCluster({
    directory: path.join(dir, 'data'),
    port: Number(port),
    user: 'mission',
    password,
    flags: ['-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'ssl=on', '-c', 'ssl_min_protocol_version=TLSv1.2'],
    log: (message) => process.stderr.write(`${message}\n`),
    afterInitialise: async (dataDir, account) => {
      await copyFile(certFile, path.join(dataDir, 'server.crt'));
      await copyFile(keyFile, path.join(dataDir, 'server.key'));
      await chmod(path.join(dataDir, 'server.key'), 0o600);
      // TLS or nothing.
      await writeFile(path.join(dataDir, 'pg_hba.conf'), 'hostssl all all 127.0.0.1/32 scram-sha-256\nhostnossl all all 0.0.0.0/0 reject\n');
      // The server's account must own its key.
      if (account) for (const file of ['server.crt', 'server.key', 'pg_hba.conf']) await chown(path.join(dataDir, file), account.uid, account.gid);
    },
  });
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
