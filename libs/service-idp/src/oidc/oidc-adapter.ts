import type { Adapter, AdapterConstructor, AdapterPayload } from 'oidc-provider';
import { ClientDirectory } from './client-directory';
import { ExpiringStore } from './expiring-store';

/** Enough for the few short-lived artefacts a single node keeps (JWT access tokens are not stored). */
export const DEFAULT_MAX_STORED_ARTEFACTS = 10_000;

/**
 * oidc-provider's storage: clients come from the ClientDirectory (read-only: registration is off),
 * every other model lives in one bounded in-memory store, keyed by model name.
 */
export function createOidcAdapter(clients: ClientDirectory, store: ExpiringStore<AdapterPayload>): AdapterConstructor {
  return class OidcAdapter implements Adapter {
    private readonly prefix: string;

    constructor(private readonly model: string) {
      this.prefix = `${model}:`;
    }

    async upsert(id: string, payload: AdapterPayload, expiresIn?: number): Promise<void> {
      this.refuseClientWrites();
      store.set(this.prefix + id, structuredClone(payload), expiresIn);
    }

    async find(id: string): Promise<AdapterPayload | undefined> {
      if (this.model === 'Client') return clients.find(id) as Promise<AdapterPayload | undefined>;
      return this.copy(store.get(this.prefix + id));
    }

    async findByUid(uid: string): Promise<AdapterPayload | undefined> {
      return this.findWhere((payload) => payload.uid === uid);
    }

    async findByUserCode(userCode: string): Promise<AdapterPayload | undefined> {
      return this.findWhere((payload) => payload.userCode === userCode);
    }

    async consume(id: string): Promise<void> {
      this.refuseClientWrites();
      const payload = store.get(this.prefix + id);
      if (payload) payload.consumed = Math.floor(Date.now() / 1000);
    }

    async destroy(id: string): Promise<void> {
      this.refuseClientWrites();
      store.delete(this.prefix + id);
    }

    async revokeByGrantId(grantId: string): Promise<void> {
      for (const [key, payload] of store.entriesWithPrefix(this.prefix)) {
        if (payload.grantId === grantId) store.delete(key);
      }
    }

    private findWhere(matches: (payload: AdapterPayload) => boolean): AdapterPayload | undefined {
      for (const [, payload] of store.entriesWithPrefix(this.prefix)) {
        if (matches(payload)) return this.copy(payload);
      }
      return undefined;
    }

    private copy(payload: AdapterPayload | undefined): AdapterPayload | undefined {
      return payload === undefined ? undefined : structuredClone(payload);
    }

    private refuseClientWrites(): void {
      if (this.model === 'Client') throw new Error('Clients are provisioned through the identity service, not through the OIDC provider');
    }
  };
}
