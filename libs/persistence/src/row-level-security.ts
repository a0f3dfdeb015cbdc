import type { QueryRunner } from 'typeorm';

const IDENTIFIER = /^[a-z_][a-z0-9_]{0,62}$/;

function identifier(value: string, what: string): string {
  if (!IDENTIFIER.test(value)) throw new Error(`Invalid ${what}: ${JSON.stringify(value)}`);
  return `"${value}"`;
}

/**
 * The role a service's queries run as: `<schema>_service`, NOLOGIN, neither superuser nor
 * BYPASSRLS, owning nothing, so row-level security applies to every query it makes. The
 * connecting user (the schema owner, which runs the migrations) enters it per connection.
 */
export function serviceRoleName(schema: string): string {
  identifier(schema, 'schema name');
  return `${schema}_service`;
}

/** The value the policies compare `tenant_id` with: the transaction's tenant, NULL (no rows) when none is set. */
export const CURRENT_TENANT_SQL = `NULLIF(current_setting('app.tenant_id', true), '')::uuid`;

/**
 * For a service's first RLS migration: creates the service role when the cluster does not have
 * it yet (roles are cluster-wide; another database may have made it), lets the connecting user
 * enter it, and grants it data access (not DDL) to the schema's tables, present and future. The
 * migrations table stays the owner's.
 */
export async function createServiceRole(queryRunner: QueryRunner, schema: string): Promise<void> {
  const role = identifier(serviceRoleName(schema), 'role name');
  const quotedSchema = identifier(schema, 'schema name');
  await queryRunner.query(`
    DO $$ BEGIN
      CREATE ROLE ${role} NOLOGIN NOSUPERUSER NOBYPASSRLS NOCREATEDB NOCREATEROLE NOINHERIT;
    EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
    END $$`);
  // A superuser may enter any role; an owner that is not one needs the membership.
  await queryRunner.query(`
    DO $$ BEGIN
      IF NOT pg_has_role(current_user, '${serviceRoleName(schema)}', 'MEMBER') THEN
        EXECUTE 'GRANT ${role} TO ' || quote_ident(current_user);
      END IF;
    END $$`);
  await queryRunner.query(`GRANT USAGE ON SCHEMA ${quotedSchema} TO ${role}`);
  await queryRunner.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${quotedSchema} TO ${role}`);
  await queryRunner.query(`ALTER DEFAULT PRIVILEGES IN SCHEMA ${quotedSchema} GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ${role}`);
  await queryRunner.query(`REVOKE ALL ON TABLE ${quotedSchema}."migrations" FROM ${role}`);
}

/**
 * Makes a tenant-owned table answer only for the transaction's tenant (`app.tenant_id`, which
 * tenantTransaction sets): `tenant_id NOT NULL`, row-level security enabled and forced (the owner
 * is subject to it too), and one policy for reads and writes. Without a tenant set, a query sees
 * no rows and can write none. Superusers and BYPASSRLS roles still bypass it: services therefore
 * run as their service role (createServiceRole).
 */
export async function enableTenantRls(queryRunner: QueryRunner, schema: string, table: string, tenantColumn = 'tenant_id'): Promise<void> {
  const qualified = `${identifier(schema, 'schema name')}.${identifier(table, 'table name')}`;
  const column = identifier(tenantColumn, 'column name');
  await queryRunner.query(`ALTER TABLE ${qualified} ALTER COLUMN ${column} SET NOT NULL`);
  await queryRunner.query(`ALTER TABLE ${qualified} ENABLE ROW LEVEL SECURITY`);
  await queryRunner.query(`ALTER TABLE ${qualified} FORCE ROW LEVEL SECURITY`);
  await queryRunner.query(`CREATE POLICY tenant_isolation ON ${qualified} USING (${column} = ${CURRENT_TENANT_SQL}) WITH CHECK (${column} = ${CURRENT_TENANT_SQL})`);
}

/**
 * The narrow exception for a system sweep that must span tenants (e.g. resuming unfinished work
 * after a restart): the owner, and only the owner, may read the table's rows regardless of tenant.
 * Pair it with a SECURITY DEFINER function (owned by the migrating user) that returns no more
 * than the sweep needs; the service role gets EXECUTE on that function, never the rows.
 */
export async function allowOwnerSweep(queryRunner: QueryRunner, schema: string, table: string): Promise<void> {
  const qualified = `${identifier(schema, 'schema name')}.${identifier(table, 'table name')}`;
  await queryRunner.query(`CREATE POLICY owner_sweep ON ${qualified} FOR SELECT TO CURRENT_USER USING (true)`);
}
