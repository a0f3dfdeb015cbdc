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

  async findByUsername(tenantId: string, username: string): Promise<UserEntity | null> {
    if (!isUuid(tenantId) || username.length === 0 || username.length > 100 || username.includes('\u0000')) return null;
    return this.dataSource.getRepository(UserEntity).findOne({ where: { tenantId, username: username.toLowerCase() } });
  }
}
