import { DataSource, EntityManager } from 'typeorm';
import { ClientEntity } from './client.entity';

/** Longest client id we ever issue or accept; anything longer cannot exist, so it is not looked up. */
export const MAX_CLIENT_ID_LENGTH = 200;

/** The only code that reads or writes OAuth clients. */
export class ClientsRepository {
  constructor(private readonly dataSource: DataSource) {}

  async insert(manager: EntityManager, client: ClientEntity): Promise<void> {
    await manager.insert(ClientEntity, client);
  }

  async findById(clientId: string): Promise<ClientEntity | null> {
    if (clientId.length === 0 || clientId.length > MAX_CLIENT_ID_LENGTH) return null;
    return this.dataSource.getRepository(ClientEntity).findOne({ where: { clientId } });
  }
}
