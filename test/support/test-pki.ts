import { execFileSync } from 'node:child_process';
import { chmod, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';

/** A throwaway certificate authority and one server certificate it signed, as PEM files. */
export interface TestPki {
  readonly dir: string;
  /** The CA certificate: what clients trust. */
  readonly caFile: string;
  /** The server's certificate (for 127.0.0.1 and localhost) and its private key (PKCS#8). */
  readonly certFile: string;
  readonly keyFile: string;
  /** Key and certificate chain in one file: a PEM "keystore" as Kafka reads it. */
  readonly keystoreFile: string;
  /** A CA nobody here trusts, and a certificate it signed for the same names. */
  readonly otherCaFile: string;
  remove(): Promise<void>;
}

function openssl(args: readonly string[], cwd: string): void {
  execFileSync('openssl', args, { cwd, stdio: 'pipe' });
}

function issue(dir: string, name: string, caName: string): void {
  openssl(['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', '/CN=127.0.0.1'], dir);
  openssl(
    ['x509', '-req', '-in', `${name}.csr`, '-CA', `${caName}.pem`, '-CAkey', `${caName}.key`, '-CAcreateserial', '-out', `${name}.pem`, '-days', '2', '-extfile', 'server.ext'],
    dir,
  );
}

/**
 * Makes a CA and a server certificate with openssl (EC P-256, valid two days) in a fresh
 * directory: the TLS tests run every hop against real TLS servers with these.
 */
export async function createTestPki(): Promise<TestPki> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'mission-pki-'));
  // Servers that run as another user (PostgreSQL started by root) must be able to read the directory.
  await chmod(dir, 0o755);
  await writeFile(
    path.join(dir, 'server.ext'),
    'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n',
  );
  for (const ca of ['ca', 'other-ca']) {
    openssl(
      [
        'req',
        '-x509',
        '-new',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-keyout',
        `${ca}.key`,
        '-out',
        `${ca}.pem`,
        '-days',
        '2',
        '-subj',
        `/CN=Mission Service test ${ca}`,
      ],
      dir,
    );
  }
  issue(dir, 'server', 'ca');
  const [key, cert] = await Promise.all([readFile(path.join(dir, 'server.key'), 'utf8'), readFile(path.join(dir, 'server.pem'), 'utf8')]);
  await writeFile(path.join(dir, 'keystore.pem'), `${key}${cert}`);
  return {
    dir,
    caFile: path.join(dir, 'ca.pem'),
    certFile: path.join(dir, 'server.pem'),
    keyFile: path.join(dir, 'server.key'),
    keystoreFile: path.join(dir, 'keystore.pem'),
    otherCaFile: path.join(dir, 'other-ca.pem'),
    remove: () => rm(dir, { recursive: true, force: true }),
  };
}
