import { HitEventSchemas, Messages, MessageTypes, MissionEventSchemas, Topics } from '@mission/contracts';
import { EventHandler, eventHandlers, on, RequestHandler, requestHandlers } from '@mission/messaging';
import type { Webhooks } from '../webhooks/webhooks';
import type { EventLog } from './event-log';
import { hitCreated, hitDecided, hitExpired, missionAwaitingApproval, missionCompleted } from './public-events';

/** Bus requests → the event log and the webhooks. The tenant comes from the message, restored by the bus. */
export function notifyRequestHandlers(log: Pick<EventLog, 'list'>, webhooks: Webhooks): Record<string, RequestHandler> {
  return requestHandlers(Topics.notifyRequests, [
    on(Messages.eventsList, (query) => log.list(query)),
    on(Messages.webhookCreate, (request) => webhooks.create(request)),
    on(Messages.webhookList, ({ limit, cursor }) => webhooks.list(limit, cursor)),
    on(Messages.webhookGet, ({ id }) => webhooks.get(id)),
    on(Messages.webhookDelete, ({ id }) => webhooks.delete(id)),
    on(Messages.webhookDeliveries, ({ id, limit, cursor }) => webhooks.deliveries(id, limit, cursor)),
    on(Messages.webhookTest, ({ id }) => webhooks.test(id)),
  ]);
}

/** The mission events the log records (each once, by its message id). */
export function missionEventsToLog(log: Pick<EventLog, 'record'>): EventHandler {
  return eventHandlers(MissionEventSchemas, {
    [MessageTypes.missionAwaitingApproval]: async (event, message) => void (await log.record(message.id, missionAwaitingApproval(event))),
    [MessageTypes.missionCompleted]: async (event, message) => void (await log.record(message.id, missionCompleted(event))),
  });
}

/** The approval-item events the log records (each once, by its message id). */
export function hitEventsToLog(log: Pick<EventLog, 'record'>): EventHandler {
  return eventHandlers(HitEventSchemas, {
    [MessageTypes.hitCreated]: async (event, message) => void (await log.record(message.id, hitCreated(event))),
    [MessageTypes.hitDecided]: async (event, message) => void (await log.record(message.id, hitDecided(event))),
    [MessageTypes.hitExpired]: async (event, message) => void (await log.record(message.id, hitExpired(event))),
  });
}
