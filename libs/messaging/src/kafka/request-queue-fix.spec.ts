import { fixKafkajsRequestQueue, fixRequestQueue, scheduleCheckPendingRequests } from './request-queue-fix';

interface Queue {
  throttledUntil: number;
  readonly pending: unknown[];
  readonly inflight: Map<number, unknown>;
  push(request: {
    entry: { correlationId: number; apiKey: number; apiName: string; apiVersion: number; resolve(): void; reject(): void };
    expectResponse: boolean;
    sendRequest(): void;
  }): void;
  fulfillRequest(response: { correlationId: number; payload: Buffer | null; size: number }): void;
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}
type QueueClass = { new (options: Record<string, unknown>): Queue; prototype: Queue };

// kafkajs's own class (not re-exported by its index), as the bus's connections use it.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const RequestQueue = require('kafkajs/src/network/requestQueue') as QueueClass;
const shipped = RequestQueue.prototype.scheduleCheckPendingRequests;
const silent = { debug: () => undefined, info: () => undefined, warn: () => undefined, error: () => undefined };

function queue(maxInFlightRequests: number | null = null): Queue {
  return new RequestQueue({ maxInFlightRequests, requestTimeout: 30_000, enforceRequestTimeout: false, clientId: 'spec', broker: 'broker:9092', logger: silent });
}

function request(correlationId: number) {
  const sendRequest = jest.fn();
  return {
    sendRequest,
    pushed: { entry: { correlationId, apiKey: 1, apiName: 'Fetch', apiVersion: 11, resolve: jest.fn(), reject: jest.fn() }, expectResponse: true, sendRequest },
  };
}

/** A fixed queue throttled for `forMs`, holding one request pushed meanwhile. */
function throttledWithRequest(forMs: number) {
  fixKafkajsRequestQueue();
  const q = queue();
  q.throttledUntil = Date.now() + forMs;
  const { sendRequest, pushed } = request(1);
  q.push(pushed);
  return { q, sendRequest };
}

describe('the kafkajs request queue fix', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => {
    jest.clearAllTimers();
    jest.useRealTimers();
    RequestQueue.prototype.scheduleCheckPendingRequests = shipped;
  });

  it('applies to the installed kafkajs, whose method is the one it was written for', () => {
    expect(fixKafkajsRequestQueue()).toBe(true);
    expect(RequestQueue.prototype.scheduleCheckPendingRequests).toBe(scheduleCheckPendingRequests);
    // Applying it again changes nothing.
    expect(fixKafkajsRequestQueue()).toBe(true);
  });

  it('leaves a method it does not know alone', () => {
    const other = { scheduleCheckPendingRequests: function scheduleCheckPendingRequests() {} };
    const before = other.scheduleCheckPendingRequests;
    expect(fixRequestQueue(other)).toBe(false);
    expect(other.scheduleCheckPendingRequests).toBe(before);
  });

  it('shipped as it is, an idle queue checks itself every millisecond for ever; fixed, it sets no timer at all', () => {
    const checks = (q: Queue) => jest.spyOn(q, 'checkPendingRequests');
    const asShipped = queue();
    const shippedChecks = checks(asShipped);
    const { pushed } = request(1);
    asShipped.push(pushed);
    asShipped.fulfillRequest({ correlationId: 1, payload: null, size: 0 });
    jest.advanceTimersByTime(1_000);
    // The bug this fixes, seen: hundreds of checks a second with nothing to check.
    expect(shippedChecks.mock.calls.length).toBeGreaterThan(500);
    jest.clearAllTimers();

    expect(fixKafkajsRequestQueue()).toBe(true);
    const fixed = queue();
    const fixedChecks = checks(fixed);
    const second = request(2);
    fixed.push(second.pushed);
    expect(second.sendRequest).toHaveBeenCalledTimes(1);
    fixed.fulfillRequest({ correlationId: 2, payload: null, size: 0 });
    expect(jest.getTimerCount()).toBe(0);
    jest.advanceTimersByTime(1_000);
    expect(fixedChecks).toHaveBeenCalledTimes(1);
  });

  it('still sends a request that waited for a broker throttle once the throttle ends, and not before', () => {
    const { q, sendRequest } = throttledWithRequest(250);
    jest.advanceTimersByTime(200);
    expect(sendRequest).not.toHaveBeenCalled();
    jest.advanceTimersByTime(100);
    expect(sendRequest).toHaveBeenCalledTimes(1);
    q.fulfillRequest({ correlationId: 1, payload: null, size: 0 });
    expect(jest.getTimerCount()).toBe(0);
  });

  it('sends a request left waiting after its throttle ended by the 10 ms check alone, no answer needed to wake it (tulios/kafkajs#1532)', () => {
    const { q, sendRequest } = throttledWithRequest(50);
    // The throttle ends before the check is armed (the race of #1532): with a request waiting, a check must still come.
    jest.clearAllTimers();
    (q as unknown as { throttleCheckTimeoutId: unknown }).throttleCheckTimeoutId = null;
    q.throttledUntil = Date.now() - 1;
    q.scheduleCheckPendingRequests();
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(9);
    expect(sendRequest).not.toHaveBeenCalled();
    jest.advanceTimersByTime(1);
    expect(sendRequest).toHaveBeenCalledTimes(1);
  });

  it('waits for a throttle the broker extends while a check is armed', () => {
    const { q, sendRequest } = throttledWithRequest(100);
    // The fake clock stands still: the broker's new throttle ends 300 ms from the push.
    q.throttledUntil = Date.now() + 300;
    jest.advanceTimersByTime(150);
    expect(sendRequest).not.toHaveBeenCalled();
    jest.advanceTimersByTime(150);
    expect(sendRequest).toHaveBeenCalledTimes(1);
  });

  it('checks again when a throttle ends even with nothing waiting, and sends what waits for a free slot once one frees', () => {
    fixKafkajsRequestQueue();
    const q = queue(1);
    q.throttledUntil = Date.now() + 100;
    q.scheduleCheckPendingRequests();
    expect(jest.getTimerCount()).toBe(1);
    jest.advanceTimersByTime(100);
    expect(jest.getTimerCount()).toBe(0);

    const first = request(1);
    const second = request(2);
    q.push(first.pushed);
    q.push(second.pushed);
    expect(first.sendRequest).toHaveBeenCalledTimes(1);
    expect(second.sendRequest).not.toHaveBeenCalled();
    q.fulfillRequest({ correlationId: 1, payload: null, size: 0 });
    expect(second.sendRequest).toHaveBeenCalledTimes(1);
    q.fulfillRequest({ correlationId: 2, payload: null, size: 0 });
    jest.advanceTimersByTime(1_000);
    expect(jest.getTimerCount()).toBe(0);
  });
});
