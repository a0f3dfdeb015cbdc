import { AclEntry, AclOperationTypes, AclPermissionTypes, AclResourceTypes, ResourcePatternTypes } from 'kafkajs';
import { aclKey } from './kafka-acls';
import { type AclAdmin, convergeAcls } from './kafka-setup';

const acl = (principal: string, resourceName: string, operation = AclOperationTypes.READ): AclEntry => ({
  resourceType: AclResourceTypes.TOPIC,
  resourceName,
  resourcePatternType: ResourcePatternTypes.LITERAL,
  principal: `User:${principal}`,
  host: '*',
  operation,
  permissionType: AclPermissionTypes.ALLOW,
});

/**
 * A broker whose writes are committed at once but enforced (and described) only after `lag`
 * further describe calls, as a KRaft broker replays the controller's records after answering.
 */
function laggingBroker(initial: AclEntry[], lag: number) {
  let enforced = new Map(initial.map((entry) => [aclKey(entry), entry]));
  let committed = new Map(enforced);
  let pendingFor = 0;
  const calls = { describe: 0, create: 0, delete: 0 };
  const admin: AclAdmin = {
    describeAcls: (async (filter: { principal: string }) => {
      calls.describe++;
      if (pendingFor > 0 && --pendingFor === 0) enforced = new Map(committed);
      const held = [...enforced.values()].filter((entry) => entry.principal === filter.principal);
      return {
        throttleTime: 0,
        errorCode: 0,
        resources: held.map(({ resourceType, resourceName, resourcePatternType, principal, host, operation, permissionType }) => ({
          resourceType,
          resourceName,
          resourcePatternType,
          acls: [{ principal, host, operation, permissionType }],
        })),
      };
    }) as unknown as AclAdmin['describeAcls'],
    createAcls: (async ({ acl: entries }: { acl: AclEntry[] }) => {
      calls.create++;
      committed = new Map([...committed, ...entries.map((entry) => [aclKey(entry), entry] as const)]);
      pendingFor = lag;
      return true;
    }) as unknown as AclAdmin['createAcls'],
    deleteAcls: (async ({ filters }: { filters: AclEntry[] }) => {
      calls.delete++;
      committed = new Map(committed);
      for (const entry of filters) committed.delete(aclKey(entry));
      pendingFor = lag;
      return { throttleTime: 0, filterResponses: [] };
    }) as unknown as AclAdmin['deleteAcls'],
  };
  return { admin, calls, enforced: () => [...enforced.keys()].sort() };
}

describe('convergeAcls', () => {
  const wanted = (principal: string) => [acl(principal, 'mission.requests.v1'), acl(principal, 'mission.events.v1', AclOperationTypes.WRITE)];

  it('returns only once the broker enforces what it wrote', async () => {
    const broker = laggingBroker([acl('brain-service', 'old.topic')], 4);
    const result = await convergeAcls(broker.admin, ['brain-service'], wanted, { pollMs: 1 });
    expect(result).toEqual({ aclsCreated: 2, aclsDeleted: 1 });
    expect(broker.enforced()).toEqual(wanted('brain-service').map(aclKey).sort());
    expect(broker.calls.describe).toBeGreaterThan(1);
  });

  it('asks once per principal and does not wait when nothing changes', async () => {
    const broker = laggingBroker([...wanted('a'), ...wanted('b')], 4);
    expect(await convergeAcls(broker.admin, ['a', 'b'], wanted, { pollMs: 1 })).toEqual({ aclsCreated: 0, aclsDeleted: 0 });
    expect(broker.calls).toEqual({ describe: 2, create: 0, delete: 0 });
  });

  it('fails with what to do when the broker never shows them', async () => {
    const broker = laggingBroker([], Number.MAX_SAFE_INTEGER);
    await expect(convergeAcls(broker.admin, ['hit-service'], wanted, { timeoutMs: 30, pollMs: 1 })).rejects.toThrow(
      "The broker does not show hit-service's ACLs as set 30 ms after they were written; run the setup again",
    );
  });

  it('does not wait longer than its bound for a broker that stops answering', async () => {
    const broker = laggingBroker([], 1);
    let describes = 0;
    const describeAcls = broker.admin.describeAcls;
    const admin: AclAdmin = {
      ...broker.admin,
      // The first describe (before writing) answers; the ones that check the result never do.
      describeAcls: ((filter: Parameters<AclAdmin['describeAcls']>[0]) => (describes++ === 0 ? describeAcls(filter) : new Promise(() => undefined))) as AclAdmin['describeAcls'],
    };
    await expect(convergeAcls(admin, ['hit-service'], wanted, { timeoutMs: 50, pollMs: 1 })).rejects.toThrow('50 ms after they were written');
  });
});
