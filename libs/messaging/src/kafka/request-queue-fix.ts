/**
 * A fix for a kafkajs bug that keeps every process of ours busy while it has nothing to do.
 *
 * kafkajs 2.2.4 (its last release) gives every broker connection a request queue whose
 * `scheduleCheckPendingRequests` re-arms a timer after each check, pending requests or not, with
 * the delay `throttledUntil - Date.now()`: negative when nothing is throttled, so Node runs it after
 * one millisecond (and Node 24 warns about each negative delay). Every connection thus wakes its
 * process about a thousand times a second for as long as it is open (tulios/kafkajs#1556, #1604,
 * #1704, #1751; the fix below is the one those threads converge on, never released). A service
 * holds a dozen or more connections: here that was about 1,700 wake-ups a second and 4 to 6 % of a core
 * per idle service, and the same timers kept firing between the requests of a busy one.
 *
 * The fixed method schedules a check only while requests wait (as before) or until a throttle the
 * broker asked for ends; with neither, nothing needs checking: a request pushed later is sent at
 * once or schedules its own check, and a finished request checks the queue itself.
 */

/** The parts of kafkajs's RequestQueue the fix reads and writes. */
export interface RequestQueueState {
  throttledUntil: number;
  throttleCheckTimeoutId: ReturnType<typeof setTimeout> | null;
  readonly pending: readonly unknown[];
  checkPendingRequests(): void;
  scheduleCheckPendingRequests(): void;
}

/** kafkajs's own interval between checks while requests wait (CHECK_PENDING_REQUESTS_INTERVAL). */
const CHECK_PENDING_REQUESTS_INTERVAL_MS = 10;

/** The method as kafkajs ships it, without its comments and whitespace: the fix replaces only this. */
const SHIPPED = `scheduleCheckPendingRequests(){letscheduleAt=this.throttledUntil-Date.now()if(!this.throttleCheckTimeoutId){if(this.pending.length>0){scheduleAt=scheduleAt>0?scheduleAt:CHECK_PENDING_REQUESTS_INTERVAL}this.throttleCheckTimeoutId=setTimeout(()=>{this.throttleCheckTimeoutId=nullthis.checkPendingRequests()},scheduleAt)}}`;

/** The fixed scheduleCheckPendingRequests, for a RequestQueue as `this`. */
export function scheduleCheckPendingRequests(this: RequestQueueState): void {
  if (this.throttleCheckTimeoutId) return;
  const untilUnthrottled = this.throttledUntil - Date.now();
  let delayMs: number;
  if (this.pending.length > 0) delayMs = untilUnthrottled > 0 ? untilUnthrottled : CHECK_PENDING_REQUESTS_INTERVAL_MS;
  else if (untilUnthrottled > 0) delayMs = untilUnthrottled;
  else return;
  this.throttleCheckTimeoutId = setTimeout(() => {
    this.throttleCheckTimeoutId = null;
    this.checkPendingRequests();
  }, delayMs);
}

/**
 * Replaces the method on `prototype` when it is the one kafkajs 2.2.4 ships; returns whether it
 * did. Any other version of it (a kafkajs that fixed it, or changed it) is left as it is.
 */
export function fixRequestQueue(prototype: { scheduleCheckPendingRequests: unknown }): boolean {
  const current = prototype.scheduleCheckPendingRequests;
  if (current === scheduleCheckPendingRequests) return true;
  if (typeof current !== 'function' || withoutCommentsOrSpace(current.toString()) !== SHIPPED) return false;
  prototype.scheduleCheckPendingRequests = scheduleCheckPendingRequests;
  return true;
}

function withoutCommentsOrSpace(source: string): string {
  return source.replace(/\/\/[^\n]*/g, '').replace(/\s+/g, '');
}

/**
 * kafkajs's RequestQueue, fixed; whether the fix applies (false: kafkajs's method differs from the
 * one fixed, or the module is not where kafkajs 2.2.4 keeps it: kafkajs then runs as shipped).
 */
export function fixKafkajsRequestQueue(): boolean {
  let RequestQueue: { prototype: { scheduleCheckPendingRequests: unknown } };
  try {
    // kafkajs has no exports map: its modules are reachable by path, and this one is not re-exported.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    RequestQueue = require('kafkajs/src/network/requestQueue') as typeof RequestQueue;
  } catch {
    return false;
  }
  return fixRequestQueue(RequestQueue.prototype);
}
