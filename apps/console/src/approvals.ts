import type { HitItem, Mission } from '@mission/api-client';

/*
 * What the console shows of an approval item and its mission, as plain functions of the API's
 * answers (tested without a browser).
 */

/** An item the signed-in user may decide: unassigned, or assigned to them (names compare case-insensitively). */
export function isForUser(item: Pick<HitItem, 'assignees'>, username: string | undefined): boolean {
  if (!item.assignees || item.assignees.length === 0) return true;
  if (!username) return false;
  const me = username.toLowerCase();
  return item.assignees.some((name) => name.toLowerCase() === me);
}

export interface EarlierStep {
  readonly index: number;
  readonly type: string;
  readonly status: string;
  /** What the step produced, in a line or a few: passages found, or a decision with its comment. */
  readonly lines: readonly string[];
}

export interface MissionContext {
  readonly title: string;
  readonly objective: string;
  readonly status: string;
  /** The steps before the item's own, in order. */
  readonly earlier: readonly EarlierStep[];
}

const MAX_LINE = 280;

function clip(text: string): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > MAX_LINE ? `${flat.slice(0, MAX_LINE - 1)}…` : flat;
}

/** A step's output as the console lists it. */
export function outputLines(step: Pick<Mission['steps'][number], 'type' | 'output'>): string[] {
  const output = step.output ?? {};
  if (step.type === 'brain.query') {
    const results = Array.isArray(output.results) ? (output.results as Array<Record<string, unknown>>) : [];
    if (results.length === 0) return ['No passage found.'];
    return results.slice(0, 5).map((result) => clip(`${typeof result.title === 'string' ? `${result.title}: ` : ''}${typeof result.text === 'string' ? result.text : ''}`));
  }
  const decision = typeof output.decision === 'string' ? output.decision : undefined;
  if (!decision) return [];
  const by = typeof output.decidedBy === 'string' ? ` by ${output.decidedBy}` : '';
  const comment = typeof output.comment === 'string' && output.comment ? `: “${clip(output.comment)}”` : '';
  return [`${decision[0]?.toUpperCase()}${decision.slice(1)}${by}${comment}`];
}

/** The mission around an item: its title, objective, and what the steps before the item's produced. */
export function missionContext(mission: Pick<Mission, 'title' | 'objective' | 'status' | 'steps'>, hitId: string): MissionContext {
  const own = mission.steps.find((step) => step.hitId === hitId);
  const before = own ? mission.steps.filter((step) => step.index < own.index) : [];
  return {
    title: mission.title,
    objective: mission.objective,
    status: mission.status,
    earlier: before.map((step) => ({ index: step.index, type: step.type, status: step.status, lines: outputLines(step) })),
  };
}

/** "in 4 min", "in 2 h 5 min", "overdue": how long an item has left, for a person. */
export function timeLeft(expiresAt: string, now: number): string {
  const ms = Date.parse(expiresAt) - now;
  if (Number.isNaN(ms)) return '';
  if (ms <= 0) return 'overdue';
  const minutes = Math.ceil(ms / 60_000);
  if (minutes < 60) return `in ${minutes} min`;
  const hours = Math.floor(minutes / 60);
  if (hours < 48) return `in ${hours} h${minutes % 60 ? ` ${minutes % 60} min` : ''}`;
  return `in ${Math.round(hours / 24)} days`;
}

/** Missions' statuses as words. */
export const STATUS_LABELS: Readonly<Record<Mission['status'], string>> = {
  queued: 'Queued',
  running: 'Running',
  awaiting_approval: 'Awaiting approval',
  succeeded: 'Succeeded',
  failed: 'Failed',
  rejected: 'Rejected',
  cancelled: 'Cancelled',
};
