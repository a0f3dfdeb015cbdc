import { randomUUID } from 'node:crypto';
import { call, clientCredentialsToken, eventually, waitForMission } from '../api-client';
import type { ScenarioContext, Tenant } from '../gateway-scenarios';
import { expectProblem } from '../gateway-scenarios';
import { signatureIsValid, startWebhookReceiver, type ReceivedWebhook, type WebhookReceiver } from '../webhook-receiver';

/** What the scenario deployments set for notification-service: receivers on loopback, and quick retries. */
export const SCENARIO_WEBHOOK_ENV = { WEBHOOKS_ALLOW_PRIVATE: 'true', WEBHOOK_RETRY_SCHEDULE: '1,1,1' } as const;

const bodyOf = (delivery: ReceivedWebhook): any => JSON.parse(delivery.body);

/** Webhooks through the gateway: registration, signed deliveries, retries with one id, the delivery log, test sends, deletion, scopes and isolation. */
export function describeWebhookScenarios(context: ScenarioContext): void {
  const gateway = (): string => context.deployment.gatewayUrl;
  let tenant: Tenant;
  let other: Tenant;
  let receiver: WebhookReceiver;

  async function createTenant(name: string): Promise<Tenant> {
    const created = await call(gateway(), 'POST', '/admin/tenants', { token: context.adminToken, body: { name, tier: 'business' } });
    expect(created.status).toBe(201);
    const { clientId, clientSecret } = created.body.client;
    return { id: created.body.id, token: (await clientCredentialsToken(context.deployment.issuer, clientId, clientSecret)).access_token, clientId, clientSecret };
  }

  async function register(owner: Tenant, body: Record<string, unknown>) {
    return call(gateway(), 'POST', '/api/webhooks', { token: owner.token, body });
  }

  /** A mission of one approval step, decided at once: it ends `rejected`. */
  async function runMission(owner: Tenant): Promise<string> {
    const submitted = await call(gateway(), 'POST', '/api/missions', {
      token: owner.token,
      body: { title: 'Announced', objective: 'Tell the webhook', steps: [{ type: 'approval', title: 'Go?' }] },
    });
    expect(submitted.status).toBe(202);
    const missionId = submitted.body.id as string;
    let hitId: string | undefined;
    const deadline = Date.now() + 20_000;
    while (!hitId && Date.now() < deadline) {
      hitId = (await call(gateway(), 'GET', `/api/missions/${missionId}`, { token: owner.token })).body.steps?.[0]?.hitId;
      if (!hitId) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect((await call(gateway(), 'POST', `/api/hit/${hitId}/reject`, { token: owner.token })).status).toBe(200);
    expect((await waitForMission(gateway(), owner.token, missionId)).status).toBe('rejected');
    return missionId;
  }

  describe('webhooks', () => {
    beforeAll(async () => {
      tenant = await createTenant('Webhooks');
      other = await createTenant('Webhooks elsewhere');
      receiver = await startWebhookReceiver();
    }, 60_000);

    afterAll(async () => {
      await receiver?.close();
    });

    it("registers a webhook, shows its secret once, and delivers the tenant's events to it signed, with the event's id", async () => {
      const created = await register(tenant, { url: receiver.url, events: ['mission.completed', 'hit.decided'], description: 'ops channel' });
      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.any(String),
        url: receiver.url,
        events: ['mission.completed', 'hit.decided'],
        description: 'ops channel',
        secret: expect.stringMatching(/^whsec_[A-Za-z0-9+/]{43}=$/),
        createdAt: expect.any(String),
      });
      expect(created.headers.get('location')).toBe(`/api/webhooks/${created.body.id}`);
      const shown = await call(gateway(), 'GET', `/api/webhooks/${created.body.id}`, { token: tenant.token });
      expect(shown.status).toBe(200);
      expect(shown.body).not.toHaveProperty('secret');
      const listed = await call(gateway(), 'GET', '/api/webhooks', { token: tenant.token });
      expect(listed.body.items.map((item: { id: string }) => item.id)).toContain(created.body.id);
      expect(JSON.stringify(listed.body)).not.toContain(created.body.secret);

      const missionId = await runMission(tenant);
      const delivered = await receiver.waitFor((all) => all.some((d) => bodyOf(d).type === 'mission.completed' && bodyOf(d).data.missionId === missionId));
      const mine = delivered.filter((d) => bodyOf(d).data.missionId === missionId);
      expect(mine.map((d) => bodyOf(d).type).sort()).toEqual(['hit.decided', 'mission.completed']);
      for (const delivery of mine) {
        expect(signatureIsValid(delivery, created.body.secret)).toBe(true);
        expect(delivery.headers['webhook-id']).toBe(bodyOf(delivery).id);
        expect(Math.abs(Number(delivery.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(60);
        expect(delivery.headers['content-type']).toBe('application/json');
      }
      expect(bodyOf(mine.find((d) => bodyOf(d).type === 'mission.completed') as ReceivedWebhook).data).toEqual({ missionId, status: 'rejected' });
      // Another secret does not verify it.
      expect(signatureIsValid(mine[0] as ReceivedWebhook, `whsec_${Buffer.alloc(32, 1).toString('base64')}`)).toBe(false);
      expect((await call(gateway(), 'DELETE', `/api/webhooks/${created.body.id}`, { token: tenant.token })).status).toBe(204);
    });

    it('retries a failing receiver with the same webhook-id until it answers 2xx, and keeps the attempts in the delivery log', async () => {
      const created = await register(tenant, { url: receiver.url, events: ['mission.completed'] });
      expect(created.status).toBe(201);
      receiver.answerNext(500, 503);
      const missionId = await runMission(tenant);
      const attempts = (await receiver.waitFor((all) => all.filter((d) => bodyOf(d).data.missionId === missionId && d.answered === 204).length === 1)).filter(
        (d) => bodyOf(d).data.missionId === missionId,
      );
      expect(attempts.map((d) => d.answered)).toEqual([500, 503, 204]);
      expect(new Set(attempts.map((d) => d.headers['webhook-id'])).size).toBe(1);
      for (const attempt of attempts) expect(signatureIsValid(attempt, created.body.secret)).toBe(true);
      // The receiver has answered; the dispatcher settles the delivery once that answer reaches it.
      const log = await eventually(async () => {
        const read = await call(gateway(), 'GET', `/api/webhooks/${created.body.id}/deliveries`, { token: tenant.token });
        expect(read.status).toBe(200);
        return read.body.items[0]?.status === 'pending' ? undefined : read;
      }, 'the delivery to be settled');
      expect(log.body.items[0]).toEqual({
        id: expect.any(String),
        eventId: attempts[0]?.headers['webhook-id'],
        eventType: 'mission.completed',
        attempt: 3,
        status: 'succeeded',
        responseStatus: 204,
        createdAt: expect.any(String),
      });
      expect((await call(gateway(), 'DELETE', `/api/webhooks/${created.body.id}`, { token: tenant.token })).status).toBe(204);
    });

    it('sends a test event on request, and nothing more once the webhook is deleted', async () => {
      const created = await register(tenant, { url: receiver.url, events: ['mission.completed'] });
      const test = await call(gateway(), 'POST', `/api/webhooks/${created.body.id}/test`, { token: tenant.token });
      expect(test.status).toBe(202);
      expect(test.body).toMatchObject({ eventType: 'webhook.test', status: 'pending', attempt: 1 });
      const [sent] = (await receiver.waitFor((all) => all.some((d) => d.headers['webhook-id'] === test.body.eventId))).filter((d) => d.headers['webhook-id'] === test.body.eventId);
      expect(bodyOf(sent as ReceivedWebhook)).toMatchObject({ id: test.body.eventId, type: 'webhook.test', data: { webhookId: created.body.id } });
      expect(signatureIsValid(sent as ReceivedWebhook, created.body.secret)).toBe(true);

      expect((await call(gateway(), 'DELETE', `/api/webhooks/${created.body.id}`, { token: tenant.token })).status).toBe(204);
      expectProblem(await call(gateway(), 'GET', `/api/webhooks/${created.body.id}`, { token: tenant.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'DELETE', `/api/webhooks/${created.body.id}`, { token: tenant.token }), 404, 'not_found');
      const before = receiver.received.length;
      // A webhook that still listens shows the mission's event arrived; the deleted one got nothing of it.
      const witness = await register(tenant, { url: `${receiver.url}?witness`, events: ['mission.completed'] });
      const missionId = await runMission(tenant);
      await receiver.waitFor((all) => all.some((d) => bodyOf(d).data.missionId === missionId));
      const after = receiver.received.slice(before).filter((d) => bodyOf(d).data.missionId === missionId);
      expect(after).toHaveLength(1);
      expect(signatureIsValid(after[0] as ReceivedWebhook, witness.body.secret)).toBe(true);
      expect((await call(gateway(), 'DELETE', `/api/webhooks/${witness.body.id}`, { token: tenant.token })).status).toBe(204);
    });

    it("keeps each tenant's webhooks and events to itself", async () => {
      const ours = await register(tenant, { url: receiver.url, events: ['mission.completed'] });
      expectProblem(await call(gateway(), 'GET', `/api/webhooks/${ours.body.id}`, { token: other.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'DELETE', `/api/webhooks/${ours.body.id}`, { token: other.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'GET', `/api/webhooks/${ours.body.id}/deliveries`, { token: other.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'POST', `/api/webhooks/${ours.body.id}/test`, { token: other.token }), 404, 'not_found');
      expect((await call(gateway(), 'GET', '/api/webhooks', { token: other.token })).body.items).toEqual([]);
      const theirMission = await runMission(other);
      const ourMission = await runMission(tenant);
      await receiver.waitFor((all) => all.some((d) => bodyOf(d).data.missionId === ourMission));
      expect(receiver.received.filter((d) => bodyOf(d).data.missionId === theirMission)).toEqual([]);
      expect((await call(gateway(), 'DELETE', `/api/webhooks/${ours.body.id}`, { token: tenant.token })).status).toBe(204);
    });

    it('refuses bad registrations and callers without webhooks:manage', async () => {
      const noEvents = await register(tenant, { url: receiver.url, events: [] });
      expectProblem(noEvents, 400, 'validation_failed');
      expect(noEvents.body.errors).toEqual([{ field: 'events', message: expect.any(String) }]);
      expectProblem(await register(tenant, { url: receiver.url, events: ['mission.queued'] }), 400, 'validation_failed');
      expectProblem(await register(tenant, { url: receiver.url, events: ['hit.decided', 'hit.decided'] }), 400, 'validation_failed');
      const ftp = await register(tenant, { url: 'ftp://127.0.0.1/hooks', events: ['hit.decided'] });
      expectProblem(ftp, 400, 'validation_failed');
      expect(ftp.body.errors).toEqual([{ field: 'url', message: expect.stringContaining('https') }]);
      expectProblem(await register(tenant, { url: receiver.url, events: ['hit.decided'], secret: 'mine' }), 400, 'validation_failed');
      expectProblem(await call(gateway(), 'GET', `/api/webhooks/${randomUUID()}`, { token: tenant.token }), 404, 'not_found');
      expectProblem(await call(gateway(), 'GET', '/api/webhooks/not-an-id', { token: tenant.token }), 404, 'not_found');

      const client = await call(gateway(), 'POST', `/admin/tenants/${tenant.id}/clients`, { token: context.adminToken, body: { scopes: ['missions:read', 'missions:write'] } });
      const narrow = (await clientCredentialsToken(context.deployment.issuer, client.body.clientId, client.body.clientSecret)).access_token;
      const refused = await call(gateway(), 'GET', '/api/webhooks', { token: narrow });
      expectProblem(refused, 403, 'insufficient_scope');
      expect(refused.headers.get('www-authenticate')).toContain('scope="webhooks:manage"');
    });
  });
}
