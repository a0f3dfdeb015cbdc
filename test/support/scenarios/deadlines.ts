import { eventually, politeCall, waitForMission } from '../api-client';
import { openEventStream } from '../event-stream-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';
import { ensureUser, userToken as userTokenFor } from '../user-token';

/**
 * Approvals that fit real teams, through the gateway: deadlines (`expiresIn`, `onExpiry`,
 * `hit.expired`) and assignees (only the named users decide; `assignedTo=me`).
 */
export function describeDeadlineAndAssigneeScenarios(context: ScenarioContext): void {
  // Every request goes politely (a 429 is asked again after its Retry-After): these scenarios share
  // their tenant's budget with the others, and a 429 must not stand in for the answer under test.
  const gateway = (): string => context.deployment.gatewayUrl;

  const userToken = (tenant: Tenant, username: string): Promise<string> => userTokenFor(context.deployment, tenant, username);

  async function submitApproval(tenant: Tenant, approval: Record<string, unknown>): Promise<{ missionId: string; hitId: string }> {
    const submitted = await politeCall(gateway(), 'POST', '/api/missions', {
      token: tenant.token,
      body: { title: 'Needs the right human', objective: 'Decide in time', steps: [{ type: 'approval', title: 'Go?', ...approval }] },
    });
    expect(submitted.status).toBe(202);
    const missionId = submitted.body.id as string;
    const hitId = await eventually(async () => {
      const mission = await politeCall(gateway(), 'GET', `/api/missions/${missionId}`, { token: tenant.token });
      expect(mission.status).toBe(200);
      return mission.body.steps[0].hitId as string | undefined;
    }, `the item of mission ${missionId}`);
    return { missionId, hitId };
  }

  async function pendingIds(token: string, query = ''): Promise<string[]> {
    const page = await politeCall(gateway(), 'GET', `/api/hit?limit=100${query}`, { token });
    expect(page.status).toBe(200);
    return page.body.items.map((item: { id: string }) => item.id);
  }

  describe('approval deadlines', () => {
    it('expires an undecided item at its deadline: the mission ends rejected, hit.expired is pushed, a late decision is 409', async () => {
      const { tenantA } = context;
      const stream = await openEventStream(gateway(), '/api/events?types=hit.expired,mission.completed', { token: tenantA.token });
      try {
        expect(stream.status).toBe(200);
        const { missionId, hitId } = await submitApproval(tenantA, { expiresIn: 2 });
        const item = await politeCall(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token });
        expect(item.body.status).toBe('pending');
        expect(Date.parse(item.body.expiresAt) - Date.parse(item.body.createdAt)).toBe(2_000);

        const ended = await waitForMission(gateway(), tenantA.token, missionId);
        expect(ended.status).toBe('rejected');
        expect(ended.steps[0]).toMatchObject({ status: 'failed', output: { hitId, decision: 'expired' } });
        // Expired within a second or so of its deadline (the sweep runs twice a second).
        expect(Date.parse(ended.completedAt) - Date.parse(item.body.expiresAt)).toBeLessThan(3_000);
        expect(Date.parse(ended.completedAt)).toBeGreaterThanOrEqual(Date.parse(item.body.expiresAt));

        const expired = await politeCall(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token });
        expect(expired.body.status).toBe('expired');
        expect(await pendingIds(tenantA.token)).not.toContain(hitId);
        expectProblem(await politeCall(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token, body: {} }), 409, 'conflict');

        const pushed = await stream.waitFor((events) => events.some((event) => event.event === 'hit.expired' && event.data.data.hitId === hitId));
        expect(pushed.filter((event) => event.event === 'hit.expired' && event.data.data.hitId === hitId)).toHaveLength(1);
        expect(pushed.find((event) => event.event === 'hit.expired' && event.data.data.hitId === hitId)?.data.data).toEqual({ hitId, missionId });
      } finally {
        stream.close();
      }
    });

    it('fails the mission with approval_expired when its step says onExpiry "fail"', async () => {
      const { tenantA } = context;
      const { missionId, hitId } = await submitApproval(tenantA, { expiresIn: 1, onExpiry: 'fail' });
      const ended = await waitForMission(gateway(), tenantA.token, missionId);
      expect(ended.status).toBe('failed');
      expect(ended.error).toMatchObject({ code: 'approval_expired' });
      expect(ended.steps[0]).toMatchObject({ status: 'failed', output: { hitId, decision: 'expired' } });
    });

    it('lets a decision made before the deadline stand', async () => {
      const { tenantA } = context;
      const { missionId, hitId } = await submitApproval(tenantA, { expiresIn: 3_600 });
      const approved = await politeCall(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token, body: { comment: 'in time' } });
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({ status: 'approved', comment: 'in time', expiresAt: expect.any(String) });
      expect((await waitForMission(gateway(), tenantA.token, missionId)).status).toBe('succeeded');
    });

    it('refuses a deadline or an onExpiry out of range, naming the field', async () => {
      const { tenantA } = context;
      for (const approval of [{ expiresIn: 0 }, { expiresIn: 2_592_001 }, { expiresIn: 1.5 }, { expiresIn: '60' }, { onExpiry: 'ignore' }, { onExpiry: 'fail' }]) {
        const refused = await politeCall(gateway(), 'POST', '/api/missions', {
          token: tenantA.token,
          body: { title: 't', objective: 'o', steps: [{ type: 'approval', title: 'Go?', ...approval }] },
        });
        expectProblem(refused, 400, 'validation_failed');
        expect(refused.body.errors.map((error: { field: string }) => error.field).join(' ')).toMatch(/steps\.0\.(expiresIn|onExpiry)/);
      }
    });
  });

  describe('assignees', () => {
    beforeAll(async () => {
      for (const name of ['ada', 'bob']) await ensureUser(gateway(), context.adminToken, context.tenantA.id, name);
      await ensureUser(gateway(), context.adminToken, context.tenantB.id, 'ada');
    });

    it('lets only the assigned users decide: another user, and any machine client, get 403 not_an_assignee', async () => {
      const { tenantA } = context;
      const { missionId, hitId } = await submitApproval(tenantA, { assignees: ['Ada', 'bob'] });
      const [ada, carol] = await Promise.all([userToken(tenantA, 'ada'), userToken(tenantA, 'carol')]);

      const item = await politeCall(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token });
      expect(item.body.assignees).toEqual(['ada', 'bob']);
      expectProblem(await politeCall(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token, body: {} }), 403, 'not_an_assignee');
      expectProblem(await politeCall(gateway(), 'POST', `/api/hit/${hitId}/reject`, { token: carol, body: {} }), 403, 'not_an_assignee');
      expect((await politeCall(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token })).body.status).toBe('pending');

      const approved = await politeCall(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: ada, body: { comment: 'Mine to decide' } });
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({ status: 'approved', comment: 'Mine to decide' });
      expect((await waitForMission(gateway(), tenantA.token, missionId)).status).toBe('succeeded');
    });

    it('lists with assignedTo=me the items assigned to the calling user only; a machine client has none to list (403)', async () => {
      const { tenantA, tenantB } = context;
      const { hitId: adas } = await submitApproval(tenantA, { assignees: ['ada'] });
      const { hitId: bobs } = await submitApproval(tenantA, { assignees: ['bob'] });
      const { hitId: anyones } = await submitApproval(tenantA, {});
      const { hitId: otherTenants } = await submitApproval(tenantB, { assignees: ['ada'] });
      const ada = await userToken(tenantA, 'ADA');

      const mine = await pendingIds(ada, '&assignedTo=me');
      expect(mine).toContain(adas);
      for (const id of [bobs, anyones, otherTenants]) expect(mine).not.toContain(id);
      // Without the filter, every pending item of the tenant, each showing its assignees.
      expect(await pendingIds(ada)).toEqual(expect.arrayContaining([adas, bobs, anyones]));
      expectProblem(await politeCall(gateway(), 'GET', '/api/hit?assignedTo=me', { token: tenantA.token }), 403, 'not_an_assignee');
      expectProblem(await politeCall(gateway(), 'GET', '/api/hit?assignedTo=someone', { token: ada }), 400, 'validation_failed');
    });

    it('refuses assignees the tenant has no user of, or whose user may not approve, naming each step and name', async () => {
      const { tenantA, tenantB } = context;
      await ensureUser(gateway(), context.adminToken, tenantB.id, 'only-in-b');
      await ensureUser(gateway(), context.adminToken, tenantA.id, 'watcher', ['hits:read']);
      const refused = await politeCall(gateway(), 'POST', '/api/missions', {
        token: tenantA.token,
        body: {
          title: 't',
          objective: 'o',
          steps: [
            { type: 'approval', title: 'First', assignees: ['ada', 'nobody'] },
            { type: 'approval', title: 'Second', assignees: ['only-in-b', 'Watcher'] },
          ],
        },
      });
      expectProblem(refused, 400, 'validation_failed');
      expect(refused.body.errors).toEqual([
        { field: 'steps.0.assignees', message: 'the tenant has no user "nobody"' },
        { field: 'steps.1.assignees', message: 'the tenant has no user "only-in-b"' },
        { field: 'steps.1.assignees', message: 'the user "watcher" may not decide approvals (no hits:approve scope)' },
      ]);
    });

    it('refuses assignees that are not 1 to 20 distinct usernames', async () => {
      const { tenantA } = context;
      const many = Array.from({ length: 21 }, (_, index) => `user${index}`);
      for (const assignees of [[], many, ['ada', 'ADA'], ['not a name'], 'ada']) {
        const refused = await politeCall(gateway(), 'POST', '/api/missions', {
          token: tenantA.token,
          body: { title: 't', objective: 'o', steps: [{ type: 'approval', title: 'Go?', assignees }] },
        });
        expectProblem(refused, 400, 'validation_failed');
        expect(JSON.stringify(refused.body.errors)).toContain('steps.0.assignees');
      }
    });
  });
}
