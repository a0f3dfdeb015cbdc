import type { HitView } from '@mission/contracts';
import { HitItemEntity } from './hit-item.entity';

export function hitView(item: HitItemEntity): HitView {
  return {
    id: item.id,
    missionId: item.missionId,
    title: item.title,
    ...(item.description !== null ? { description: item.description } : {}),
    status: item.status,
    createdAt: item.createdAt.toISOString(),
    ...(item.expiresAt ? { expiresAt: item.expiresAt.toISOString() } : {}),
    ...(item.assignees ? { assignees: [...item.assignees] } : {}),
    ...(item.decidedAt ? { decidedAt: item.decidedAt.toISOString() } : {}),
    ...(item.decidedBy !== null ? { decidedBy: item.decidedBy } : {}),
    ...(item.comment !== null ? { comment: item.comment } : {}),
  };
}
