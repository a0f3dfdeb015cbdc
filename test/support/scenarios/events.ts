import { call, clientCredentialsToken, waitForMission } from '../api-client';
import { openEventStream, type OpenStream, type ReceivedEvent } from '../event-stream-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';

const position = (id: string): number => Number(/^evt_(\d+)_[0-9a-f]{12}$/.exec(id)?.[1] ?? NaN);

/** The events of one mission a stream received, by type. */
const ofMission = (events: readonly ReceivedEvent[], missionId: string): ReceivedEvent[] => events.filter((event) => event.data.data.missionId === missionId);
const types = (events: readonly ReceivedEvent[]): string[] => events.map((event) => event.event);

/** The event stream (`GET /api/events`), through the gateway: pushed, resumable, scoped, isolated. */
export function describeEventScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;
  let tenant: Tenant;
  let other: Tenant;
  const open: OpenStream[] = [];

  async function createTenant(name: string): Promise<Tenant> {
    const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name, tier: 'business' } });
    expect(created.status).toBe(201);
    const { clientId, clientSecret } = created.body.client;
    return { id: created.body.id, token: (await clientCredentialsToken(context.deployment.issuer, clientId, clientSecret)).access_token, clientId, clientSecret };
  }

  async function tokenWith(scopes: string[]): Promise<string> {
    const client = await call(gateway(), 'POST', `/admin/tenants/${tenant.id}/clients`, { token: context.adminToken, body: { scopes } });
    expect(client.status).toBe(201);
    return (await clientCredentialsToken(context.deployment.issuer, client.body.clientId, client.body.clientSecret)).access_token;
  }

  async function stream(token: string, path = '/api/events', lastEventId?: string): Promise<OpenStream> {
    const opened = await openEventStream(gateway(), path, { token, ...(lastEventId === undefined ? {} : { lastEventId }) });
    open.push(opened);
    return opened;
  }

  async function submitApproval(token: string): Promise<string> {
    const submitted = await call(gateway(), 'POST', '/api/missions', {
      token,
      body: { title: 'Pushed, not polled', objective: 'Decide', steps: [{ type: 'approval', title: 'Go?' }] },
    });
    expect(submitted.status).toBe(202);
    return submitted.body.id as string;
  }

  describe('event stream', () => {
    beforeAll(async () => {
      tenant = await createTenant('Events');
      other = await createTenant('Events elsewhere');
    }, 60_000);

    afterEach(() => {
      for (const stream of open.splice(0)) stream.close();
    });

    it("pushes a mission's approval item and its outcome to an open stream, in the log's order, with ids and no content", async () => {
      const live = await stream(tenant.token);
      expect(live.status).toBe(200);
      expect(live.headers.get('content-type')).toBe('text/event-stream; charset=utf-8');
      expect(live.headers.get('cache-control')).toBe('no-store');
      expect(live.headers.get('x-request-id')).toEqual(expect.any(String));
      expect(live.headers.get('ratelimit')).toMatch(/^"business";r=\d+;t=\d+$/);
      const missionId = await submitApproval(tenant.token);
      const waiting = await live.waitFor((events) => ['hit.created', 'mission.awaiting_approval'].every((type) => types(ofMission(events, missionId)).includes(type)));
      const hitId = ofMission(waiting, missionId).find((event) => event.event === 'hit.created')?.data.data.hitId as string;
      const approved = await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenant.token, body: { comment: 'not for the stream' } });
      expect(approved.status).toBe(200);
      const all = ofMission(await live.waitFor((events) => types(ofMission(events, missionId)).includes('mission.completed')), missionId);

      expect(types(all).sort()).toEqual(['hit.created', 'hit.decided', 'mission.awaiting_approval', 'mission.completed']);
      expect(types(all).slice(2)).toEqual(['hit.decided', 'mission.completed']);
      for (const event of all) {
        expect(event.id).toBe(event.data.id);
        expect(event.event).toBe(event.data.type);
        expect(Date.parse(event.data.timestamp)).not.toBeNaN();
      }
      const byType = Object.fromEntries(all.map((event) => [event.event, event.data.data]));
      expect(byType).toEqual({
        'hit.created': { hitId, missionId },
        'mission.awaiting_approval': { missionId, hitId, stepIndex: 0 },
        'hit.decided': { hitId, missionId, decision: 'approved', decidedBy: tenant.clientId },
        'mission.completed': { missionId, status: 'succeeded' },
      });
      expect(JSON.stringify(live.events)).not.toContain('not for the stream');
      // Ids grow with the log: each event once, in order.
      const positions = live.events.map((event) => position(event.id));
      expect(positions).toEqual([...new Set(positions)].sort((a, b) => a - b));
    });

    it('resumes with Last-Event-ID: every event missed while away, and none twice', async () => {
      const first = await stream(tenant.token);
      const missionId = await submitApproval(tenant.token);
      const before = ofMission(
        await first.waitFor((events) => ['hit.created', 'mission.awaiting_approval'].every((type) => types(ofMission(events, missionId)).includes(type))),
        missionId,
      );
      first.close();
      const lastSeen = before.at(-1) as ReceivedEvent;
      const hitId = before.find((event) => event.event === 'hit.created')?.data.data.hitId as string;
      // While no stream is open, the item is decided and the mission ends.
      expect((await call(gateway(), 'POST', `/api/hit/${hitId}/reject`, { token: tenant.token })).status).toBe(200);
      expect((await waitForMission(gateway(), tenant.token, missionId)).status).toBe('rejected');

      const resumed = await stream(tenant.token, '/api/events', lastSeen.id);
      expect(resumed.status).toBe(200);
      const missed = ofMission(await resumed.waitFor((events) => types(ofMission(events, missionId)).includes('mission.completed')), missionId);
      expect(types(missed)).toEqual(['hit.decided', 'mission.completed']);
      expect(missed[1]?.data.data).toEqual({ missionId, status: 'rejected' });
      for (const event of resumed.events) expect(position(event.id)).toBeGreaterThan(position(lastSeen.id));

      // From the first event of the mission: the rest of it, exactly.
      const fromFirst = await stream(tenant.token, `/api/events?missionId=${missionId}`, before[0]?.id);
      const rest = await fromFirst.waitFor((events) => events.length >= 3);
      expect(rest.map((event) => event.id)).toEqual([before[1]?.id, missed[0]?.id, missed[1]?.id]);
    });

    it('sends only the event types the token may read, and refuses to promise others', async () => {
      const missionsOnly = await tokenWith(['missions:read', 'missions:write']);
      const narrow = await stream(missionsOnly);
      expect(narrow.status).toBe(200);
      const missionId = await submitApproval(missionsOnly);
      await narrow.waitFor((events) => types(ofMission(events, missionId)).includes('mission.awaiting_approval'));
      const item = (await call(gateway(), 'GET', `/api/missions/${missionId}`, { token: tenant.token })).body.steps[0].hitId as string;
      expect((await call(gateway(), 'POST', `/api/hit/${item}/approve`, { token: tenant.token })).status).toBe(200);
      const seen = await narrow.waitFor((events) => types(ofMission(events, missionId)).includes('mission.completed'));
      expect(types(ofMission(seen, missionId))).toEqual(['mission.awaiting_approval', 'mission.completed']);
      expect(types(seen).filter((type) => type.startsWith('hit.'))).toEqual([]);

      const askedForMore = await stream(missionsOnly, '/api/events?types=mission.completed,hit.decided');
      expectProblem(askedForMore, 403, 'insufficient_scope');
      expect(askedForMore.headers.get('www-authenticate')).toContain('scope="hits:read"');
      const brainOnly = await stream(await tokenWith(['brain:read']));
      expectProblem(brainOnly, 403, 'insufficient_scope');
      const operator = await stream(context.adminToken);
      expectProblem(operator, 403, 'insufficient_scope');
    });

    it("never shows a tenant's events on another tenant's stream", async () => {
      const theirs = await stream(other.token);
      const ours = await stream(tenant.token);
      const missionId = await submitApproval(tenant.token);
      await ours.waitFor((events) => types(ofMission(events, missionId)).includes('mission.awaiting_approval'));
      // The other tenant's stream is told of its own events, and of nothing of this tenant's.
      const theirMission = await submitApproval(other.token);
      await theirs.waitFor((events) => types(ofMission(events, theirMission)).includes('mission.awaiting_approval'));
      expect(ofMission(theirs.events, missionId)).toEqual([]);
      expect(ofMission(ours.events, theirMission)).toEqual([]);
      // Nor may it resume from this tenant's events.
      const foreign = await stream(other.token, '/api/events', ours.events[0]?.id);
      expectProblem(foreign, 400, 'cursor_expired');
    });

    it('answers GET /api/missions/:id/wait when the mission ends, or with the mission as it is when the timeout passes', async () => {
      const missionId = await submitApproval(tenant.token);
      const started = Date.now();
      const early = await call(gateway(), 'GET', `/api/missions/${missionId}/wait?timeoutSeconds=1`, { token: tenant.token });
      expect(early.status).toBe(200);
      expect(['queued', 'running', 'awaiting_approval']).toContain(early.body.status);
      expect(Date.now() - started).toBeGreaterThanOrEqual(900);
      const waiting = call(gateway(), 'GET', `/api/missions/${missionId}/wait?timeoutSeconds=60`, { token: tenant.token });
      let hitId: string | undefined;
      while (!hitId) {
        hitId = (await call(gateway(), 'GET', `/api/missions/${missionId}`, { token: tenant.token })).body.steps[0].hitId;
        if (!hitId) await new Promise((resolve) => setTimeout(resolve, 50));
      }
      const decidedAt = Date.now();
      expect((await call(gateway(), 'POST', `/api/hit/${hitId}/approve`, { token: tenant.token })).status).toBe(200);
      const final = await waiting;
      expect(final.status).toBe(200);
      expect(final.body).toMatchObject({ id: missionId, status: 'succeeded' });
      // Woken by the mission's event, well before the timeout (and before the 5 s re-read).
      expect(Date.now() - decidedAt).toBeLessThan(4_000);
      expectProblem(await call(gateway(), 'GET', `/api/missions/${missionId}/wait?timeoutSeconds=61`, { token: tenant.token }), 400, 'validation_failed');
      expectProblem(await call(gateway(), 'GET', `/api/missions/${'0'.repeat(8)}-0000-4000-8000-000000000000/wait?timeoutSeconds=1`, { token: tenant.token }), 404, 'not_found');
    });

    it("frees a stream's place when its client leaves, even while its backlog is read", async () => {
      // A tenant whose rate limit the streams do not reach: what is counted here is open streams.
      const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name: 'Many streams', tier: 'enterprise', rpm: 100_000 } });
      expect(created.status).toBe(201);
      const busy = {
        token: (await clientCredentialsToken(context.deployment.issuer, created.body.client.clientId, created.body.client.clientSecret)).access_token,
      };
      const first = await stream(busy.token);
      const resumeFrom = await (async () => {
        await submitApproval(busy.token);
        return (await first.waitFor((events) => events.length > 0))[0]?.id as string;
      })();
      first.close();
      // More streams than one tenant may hold at once, each left at once: the places come back.
      for (let index = 0; index < 105; index++) {
        const controller = new AbortController();
        const opening = fetch(`${gateway()}/api/events`, {
          headers: { authorization: `Bearer ${busy.token}`, accept: 'text/event-stream', ...(index % 2 === 0 ? { 'last-event-id': resumeFrom } : {}) },
          signal: controller.signal,
        }).catch(() => undefined);
        // Half are left before any byte of the answer came (the log still being read), half once it is open.
        if (index % 2 === 0) controller.abort();
        const response = await opening;
        if (response) {
          expect(response.status).toBe(200);
          controller.abort();
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
      const last = await stream(busy.token);
      expect(last.status).toBe(200);
    });

    it('refuses a position it never issued and malformed filters, as problem details before any event', async () => {
      expectProblem(await stream(tenant.token, '/api/events', 'evt_999999999_abcdefabcdef'), 400, 'cursor_expired');
      expectProblem(await stream(tenant.token, '/api/events', 'not-an-event-id'), 400, 'cursor_expired');
      expectProblem(await stream(tenant.token, '/api/events', 'x'.repeat(200)), 400, 'cursor_expired');
      const badType = await stream(tenant.token, '/api/events?types=mission.queued');
      expectProblem(badType, 400, 'validation_failed');
      expect(badType.body.errors).toEqual([{ field: 'types', message: expect.stringContaining('event types') }]);
      expectProblem(await stream(tenant.token, '/api/events?missionId=nope'), 400, 'validation_failed');
      expectProblem(await stream(tenant.token, '/api/events?extra=1'), 400, 'validation_failed');
    });
  });
}
