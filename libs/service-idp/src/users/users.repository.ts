import { DataSource } from 'typeorm';
import { isUuid } from '@mission/contracts';
import { UserEntity } from './user.entity';

/** The only code that reads or writes users. */
export class UsersRepository {
  constructor(private readonly dataSource: DataSource) {}

  /** False when the tenant already has a user of that name. */
  async insert(user: UserEntity): Promise<boolean> {
    // ON CONFLICT instead of a caught error: a failed statement would be logged with its parameters.
    const result = await this.dataSource.createQueryBuilder().insert().into(UserEntity).values(user).orIgnore().returning('id').execute();
    return result.raw.length === 1;
  }

  async findById(id: string): Promise<UserEntity | null> {
    if (!isUuid(id)) return null;
    return this.dataSource.getRepository(UserEntity).findOne({ where: { id } });
  }

  /**
   * Of `usernames` (compared lower-case; each once, in the order given): those the tenant has no
   * user of, and those whose user lacks `hits:approve` (who could never decide an approval).
   */
  async assignable(tenantId: string, usernames: readonly string[]): Promise<{ unknown: string[]; unableToApprove: string[] }> {
    const wanted = [...new Set(usernames.map((name) => name.toLowerCase()))];
    if (!isUuid(tenantId)) return { unknown: wanted, unableToApprove: [] };
    const found: Array<{ username: string; approves: boolean }> = await this.dataSource.query(
      `SELECT username, 'hits:approve' = ANY(scopes) AS approves FROM identity.users WHERE tenant_id = $1 AND username = ANY($2::text[])`,
      [tenantId, wanted],
    );
    const known = new Map(found.map((row) => [row.username, row.approves]));
    return { unknown: wanted.filter((name) => !known.has(name)), unableToApprove: wanted.filter((name) => known.get(name) === false) };
  }

  async findByUsername(tenantId: string, username: string): Promise<UserEntity | null> {
    if (!isUuid(tenantId) || username.length === 0 || username.length > 100 || username.includes('\u0000')) return null;
    return this.dataSource.getRepository(UserEntity).findOne({ where: { tenantId, username: username.toLowerCase() } });
  }
}
