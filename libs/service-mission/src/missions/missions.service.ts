import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import {
  DomainError,
  MessageTypes,
  MissionQueuedEvent,
  MissionView,
  parseOrThrow,
  SubmitMissionSchema,
  Topics,
} from '@mission/contracts';
import { enqueueOutbox, tenantTransaction } from '@mission/persistence';
import { currentTenant } from '@mission/tenant-context';
import { MissionEntity, StoredStep } from './mission.entity';
import { missionView } from './mission.view';
import { MissionsRepository } from './missions.repository';

export const MISSION_SCHEMA = 'mission';

/** Mission lifecycle as the API sees it: submit and read, always for the current tenant. */
export class MissionsService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly missions: MissionsRepository,
    private readonly afterCommit: () => void,
  ) {}

  /** Stores the mission `queued` and its `mission.queued` event in one transaction. */
  async submit(body: unknown): Promise<MissionView> {
    const request = parseOrThrow(SubmitMissionSchema, body, 'Mission');
    const { tenantId } = currentTenant();
    const now = new Date();
    const steps: StoredStep[] = (request.steps ?? [{ type: 'brain.query' as const }]).map((step, index) => ({ ...step, index, status: 'pending' }));
    const mission = Object.assign(new MissionEntity(), {
      id: randomUUID(),
      tenantId,
      title: request.title,
      objective: request.objective,
      input: request.input ?? null,
      steps,
      metadata: request.metadata ?? {},
      status: 'queued' as const,
      result: null,
      error: null,
      createdAt: now,
      updatedAt: now,
      completedAt: null,
    });
    await tenantTransaction(this.dataSource, async (manager) => {
      await this.missions.insert(manager, mission);
      const event: MissionQueuedEvent = { missionId: mission.id };
      await enqueueOutbox(manager, MISSION_SCHEMA, {
        topic: Topics.missionEvents,
        type: MessageTypes.missionQueued,
        key: `${tenantId}:${mission.id}`,
        payload: event,
      });
    });
    this.afterCommit();
    return missionView(mission);
  }

  async get(id: string): Promise<MissionView> {
    const { tenantId } = currentTenant();
    const mission = await tenantTransaction(this.dataSource, (manager) => this.missions.findForTenant(manager, tenantId, id));
    if (!mission) throw DomainError.notFound('Mission');
    return missionView(mission);
  }
}
