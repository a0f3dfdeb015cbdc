import { randomUUID } from 'node:crypto';
import { call, clientCredentialsToken, eventually, politeCall, waitForMission } from '../api-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';

/** Human approvals, cancellation, listing and idempotent submission, through the gateway. */
export function describeApprovalScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;

  async function submit(tenant: Tenant, body: Record<string, unknown>, headers: Record<string, string> = {}) {
    return call(gateway(), 'POST', '/api/missions', { token: tenant.token, body, headers });
  }

  async function awaitingApproval(tenant: Tenant, missionId: string): Promise<any> {
    return eventually(async () => {
      const mission = await politeCall(gateway(), 'GET', `/api/missions/${missionId}`, { token: tenant.token });
      expect(mission.status).toBe(200);
      if (['succeeded', 'failed', 'rejected', 'cancelled'].includes(mission.body.status)) throw new Error(`Mission ended ${mission.body.status} instead of waiting`);
      return mission.body.status === 'awaiting_approval' ? mission.body : undefined;
    }, `mission ${missionId} to await approval`);
  }

  async function missionWaitingFor(tenant: Tenant, title = 'Ship it?'): Promise<{ missionId: string; hitId: string }> {
    const submitted = await submit(tenant, {
      title: 'Needs a human',
      objective: 'Decide',
      steps: [
        { type: 'brain.query', query: 'before' },
        { type: 'approval', title, description: 'Check the numbers' },
        { type: 'brain.query', query: 'after' },
      ],
    });
    expect(submitted.status).toBe(202);
    const waiting = await awaitingApproval(tenant, submitted.body.id);
    expect(waiting.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'running', 'pending']);
    expect(waiting.steps[1].hitId).toEqual(expect.any(String));
    return { missionId: submitted.body.id, hitId: waiting.steps[1].hitId };
  }

  async function pendingIds(tenant: Tenant): Promise<string[]> {
    const ids: string[] = [];
    let cursor: string | null = null;
    do {
      const page: any = await politeCall(gateway(), 'GET', `/api/hit?limit=100${cursor ? `&cursor=${cursor}` : ''}`, { token: tenant.token });
      expect(page.status).toBe(200);
      ids.push(...page.body.items.map((item: { id: string }) => item.id));
      cursor = page.body.nextCursor;
    } while (cursor);
    return ids;
  }

  describe('human approvals', () => {
    it('parks a mission on its approval step, lists the item, and resumes it to success on approval', async () => {
      const { tenantA } = context;
      const { missionId, hitId } = await missionWaitingFor(tenantA);

      const item = await call(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token });
      expect(item.status).toBe(200);
      expect(item.body).toMatchObject({ id: hitId, missionId, title: 'Ship it?', description: 'Check the numbers', status: 'pending' });
      expect(await pendingIds(tenantA)).toContain(hitId);

      const approved = await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token, body: { comment: 'Looks right' } });
      expect(approved.status).toBe(200);
      expect(approved.body).toMatchObject({ id: hitId, status: 'approved', decidedBy: tenantA.clientId, comment: 'Looks right' });
      expect(Date.parse(approved.body.decidedAt)).not.toBeNaN();

      const done = await waitForMission(gateway(), tenantA.token, missionId);
      expect(done.status).toBe('succeeded');
      expect(done.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'succeeded', 'succeeded']);
      expect(done.steps[1].output).toEqual({ hitId, decision: 'approved', decidedBy: tenantA.clientId, comment: 'Looks right' });
      expect(done.result.steps).toHaveLength(3);
      expect(done.result.steps[1]).toEqual(done.steps[1].output);
      expect(await pendingIds(tenantA)).not.toContain(hitId);
    });

    it('ends the mission rejected when the item is rejected, skipping the later steps', async () => {
      const { tenantA } = context;
      const { missionId, hitId } = await missionWaitingFor(tenantA);
      const rejected = await call(gateway(), 'POST', `/api/hit/${hitId}/reject`, { token: tenantA.token });
      expect(rejected.status).toBe(200);
      expect(rejected.body).toMatchObject({ status: 'rejected', decidedBy: tenantA.clientId });
      const done = await waitForMission(gateway(), tenantA.token, missionId);
      expect(done.status).toBe('rejected');
      expect(done.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'failed', 'skipped']);
      expect(done.steps[1].output).toEqual({ hitId, decision: 'rejected', decidedBy: tenantA.clientId });
      expect(done.result).toBeUndefined();
    });

    it('decides an item once: a second decision is 409', async () => {
      const { tenantA } = context;
      const { hitId } = await missionWaitingFor(tenantA);
      // The body is optional, also as an empty body declared JSON (as many HTTP clients send it).
      expect((await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token, rawBody: '' })).status).toBe(200);
      expectProblem(await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token }), 409, 'conflict');
      expectProblem(await call(gateway(), 'POST', `/api/hit/${hitId}/reject`, { token: tenantA.token }), 409, 'conflict');
    });

    it('lets exactly one of several concurrent approvals win', async () => {
      const { tenantA } = context;
      const { missionId, hitId } = await missionWaitingFor(tenantA);
      const responses = await Promise.all(Array.from({ length: 6 }, () => call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token })));
      expect(responses.map((r) => r.status).sort()).toEqual([200, 409, 409, 409, 409, 409]);
      const done = await waitForMission(gateway(), tenantA.token, missionId);
      expect(done.status).toBe('succeeded');
    });

    it('cancels a waiting mission and takes its item off the pending list', async () => {
      const { tenantA } = context;
      const { missionId, hitId } = await missionWaitingFor(tenantA);
      const cancelled = await call(gateway(), 'POST', `/api/missions/${missionId}/cancel`, { token: tenantA.token });
      expect(cancelled.status).toBe(200);
      expect(cancelled.body).toMatchObject({ id: missionId, status: 'cancelled', completedAt: expect.any(String) });
      expect(cancelled.body.steps.map((s: { status: string }) => s.status)).toEqual(['succeeded', 'skipped', 'skipped']);
      await eventually(async () => ((await pendingIds(tenantA)).includes(hitId) ? undefined : true), 'the item to leave the pending list');
      expect((await call(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token })).body.status).toBe('cancelled');
      expectProblem(await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token }), 409, 'conflict');
      expectProblem(await call(gateway(), 'POST', `/api/missions/${missionId}/cancel`, { token: tenantA.token }), 409, 'conflict');
    });

    it('refuses to cancel a mission that already finished', async () => {
      const { tenantA } = context;
      const submitted = await submit(tenantA, { title: 'Quick', objective: 'O' });
      await waitForMission(gateway(), tenantA.token, submitted.body.id);
      expectProblem(await call(gateway(), 'POST', `/api/missions/${submitted.body.id}/cancel`, { token: tenantA.token }), 409, 'conflict');
    });

    it('keeps items and missions of one tenant invisible and untouchable to another', async () => {
      const { tenantA, tenantB } = context;
      const { missionId, hitId } = await missionWaitingFor(tenantA);
      expectProblem(await call(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantB.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantB.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'POST', `/api/missions/${missionId}/cancel`, { token: tenantB.token }), 404, 'not_found');
      expect(await pendingIds(tenantB)).not.toContain(hitId);
      const listedByB = await call(gateway(), 'GET', '/api/missions?limit=100', { token: tenantB.token });
      expect(listedByB.body.items.map((m: { id: string }) => m.id)).not.toContain(missionId);
      expect((await call(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token })).body.status).toBe('pending');
    });

    it('needs hits:approve to decide and hits:read to list', async () => {
      const { tenantA } = context;
      const { hitId } = await missionWaitingFor(tenantA);
      const readOnly = await clientCredentialsToken(context.deployment.issuer, tenantA.clientId, tenantA.clientSecret, 'hits:read missions:read');
      const refused = await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: readOnly.access_token });
      expectProblem(refused, 403, 'insufficient_scope');
      expect(refused.headers.get('www-authenticate')).toContain('scope="hits:approve"');
      const noHits = await clientCredentialsToken(context.deployment.issuer, tenantA.clientId, tenantA.clientSecret, 'missions:read');
      expectProblem(await call(gateway(), 'GET', '/api/hit', { token: noHits.access_token }), 403, 'insufficient_scope');
    });

    it('validates decisions: comments are bounded and unknown fields refused', async () => {
      const { tenantA } = context;
      const { hitId } = await missionWaitingFor(tenantA);
      const long = await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token, body: { comment: 'x'.repeat(2_001) } });
      expectProblem(long, 400, 'validation_failed');
      const extra = await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenantA.token, body: { verdict: 'yes' } });
      expectProblem(extra, 400, 'validation_failed');
      expect((await call(gateway(), 'GET', `/api/hit/${hitId}`, { token: tenantA.token })).body.status).toBe('pending');
    });
  });

  describe('decisions racing each other and a cancel', () => {
    // A tenant of its own, with a budget these bursts and the polls cannot exhaust: a 429 would
    // stand in for the 409 under test.
    let racer: Tenant;
    const FINAL = ['succeeded', 'failed', 'rejected', 'cancelled'];

    beforeAll(async () => {
      const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name: 'Racer', tier: 'enterprise', rpm: 60_000 } });
      expect(created.status).toBe(201);
      const { clientId, clientSecret } = created.body.client;
      racer = { id: created.body.id, clientId, clientSecret, token: (await clientCredentialsToken(context.deployment.issuer, clientId, clientSecret)).access_token };
    }, 60_000);

    const decide = (hitId: string, decision: 'approve' | 'reject') => call(gateway(), 'POST', `/api/hit/${hitId}/${decision}`, { token: racer.token });
    const cancel = (missionId: string) => call(gateway(), 'POST', `/api/missions/${missionId}/cancel`, { token: racer.token });
    const read = async (path: string): Promise<any> => {
      const response = await politeCall(gateway(), 'GET', path, { token: racer.token });
      expect(response.status).toBe(200);
      return response.body;
    };

    /**
     * Reads the missions until `settleMs` after each one's item has left `pending` (its decision
     * then travels to mission-service), and fails if any of them changes once final: a decision
     * that reaches a mission after its cancel must not revive or re-end it.
     */
    async function settled(missions: ReadonlyArray<{ missionId: string; hitId: string }>, settleMs = 2_000): Promise<any[]> {
      await eventually(async () => {
        const items = await Promise.all(missions.map(({ hitId }) => read(`/api/hit/${hitId}`)));
        return items.every((item) => item.status !== 'pending') ? true : undefined;
      }, 'the items to be decided or cancelled');
      const firstFinal = new Map<string, any>();
      const until = Date.now() + settleMs;
      for (;;) {
        for (const { missionId } of missions) {
          const mission = await read(`/api/missions/${missionId}`);
          const first = firstFinal.get(missionId);
          if (first) expect(mission).toEqual(first);
          else if (FINAL.includes(mission.status)) firstFinal.set(missionId, mission);
        }
        if (Date.now() > until && firstFinal.size === missions.length) break;
        if (Date.now() > until + 30_000)
          throw new Error(
            `Missions not final: ${missions
              .filter(({ missionId }) => !firstFinal.has(missionId))
              .map(({ missionId }) => missionId)
              .join(', ')}`,
          );
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      return missions.map(({ missionId }) => firstFinal.get(missionId));
    }

    it('lets exactly one of an approval and a rejection of the same item win, and ends the mission as the winner decided', async () => {
      const waiting = await Promise.all([0, 1, 2].map(() => missionWaitingFor(racer)));
      // Both at once; the order they are sent in alternates.
      const answers = await Promise.all(
        waiting.map(async ({ hitId }, n) => {
          const [approve, reject] =
            n % 2 === 0
              ? await Promise.all([decide(hitId, 'approve'), decide(hitId, 'reject')])
              : (await Promise.all([decide(hitId, 'reject'), decide(hitId, 'approve')])).reverse();
          return { approve: approve!, reject: reject! };
        }),
      );
      const finals = await settled(waiting);
      for (const [n, { approve, reject }] of answers.entries()) {
        expect([approve.status, reject.status].sort()).toEqual([200, 409]);
        const [winner, loser] = approve.status === 200 ? [approve, reject] : [reject, approve];
        expectProblem(loser, 409, 'conflict');
        const decision = winner === approve ? 'approved' : 'rejected';
        const { hitId } = waiting[n]!;
        expect(winner.body).toMatchObject({ id: hitId, status: decision });
        expect(await read(`/api/hit/${hitId}`)).toMatchObject({ status: decision, decidedAt: winner.body.decidedAt });
        const mission = finals[n];
        expect(mission.status).toBe(decision === 'approved' ? 'succeeded' : 'rejected');
        expect(mission.steps[1].output).toEqual({ hitId, decision, decidedBy: racer.clientId });
        expect(mission.steps.map((step: { status: string }) => step.status)).toEqual(
          decision === 'approved' ? ['succeeded', 'succeeded', 'succeeded'] : ['succeeded', 'failed', 'skipped'],
        );
      }
    });

    it('settles an approval racing a cancel one way: a mission cancelled stays cancelled, one that is not ran to success', async () => {
      const waiting = await Promise.all([0, 1, 2, 3].map(() => missionWaitingFor(racer)));
      const answers = await Promise.all(
        waiting.map(async ({ missionId, hitId }, n) => {
          if (n < 2) {
            // At the same moment.
            const [approved, cancelled] = await Promise.all([decide(hitId, 'approve'), cancel(missionId)]);
            return { approved, cancelled };
          }
          // The cancel first, the approval right after it: it reaches hit-service before or after
          // the cancel closes the item there, so its decision may reach the mission after the cancel.
          const cancelled = await cancel(missionId);
          const approved = await decide(hitId, 'approve');
          return { approved, cancelled };
        }),
      );
      const finals = await settled(waiting);
      // Which way each race went (all are correct): whether a decision met an already cancelled mission is luck.
      process.stdout.write(
        `race report (approve vs cancel): ${JSON.stringify(answers.map(({ approved, cancelled }, n) => [approved.status, cancelled.status, finals[n].status]))}\n`,
      );
      for (const [n, { approved, cancelled }] of answers.entries()) {
        const mission = finals[n];
        const item = await read(`/api/hit/${waiting[n]!.hitId}`);
        expect([approved.status, cancelled.status]).toContain(200);
        for (const refused of [approved, cancelled].filter((response) => response.status !== 200)) expectProblem(refused, 409, 'conflict');
        // The item is what its own answer said: approved, or closed by the cancel.
        expect(item.status).toBe(approved.status === 200 ? 'approved' : 'cancelled');
        if (cancelled.status === 200) {
          // The cancel won the mission, whenever the approval reached it.
          expect(cancelled.body.status).toBe('cancelled');
          expect(mission).toMatchObject({ status: 'cancelled', completedAt: cancelled.body.completedAt });
          expect(mission.result).toBeUndefined();
          expect(mission.steps[2].status).toBe('skipped');
        } else {
          // Cancelled too late: the approval had already run the mission to its end.
          expect(approved.status).toBe(200);
          expect(mission.status).toBe('succeeded');
        }
      }
    });
  });

  describe('listing', () => {
    let tenantC: Tenant;
    const missionIds: string[] = [];

    beforeAll(async () => {
      const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name: 'Tenant C', tier: 'business' } });
      const { clientId, clientSecret } = created.body.client;
      tenantC = { id: created.body.id, clientId, clientSecret, token: (await clientCredentialsToken(context.deployment.issuer, clientId, clientSecret)).access_token };
      // One at a time, so the items' creation order (the list's order) is the submission order.
      for (let n = 0; n < 7; n++) {
        const submitted = await submit(tenantC, { title: `Approval ${n}`, objective: 'O', steps: [{ type: 'approval', title: `Decide ${n}` }] });
        missionIds.push(submitted.body.id);
        await awaitingApproval(tenantC, submitted.body.id);
      }
    }, 60_000);

    it('pages through pending items oldest first, each exactly once', async () => {
      const seen: any[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const page: any = await call(gateway(), 'GET', `/api/hit?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, { token: tenantC.token });
        expect(page.status).toBe(200);
        expect(page.body.items.length).toBeLessThanOrEqual(3);
        seen.push(...page.body.items);
        cursor = page.body.nextCursor;
        pages++;
      } while (cursor);
      expect(pages).toBe(3);
      expect(seen.map((item) => item.missionId)).toEqual(missionIds);
      expect(seen.map((item) => item.title)).toEqual(missionIds.map((_, n) => `Decide ${n}`));
      expect(new Set(seen.map((item) => item.id)).size).toBe(7);
      expect(seen.every((item) => item.status === 'pending')).toBe(true);
    });

    it('lists missions newest first, filtered by status, in pages that cover each once', async () => {
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: any = await call(gateway(), 'GET', `/api/missions?status=awaiting_approval&limit=2${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`, {
          token: tenantC.token,
        });
        expect(page.status).toBe(200);
        seen.push(...page.body.items.map((m: { id: string; status: string }) => m.id));
        cursor = page.body.nextCursor;
      } while (cursor);
      expect(seen).toEqual([...missionIds].reverse());
      const succeeded = await call(gateway(), 'GET', '/api/missions?status=succeeded', { token: tenantC.token });
      expect(succeeded.body).toEqual({ items: [], nextCursor: null });
    });

    it.each([
      ['/api/hit?limit=0', 'limit'],
      ['/api/hit?limit=101', 'limit'],
      ['/api/hit?cursor=not-a-cursor', 'cursor'],
      ['/api/missions?status=done', 'status'],
      ['/api/missions?sort=asc', 'sort'],
    ])('answers %s with 400 naming %s', async (path, field) => {
      const response = await call(gateway(), 'GET', path, { token: tenantC.token });
      expectProblem(response, 400, 'validation_failed');
      expect(response.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });
  });

  describe('idempotent submission', () => {
    it('returns the same mission for a repeat and refuses the key for another body', async () => {
      const { tenantA } = context;
      const key = `order-${randomUUID()}`;
      const body = { title: 'Once only', objective: 'O', metadata: { a: '1', b: '2' } };
      const first = await submit(tenantA, body, { 'idempotency-key': key });
      const again = await submit(tenantA, { metadata: { b: '2', a: '1' }, objective: 'O', title: 'Once only' }, { 'idempotency-key': key });
      expect(first.status).toBe(202);
      expect(again.status).toBe(202);
      expect(again.body.id).toBe(first.body.id);
      expect(again.headers.get('location')).toBe(`/api/missions/${first.body.id}`);
      expectProblem(await submit(tenantA, { ...body, title: 'Something else' }, { 'idempotency-key': key }), 422, 'idempotency_key_reused');
      // A body that validation would normalise to the same mission is still a different body.
      expectProblem(await submit(tenantA, { ...body, title: '  Once only  ' }, { 'idempotency-key': key }), 422, 'idempotency_key_reused');
      // Keys belong to a tenant: the same key elsewhere is a new mission.
      const other = await submit(context.tenantB, body, { 'idempotency-key': key });
      expect(other.status).toBe(202);
      expect(other.body.id).not.toBe(first.body.id);
    });

    it('creates one mission for concurrent requests under one key; the others get it or 409', async () => {
      const { tenantA } = context;
      const key = `burst-${randomUUID()}`;
      const responses = await Promise.all(Array.from({ length: 8 }, () => submit(tenantA, { title: 'Burst', objective: 'O' }, { 'idempotency-key': key })));
      const accepted = responses.filter((r) => r.status === 202);
      expect(accepted.length).toBeGreaterThan(0);
      expect(new Set(accepted.map((r) => r.body.id)).size).toBe(1);
      for (const refused of responses.filter((r) => r.status !== 202)) expectProblem(refused, 409, 'conflict');
    });

    it('refuses a malformed Idempotency-Key', async () => {
      const response = await submit(context.tenantA, { title: 'T', objective: 'O' }, { 'idempotency-key': 'has space' });
      expectProblem(response, 400, 'validation_failed');
    });
  });

  describe('mission validation', () => {
    it.each([
      ['an empty step list', { steps: [] }, 'steps'],
      ['an unknown step type', { steps: [{ type: 'shell' }] }, 'steps.0.type'],
      ['an approval without a title', { steps: [{ type: 'approval' }] }, 'steps.0.title'],
      ['more than 20 steps', { steps: Array.from({ length: 21 }, () => ({ type: 'brain.query' })) }, 'steps'],
    ])('refuses %s with 400', async (_label, extra, field) => {
      const response = await submit(context.tenantA, { title: 'T', objective: 'O', ...extra });
      expectProblem(response, 400, 'validation_failed');
      expect(response.body.errors.map((e: { field: string }) => e.field)).toContain(field);
    });
  });
}
