import { type PoolClient, type QueryResult as PgResult } from 'pg';
import { DataSource, EntityManager, QueryFailedError, QueryRunner } from 'typeorm';
import { QueryResult } from 'typeorm/query-runner/QueryResult';

/** TypeORM's statements that open and end a transaction (PostgresQueryRunner). */
const START_TRANSACTION = 'START TRANSACTION';
const COMMIT = 'COMMIT';
const ROLLBACK = 'ROLLBACK';
const ROLLBACK_TO_SAVEPOINT = 'ROLLBACK TO SAVEPOINT';

/**
 * What a transaction has not sent yet: its opening (START TRANSACTION and what must follow it)
 * until its first statement, and the writes held back by deferWrite until the next statement or
 * the COMMIT.
 */
interface Pending {
  opening: string | null;
  writes: string[];
  /** Sends what was held and then `statements` (inlined) in one message: their results, in order. */
  sendWithHeld(statements: readonly string[], label: string): Promise<PgResult[]>;
}

const pendingOf = new WeakMap<QueryRunner, Pending>();

/**
 * An array's text form as node-postgres sends it as a parameter (`{"a","b",NULL,{"c"}}`), for
 * arrays, nested or not, of text, finite numbers, booleans and null only; undefined otherwise.
 */
function arrayText(values: readonly unknown[]): string | undefined {
  let text = '{';
  for (let index = 0; index < values.length; index++) {
    if (index > 0) text += ',';
    const value = values[index];
    if (value === null || value === undefined) text += 'NULL';
    else if (Array.isArray(value)) {
      const inner = arrayText(value);
      if (inner === undefined) return undefined;
      text += inner;
    } else if (typeof value === 'string' || (typeof value === 'number' && Number.isFinite(value)) || typeof value === 'boolean') {
      text += `"${String(value).replace(/\\/g, '\\\\').replace(/"/g, '\\"')}"`;
    } else return undefined;
  }
  return `${text}}`;
}

/**
 * `text` as a string constant, exactly as node-postgres's escapeLiteral writes it (quotes doubled;
 * with a backslash, backslashes doubled and an E prefix), without building it a character at a
 * time: most values (ids, states, times, sealed payloads) hold neither, and are copied once.
 */
