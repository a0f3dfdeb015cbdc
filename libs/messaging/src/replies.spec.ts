import { DomainError, ErrorCode } from '@mission/contracts';
import { PendingReplies } from './replies';

describe('PendingReplies', () => {
  const errors: string[] = [];
  const logger = { warn: () => undefined, error: (message: string) => errors.push(message) };
  const what = { topic: 'mission.requests', type: 'mission.get' };
  const TENANT = '6f1c2a4e-0d1b-4c8e-9a57-2b3c4d5e6f70';
  const OTHER = '0a0b0c0d-0e0f-4a1b-8c2d-3e4f5a6b7c8d';

  it('hands a reply to the request it answers, opened only then', async () => {
    const replies = new PendingReplies(logger);
    const waiting = replies.wait('r1', TENANT, 5_000, what, async () => undefined);
    const open = jest.fn(async () => ({ ok: true, data: 1 }));
    await replies.deliver({ 'correlation-id': 'other', 'tenant-id': TENANT }, open);
    expect(open).not.toHaveBeenCalled();
    await replies.deliver({ 'correlation-id': 'r1', 'tenant-id': TENANT.toUpperCase() }, open);
    await expect(waiting).resolves.toEqual({ ok: true, data: 1 });
    expect(replies.size).toBe(0);
  });

  it('refuses a reply that names another tenant than its request, without opening it', async () => {
    const replies = new PendingReplies(logger);
    const waiting = replies.wait('r2', TENANT, 5_000, what, async () => undefined);
    const open = jest.fn(async () => ({ ok: true, data: 'secret of another tenant' }));
    await replies.deliver({ 'correlation-id': 'r2', 'tenant-id': OTHER }, open);
    await expect(waiting).resolves.toBeUndefined();
    expect(open).not.toHaveBeenCalled();
    expect(errors).toContain('Unreadable reply');
  });

  it('refuses a tenant reply to a request sent outside any tenant, and the reverse', async () => {
    const replies = new PendingReplies(logger);
    const platform = replies.wait('r3', undefined, 5_000, what, async () => undefined);
    const tenant = replies.wait('r4', TENANT, 5_000, what, async () => undefined);
    await replies.deliver({ 'correlation-id': 'r3', 'tenant-id': TENANT }, async () => 'x');
    await replies.deliver({ 'correlation-id': 'r4' }, async () => 'x');
    await expect(platform).resolves.toBeUndefined();
    await expect(tenant).resolves.toBeUndefined();
  });

  it('times out with dependency_unavailable, fails with the send error, and fails everything on close', async () => {
    jest.useFakeTimers();
    try {
      const replies = new PendingReplies(logger);
      const late = replies.wait('r5', TENANT, 1_000, what, async () => undefined);
      jest.advanceTimersByTime(1_001);
      await expect(late).rejects.toMatchObject({ code: ErrorCode.DependencyUnavailable });
      const unsent = replies.wait('r6', TENANT, 1_000, what, async () => {
        throw new DomainError(ErrorCode.DependencyUnavailable, 'no broker');
      });
      await expect(unsent).rejects.toThrow('no broker');
      const open = replies.wait('r7', TENANT, 1_000, what, async () => undefined);
      replies.rejectAll();
      await expect(open).rejects.toMatchObject({ code: ErrorCode.DependencyUnavailable });
      expect(replies.size).toBe(0);
    } finally {
      jest.useRealTimers();
    }
  });
});
