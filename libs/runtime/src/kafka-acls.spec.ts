import { AclOperationTypes, AclResourceTypes, ResourcePatternTypes } from 'kafkajs';
import { ConsumerGroups, Topics } from '@mission/contracts';
import { aclKey, busAcls, BUS_PRINCIPALS, busRole, deadLetterTopics, STANDALONE_PRINCIPAL } from './kafka-acls';
import { setupTopics } from './kafka-setup';

const allows = (principal: string, resourceType: AclResourceTypes, name: string, operation: AclOperationTypes): boolean =>
  busAcls(principal).some(
    (acl) =>
      acl.resourceType === resourceType &&
      acl.operation === operation &&
      (acl.resourcePatternType === ResourcePatternTypes.LITERAL ? acl.resourceName === name : name.startsWith(acl.resourceName)),
  );

describe('Kafka ACLs of the platform', () => {
  it('lets only the gateway write operator requests, and only the owner publish its events', () => {
    const writers = (topic: string) => BUS_PRINCIPALS.filter((principal) => allows(principal, AclResourceTypes.TOPIC, topic, AclOperationTypes.WRITE));
    expect(writers(Topics.identityRequests)).toEqual(['gateway']);
    expect(writers(Topics.missionEvents)).toEqual(['mission-service']);
    expect(writers(Topics.hitEvents)).toEqual(['hit-service']);
    expect(writers(Topics.missionRequests)).toEqual(['gateway']);
    expect(writers(Topics.missionStepResults).sort()).toEqual(['brain-service', 'hit-service']);
  });

  it('gives each consumer group to one service, and reading a topic only to the services that consume it', () => {
    for (const declared of Object.values(ConsumerGroups)) {
      // A broadcast group is read as `<group>.<instance id>`.
      const group = declared === ConsumerGroups.gatewayEvents ? `${declared}.pod-1` : declared;
      expect([group, BUS_PRINCIPALS.filter((principal) => allows(principal, AclResourceTypes.GROUP, group, AclOperationTypes.READ))]).toEqual([group, [expect.any(String)]]);
    }
    expect(allows('gateway', AclResourceTypes.GROUP, 'gateway-events.pod-1', AclOperationTypes.READ)).toBe(true);
    expect(allows('gateway', AclResourceTypes.GROUP, 'gateway-events', AclOperationTypes.READ)).toBe(false);
    expect(BUS_PRINCIPALS.filter((principal) => allows(principal, AclResourceTypes.TOPIC, Topics.notifyEvents, AclOperationTypes.READ))).toEqual(['gateway']);
    expect(BUS_PRINCIPALS.filter((principal) => allows(principal, AclResourceTypes.TOPIC, Topics.notifyEvents, AclOperationTypes.WRITE))).toEqual(['notification-service']);
    expect(BUS_PRINCIPALS.filter((principal) => allows(principal, AclResourceTypes.TOPIC, Topics.identityRequests, AclOperationTypes.READ))).toEqual(['idp']);
    expect(BUS_PRINCIPALS.filter((principal) => allows(principal, AclResourceTypes.TOPIC, Topics.missionEvents, AclOperationTypes.READ)).sort()).toEqual([
      'hit-service',
      'mission-service',
      'notification-service',
    ]);
  });

  it("keeps replies to their requester: a service reads and creates only its own, and servers may answer anyone's", () => {
    expect(allows('gateway', AclResourceTypes.TOPIC, 'replies.gateway.pod-1', AclOperationTypes.READ)).toBe(true);
    expect(allows('gateway', AclResourceTypes.TOPIC, 'replies.gateway.pod-1', AclOperationTypes.CREATE)).toBe(true);
    expect(allows('gateway', AclResourceTypes.GROUP, 'replies.gateway.pod-1', AclOperationTypes.READ)).toBe(true);
    // The trailing dot of the prefix: "gateway-evil" is not "gateway".
    expect(allows('gateway', AclResourceTypes.TOPIC, 'replies.gateway-evil.pod-1', AclOperationTypes.READ)).toBe(false);
    expect(allows('brain-service', AclResourceTypes.TOPIC, 'replies.gateway.pod-1', AclOperationTypes.READ)).toBe(false);
    expect(allows('brain-service', AclResourceTypes.TOPIC, 'replies.gateway.pod-1', AclOperationTypes.WRITE)).toBe(true);
    // The gateway serves no requests: it answers nobody.
    expect(allows('gateway', AclResourceTypes.TOPIC, 'replies.idp.pod-1', AclOperationTypes.WRITE)).toBe(false);
  });

  it('lets no service create, delete or alter anything but its own reply topics and groups, nor act on the cluster', () => {
    for (const acl of [...BUS_PRINCIPALS, STANDALONE_PRINCIPAL].flatMap((principal) => busAcls(principal))) {
      if ([AclOperationTypes.CREATE, AclOperationTypes.DELETE].includes(acl.operation)) {
        expect(acl.resourcePatternType).toBe(ResourcePatternTypes.PREFIXED);
        // Its reply topics and groups, and (deleted when an instance stops) its broadcast groups.
        const own = [`replies.${acl.principal.replace(/^User:/, '')}.`, ...(acl.resourceType === AclResourceTypes.GROUP ? [`${ConsumerGroups.gatewayEvents}.`] : [])];
        expect(own).toContain(acl.resourceName);
        if (acl.resourceName === `${ConsumerGroups.gatewayEvents}.`) expect(['User:gateway', 'User:standalone']).toContain(acl.principal);
      }
      expect([AclOperationTypes.ALL, AclOperationTypes.ALTER, AclOperationTypes.ALTER_CONFIGS, AclOperationTypes.CLUSTER_ACTION]).not.toContain(acl.operation);
      expect(acl.resourceType).not.toBe(AclResourceTypes.CLUSTER);
      expect(acl.resourceName).not.toBe('*');
    }
  });

  it('lets the all-in-one process do what every service does, and lists each ACL once', () => {
    const standalone = new Set(busAcls(STANDALONE_PRINCIPAL).map((acl) => aclKey({ ...acl, principal: '' }).replace(/replies\.standalone\./, 'replies.OWN.')));
    for (const principal of BUS_PRINCIPALS) {
      for (const acl of busAcls(principal)) {
        expect(standalone).toContain(aclKey({ ...acl, principal: '' }).replace(`replies.${principal}.`, 'replies.OWN.'));
      }
      const keys = busAcls(principal).map(aclKey);
      expect(new Set(keys).size).toBe(keys.length);
    }
    expect(() => busRole('intruder')).toThrow(/No bus role/);
  });

  it('sets up every platform topic and a dead-letter topic for each consumed one, with its partitions', () => {
    const topics = setupTopics();
    expect(topics.map((topic) => topic.name)).toEqual(expect.arrayContaining([...Object.values(Topics), ...deadLetterTopics()]));
    expect(topics.find((topic) => topic.name === `${Topics.missionEvents}.dlq`)?.partitions).toBe(topics.find((topic) => topic.name === Topics.missionEvents)?.partitions);
    expect(deadLetterTopics()).toContain(`${Topics.identityRequests}.dlq`);
    expect(deadLetterTopics()).not.toContain(`${Topics.missionStepResults}.dlq.dlq`);
  });
});