export function quoteLiteral(text: string): string {
  if (!QUOTE_OR_BACKSLASH.test(text)) return `'${text}'`;
  const quoted = text.replace(QUOTES, "''");
  return text.includes('\\') ? ` E'${quoted.replace(BACKSLASHES, '\\\\')}'` : `'${quoted}'`;
}
const QUOTE_OR_BACKSLASH = /['\\]/;
const QUOTES = /'/g;
const BACKSLASHES = /\\/g;

/**
 * A parameter as PostgreSQL would receive it from node-postgres (its text form, untyped), as a
 * literal: an untyped literal is typed from its context exactly as an untyped parameter is. Only
 * text, finite numbers, booleans, dates, null, and arrays of text, finite numbers, booleans and
 * null (in node-postgres's text form); undefined for anything else (buffers, objects, arrays of
 * other things), which then travels as a real parameter.
 */
function asLiteral(value: unknown): string | undefined {
  if (value === null || value === undefined) return 'NULL';
  let text: string | undefined;
  if (typeof value === 'string') text = value;
  else if (typeof value === 'number' && Number.isFinite(value)) text = String(value);
  else if (typeof value === 'boolean') text = value ? 'true' : 'false';
  else if (value instanceof Date && Number.isFinite(value.getTime())) text = value.toISOString();
  else if (Array.isArray(value)) text = arrayText(value);
  if (text === undefined) return undefined;
  // PostgreSQL refuses NUL in text either way; as a parameter the error names the statement.
  if (text.includes('\u0000')) return undefined;
  return quoteLiteral(text);
}

/**
 * A statement cut at its placeholders: `pieces[0]`, then parameter `slots[0]` (0-based), then
 * `pieces[1]`, and so on; null when its placeholders cannot be replaced safely.
 */
interface Template {
  readonly pieces: readonly string[];
  readonly slots: readonly number[];
}

/**
 * `statement` cut at its `$n`, or null when a `$n` could be something other than a placeholder or
 * a literal could end up outside the statement: string constants, dollar quotes, comments, or a
 * second statement. Quoted identifiers are copied as they are (a `$1` inside one stays a name).
 */
function templateOf(statement: string): Template | null {
  const text = statement.replace(/;\s*$/, '');
  const pieces: string[] = [];
  const slots: number[] = [];
  let piece = 0;
  for (let at = 0; at < text.length;) {
    const char = text[at];
    if (char === '"') {
      // A quoted identifier runs to the next quote that is not doubled.
      let end = at + 1;
      for (;;) {
        end = text.indexOf('"', end);
        if (end < 0) return null;
        if (text[end + 1] === '"') end += 2;
        else break;
      }
      at = end + 1;
      continue;
    }
    if (char === "'" || char === ';' || (char === '-' && text[at + 1] === '-') || (char === '/' && text[at + 1] === '*')) return null;
    if (char === '$') {
      let end = at + 1;
      while (end < text.length && text.charCodeAt(end) >= 48 && text.charCodeAt(end) <= 57) end++;
      // A dollar quote.
      if (end === at + 1) return null;
      pieces.push(text.slice(piece, at));
      slots.push(Number(text.slice(at + 1, end)) - 1);
      piece = at = end;
      continue;
    }
    at++;
  }
  pieces.push(text.slice(piece));
  return { pieces, slots };
}

/**
 * Statements are mostly constants of the code, run thousands of times: each is cut once. Bounded,
 * for the few built at run time (a list of values of varying length).
 */
const TEMPLATE_CACHE_LIMIT = 2_000;
const templates = new Map<string, Template | null>();

/**
 * `statement` with its `$n` replaced by literals, or undefined when that cannot be done safely: a
 * parameter of another kind, or a statement where a `$n` could be something other than a
 * placeholder or a literal could end up outside the statement (see templateOf).
 */
export function inlineParameters(statement: string, parameters: readonly unknown[] = []): string | undefined {
  let template = templates.get(statement);
  if (template === undefined) {
    template = templateOf(statement);
    if (templates.size >= TEMPLATE_CACHE_LIMIT) templates.clear();
    templates.set(statement, template);
  }
  if (template === null) return undefined;
  const literals: string[] = [];
  for (const parameter of parameters) {
    const literal = asLiteral(parameter);
    if (literal === undefined) return undefined;
    literals.push(literal);
  }
  const { pieces, slots } = template;
  let inlined = pieces[0] as string;
  for (let index = 0; index < slots.length; index++) {
    // A placeholder without its parameter.
    const literal = literals[slots[index] as number];
    if (literal === undefined) return undefined;
    inlined += literal + (pieces[index + 1] as string);
  }
  return inlined;
}

/** TypeORM's answer to `query(statement, parameters, structured)` for pg's result of it. */
function typeormResult(raw: PgResult, structured: boolean | undefined): unknown {
  const result = new QueryResult();
  result.records = raw.rows;
  result.affected = raw.rowCount ?? undefined;
  result.raw = raw.command === 'UPDATE' || raw.command === 'DELETE' ? [raw.rows, raw.rowCount] : raw.rows;
  return structured ? result : result.raw;
}

/**
 * Runs `work` in a transaction whose statements travel together where they can: `opening` (SQL
 * that must run first, e.g. the tenant setting) waits for the transaction's first statement and
 * goes in the same simple-protocol message, and so do the writes `work` hands to deferWrite,
 * which wait for the next statement or for the COMMIT. A transaction that locks a row, changes it
 * and writes an outbox row costs two round trips instead of five or six; one that only writes,
 * one. PostgreSQL runs the statements of a message in order and stops at the first error, which
 * then aborts the transaction and surfaces where the message was sent (the next statement, or
 * the commit): the transaction rolls back as a whole, as before.
 *
 * Parameters are inlined as escaped literals (see inlineParameters); a statement that cannot be
 * inlined goes as an ordinary parameterised query after a message carrying what was pending.
 * PostgreSQL's own log of a failed statement, and pg_stat_activity, therefore show the values
 * where a parameterised statement would show `$n` (content is sealed before it is written; ids,
 * states and times are not).
 */
export async function pipelinedTransaction<T>(dataSource: DataSource, opening: string, work: (manager: EntityManager) => Promise<T>): Promise<T> {
  const runner = dataSource.createQueryRunner();
  const pending: Pending = {
    opening: null,
    writes: [],
    sendWithHeld: async (statements, label) => {
      const held = [...(pending.opening !== null ? [pending.opening] : []), ...pending.writes];
      pending.opening = null;
      pending.writes = [];
      const client = (await runner.connect()) as PoolClient;
      let results: PgResult | PgResult[];
      try {
        results = (await client.query([...held, ...statements].join(';\n'))) as unknown as PgResult | PgResult[];
      } catch (error) {
        throw new QueryFailedError(label, [], error as Error);
      }
      const all = Array.isArray(results) ? results : [results];
      return all.slice(all.length - statements.length);
    },
  };
  pendingOf.set(runner, pending);
  const query = runner.query.bind(runner);
  let begun = false;

  // When the server ends the session between two statements (a restart, pg_terminate_backend),
  // the connection's error event makes TypeORM release the runner and drop that error: the next
  // statement then fails with "already released", which says nothing of the outage. The
  // transaction keeps the connection's error and fails with it instead.
  const watch = watchConnection(runner);

  /**
   * Sends one simple-protocol message on the transaction's connection; its last statement's
   * result. A failure names the caller's statement (values inlined into the message stay out of
   * the application's errors and logs).
   */
  const send = async (text: string, statement: string): Promise<PgResult> => {
    const client = (await runner.connect()) as PoolClient;
    try {
      const results = (await client.query(text)) as unknown as PgResult | PgResult[];
      return Array.isArray(results) ? results[results.length - 1] : results;
    } catch (error) {
      throw new QueryFailedError(statement, [], error as Error);
    }
  };

  runner.query = (async (statement: string, parameters?: unknown[], structured?: boolean) => {
    if (!begun && statement === START_TRANSACTION && parameters === undefined) {
      begun = true;
      pending.opening = opening ? `${START_TRANSACTION};\n${opening}` : START_TRANSACTION;
      return undefined;
    }
    const neverSent = pending.opening !== null;
    if (statement === ROLLBACK) {
      // Held writes are dropped; with nothing sent at all there is nothing to roll back.
      pending.opening = null;
      pending.writes = [];
      return neverSent ? undefined : query(statement, parameters, structured as never);
    }
    // Writes held since the savepoint (a savepoint's own statement sends those before it) are undone with it.
    if (statement.startsWith(ROLLBACK_TO_SAVEPOINT)) pending.writes = [];
    const held = [...(neverSent ? [pending.opening as string] : []), ...pending.writes];
    pending.opening = null;
    pending.writes = [];
    if (statement === COMMIT) {
      // A transaction that neither read nor wrote has nothing to commit.
      if (neverSent && held.length === 1) return undefined;
      // PostgreSQL answers the COMMIT of a transaction an earlier statement aborted with ROLLBACK,
      // not an error: a caller that caught that statement's error (which may have been a held
      // write's) must not take the transaction for committed.
      const outcome = await send([...held, COMMIT].join(';\n'), COMMIT);
      if (outcome.command === ROLLBACK) throw new QueryFailedError(COMMIT, [], new Error('The transaction was rolled back: one of its statements failed'));
      return typeormResult(outcome, structured);
    }
    if (held.length === 0) return query(statement, parameters, structured as never);
    const inlined = inlineParameters(statement, parameters);
    if (inlined === undefined) {
      await send(held.join(';\n'), statement);
      return query(statement, parameters, structured as never);
    }
    return typeormResult(await send([...held, inlined].join(';\n'), statement), structured);
  }) as typeof runner.query;

  try {
    await runner.startTransaction();
    // Should TypeORM ever open a transaction with other words, the opening is sent on its own: never skipped.
    if (!begun) {
      begun = true;
      if (opening) await query(opening);
    }
    const result = await work(runner.manager);
    await runner.commitTransaction();
    return result;
  } catch (error) {
    // The original error is what the caller needs, whatever the rollback says.
    await runner.rollbackTransaction().catch(() => undefined);
    throw watch.lost ?? error;
  } finally {
    pendingOf.delete(runner);
    watch.stop();
    await runner.release();
  }
}

/**
 * Keeps the first error the runner's connection emits (a session the server ended, a socket that
 * broke) until stop(), which detaches the listener before the connection goes back to the pool.
 */
function watchConnection(runner: QueryRunner): { readonly lost: Error | undefined; stop(): void } {
  const connect = runner.connect.bind(runner);
  let client: PoolClient | undefined;
  let lost: Error | undefined;
  const onError = (error: Error): void => {
    lost ??= error;
  };
  runner.connect = (async () => {
    const connection = (await connect()) as PoolClient;
    if (client === undefined) {
      client = connection;
      client.on('error', onError);
    }
    return connection;
  }) as typeof runner.connect;
  return {
    get lost() {
      return lost;
    },
    stop() {
      client?.removeListener('error', onError);
    },
  };
}

/**
 * A write whose result nobody reads (an INSERT or UPDATE without RETURNING): inside a
 * pipelinedTransaction it waits for the transaction's next statement or its COMMIT and travels
 * with it, and its error, if any, surfaces there; anywhere else, or with parameters that cannot
 * be inlined, it runs at once. So an error caught around a later statement of the same
 * transaction may be this write's: the transaction is then aborted, and its COMMIT fails.
 */
export async function deferWrite(manager: EntityManager, statement: string, parameters: readonly unknown[] = []): Promise<void> {
  const pending = manager.queryRunner ? pendingOf.get(manager.queryRunner) : undefined;
  const inlined = pending ? inlineParameters(statement, parameters) : undefined;
  if (pending && inlined !== undefined) {
    pending.writes.push(inlined);
    return;
  }
  await manager.query(statement, [...parameters]);
}

/**
 * The rows of each of `statements`, run in order in one round trip: inside a pipelinedTransaction,
 * in one message with what the transaction held (each statement with its own snapshot, as in any
 * READ COMMITTED transaction: a statement after one that waited for a lock sees what committed
 * meanwhile); one after the other when not in one, or when a statement's parameters cannot be
 * inlined. A failure names the statements as written, with `$n` (the values inlined into the message
 * stay out of the application's errors and logs; PostgreSQL's own log of a failed statement and
 * pg_stat_activity show the message as sent, values included, as for every inlined statement).
 */
export async function queryInOneTrip(manager: EntityManager, statements: ReadonlyArray<{ readonly sql: string; readonly parameters?: readonly unknown[] }>): Promise<unknown[][]> {
  const pending = manager.queryRunner ? pendingOf.get(manager.queryRunner) : undefined;
  const inlined = pending ? statements.map(({ sql, parameters }) => inlineParameters(sql, parameters)) : [];
  // An empty statement would answer nothing, and the rows of the one before it would pass for its own.
  if (statements.some(({ sql }) => sql.replace(/;\s*$/, '').trim() === '')) throw new TypeError('queryInOneTrip: an empty statement');
  if (pending && statements.length > 0 && inlined.every((text) => text !== undefined)) {
    const results = await pending.sendWithHeld(inlined as string[], statements.map(({ sql }) => sql).join(';\n'));
    return results.map((result) => result.rows);
  }
  const runner = manager.queryRunner ?? manager.connection.createQueryRunner();
  try {
    const rows: unknown[][] = [];
    for (const { sql, parameters } of statements) rows.push((await runner.query(sql, [...(parameters ?? [])], true)).records);
    return rows;
  } finally {
    if (!manager.queryRunner) await runner.release();
  }
}
