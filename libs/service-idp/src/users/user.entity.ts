import { Column, Entity, PrimaryColumn } from 'typeorm';

/** A tenant's user, who signs in on the idp's login page. The password exists only as an scrypt hash. */
@Entity('users')
export class UserEntity {
  @PrimaryColumn('uuid')
  id!: string;

  @Column('uuid', { name: 'tenant_id' })
  tenantId!: string;

  /** Lower-cased. */
  @Column('text')
  username!: string;

  @Column('text', { name: 'password_hash' })
  passwordHash!: string;

  @Column('text', { array: true })
  scopes!: string[];

  @Column('timestamptz', { name: 'created_at' })
  createdAt!: Date;
}
