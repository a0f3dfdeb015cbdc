import { createHash } from 'node:crypto';
import { DatabaseError, type Pool, type PoolClient, type QueryResult as PgResult } from 'pg';
import { DataSource, EntityManager, QueryFailedError, QueryRunner } from 'typeorm';
import { QueryResult } from 'typeorm/query-runner/QueryResult';

/**
 * Whether PostgreSQL's error `error` ended the session (FATAL or PANIC, e.g. pg_terminate_backend):
 * the connection is then dead even though the socket's close may come only after that answer, and
 * must not go back to the pool.
 */
export function endsSession(error: DatabaseError): boolean {
  return error.severity === 'FATAL' || error.severity === 'PANIC';
}

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
  opening: Item[] | null;
  writes: Item[];
  /** Sends what was held and then `statements` in one message: their results, in order. */
  sendWithHeld(statements: readonly Bound[], label: string): Promise<PgResult[]>;
  /** Sends what was held, `statement` and the COMMIT in one message: the statement's result; the transaction is over. */
  commitWith(statement: Bound, label: string): Promise<PgResult>;
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
  /** The statement as written, without a trailing semicolon. */
  readonly text: string;
  readonly pieces: readonly string[];
  readonly slots: readonly number[];
  /** The highest `$n` it uses: what PREPARE infers as its number of parameters. */
  readonly parameterCount: number;
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
      // A dollar quote; `$0`, which is no parameter; or a `$` inside a name (`a$1` is one identifier).
      if (end === at + 1 || Number(text.slice(at + 1, end)) < 1 || (at > 0 && IDENTIFIER_CHARACTER.test(text[at - 1] as string))) return null;
      pieces.push(text.slice(piece, at));
      slots.push(Number(text.slice(at + 1, end)) - 1);
      piece = at = end;
      continue;
    }
    at++;
  }
  pieces.push(text.slice(piece));
  return { text, pieces, slots, parameterCount: slots.reduce((highest, slot) => Math.max(highest, slot + 1), 0) };
}

/** A character that continues an unquoted name in PostgreSQL. */
const IDENTIFIER_CHARACTER = /[\p{L}\p{N}_$]/u;

/**
 * Statements are mostly constants of the code, run thousands of times: each is cut once. Bounded,
 * for the few built at run time (a list of values of varying length).
 */
const TEMPLATE_CACHE_LIMIT = 2_000;
const templates = new Map<string, Template | null>();

/** A statement with its parameters as literals, ready to travel inlined or as an EXECUTE. */
export interface Bound {
  readonly template: Template;
  readonly literals: readonly string[];
}

/**
 * `statement` with its parameters as literals, or undefined when it cannot be inlined safely: a
 * parameter of another kind, a placeholder without its parameter, or a statement where a `$n`
 * could be something other than a placeholder or a literal could end up outside the statement
 * (see templateOf).
 */
export function bind(statement: string, parameters: readonly unknown[] = []): Bound | undefined {
  let template = templates.get(statement);
  if (template === undefined) {
    template = templateOf(statement);
    if (templates.size >= TEMPLATE_CACHE_LIMIT) templates.clear();
    templates.set(statement, template);
  }
  if (template === null || template.parameterCount > parameters.length) return undefined;
  const literals: string[] = [];
  for (const parameter of parameters) {
    const literal = asLiteral(parameter);
    if (literal === undefined) return undefined;
    literals.push(literal);
  }
  return { template, literals };
}

function inlineText({ template: { pieces, slots }, literals }: Bound): string {
  let inlined = pieces[0] as string;
  for (let index = 0; index < slots.length; index++) inlined += (literals[slots[index] as number] as string) + (pieces[index + 1] as string);
  return inlined;
}

/**
 * `statement` with its `$n` replaced by literals, or undefined when that cannot be done safely: a
 * parameter of another kind, or a statement where a `$n` could be something other than a
 * placeholder or a literal could end up outside the statement (see templateOf).
 */
export function inlineParameters(statement: string, parameters: readonly unknown[] = []): string | undefined {
  const bound = bind(statement, parameters);
  return bound && inlineText(bound);
}

/** What one message carries: SQL sent as it is (one statement each), or a bound statement. */
export type Item = string | Bound;

/** A message's text, where each item's result is among the message's results, and the statements it prepares. */
export interface Rendered {
  readonly text: string;
  readonly resultIndexes: readonly number[];
  readonly introduced: readonly string[];
}

/** SQLSTATE of "cached plan must not change result type" (among others): see Preparation. */
const FEATURE_NOT_SUPPORTED = '0A000';
/** SQLSTATEs of a prepared statement that exists where none was expected, or the reverse: the registry is out of step. */
const OUT_OF_STEP = new Set(['42P05', '26000']);
/** A probe that learnt nothing of its statement (no connection, a shutdown) is tried again after this long. */
const PROBE_RETRY_MS = 30_000;
/** SQLSTATE class of a statement PostgreSQL refuses as written (syntax, types, names). */
const SYNTAX_OR_ACCESS_RULE = '42';

/** A pool's prepared statements: at most this many distinct statements (each costs memory on every connection). */
const MAX_PREPARED_STATEMENTS = 200;
/** Plan contexts (sets of settings, see Preparation.render) whose statements are prepared, at most. */
const MAX_PLAN_CONTEXTS = 8;
/**
 * Statements prepared under plan contexts, all contexts together, at most: with the plain ones, a
 * connection holds at most twice MAX_PREPARED_STATEMENTS. Beyond it, statements go inlined.
 */
const MAX_CONTEXT_STATEMENTS = MAX_PREPARED_STATEMENTS;
/** Longer statements (rare, built at run time) are not worth a place among them. */
const MAX_PREPARED_LENGTH = 8_000;

/**
 * Server-side prepared statements for one pool, used from simple-protocol messages: the first
 * time a connection runs a statement its message carries `PREPARE name AS …` before
 * `EXECUTE name(literals)`, and afterwards only the EXECUTE. PostgreSQL then parses and analyses
 * the statement once per connection and keeps its plan (custom plans for the first executions,
 * then a generic one where its estimated cost is no worse), where an inlined statement is parsed,
 * analysed and planned on every execution: most of PostgreSQL's work per mission. The messages
 * stay one round trip, with the same order and the same all-or-nothing errors.
 *
 * A statement is prepared only after a probe (PREPARE and DEALLOCATE on a connection of the pool,
 * outside any transaction) has shown it prepares: a parameter whose type PostgreSQL cannot infer
 * (`$1 IS NULL`) refuses it, and it stays inlined, where an untyped literal is read as text. Until
 * the probe answers it is inlined, so no transaction waits for a probe's answer or fails because
 * of one (a probe takes one of the pool's connections for one round trip). A probe that learnt
 * nothing (no connection, a shutdown) is tried again 30 s later.
 * PREPARE outlives a rollback; a message that failed may or may not have run its PREPAREs, so the
 * transaction's connection then forgets them all (DEALLOCATE ALL) before it returns to the pool.
 * A kept plan a migration made obsolete in a way PostgreSQL does not re-plan by itself ("cached
 * plan must not change result type", after a column was added to a table a `SELECT *` reads)
 * fails the transaction that met it; every connection of the pool then forgets its prepared
 * statements before its next message (`DEALLOCATE ALL` at its head), so each replica fails one
 * transaction, not one per connection. The statements of this code name their columns.
 */
export class Preparation {
  private readonly verdicts = new Map<string, { readonly name: string } | { readonly retryAt: number } | 'probing' | 'refused'>();
  private readonly names = new WeakMap<PoolClient, Set<string>>();
  /** Bumped when a kept plan turned out obsolete; a connection's names hold for the generation they were prepared in. */
  private generation = 0;
  private readonly generationOf = new WeakMap<PoolClient, number>();
  private readonly unusable = new WeakSet<PoolClient>();
  private preparable = 0;
  /** Names of the statements prepared under each plan context (see render). */
  private readonly contextNames = new Map<string, Map<string, string>>();
  private contextStatements = 0;

  constructor(private readonly pool: Pool) {}

  /**
   * The message for `items` on `client`. `planContext` names the settings its transaction plans
   * under (tenantTransaction's `settings`): a statement prepared under one context has a name of
   * its own there, so the plan PostgreSQL keeps for it is only ever used under the same settings.
   */
  render(client: PoolClient, items: readonly Item[], planContext?: string): Rendered {
    const parts: string[] = [];
    if (!this.unusable.has(client) && (this.generationOf.get(client) ?? 0) < this.generation) {
      if (this.names.get(client)?.size) parts.push('DEALLOCATE ALL');
      this.names.delete(client);
    }
    this.generationOf.set(client, this.generation);
    const prepared = this.unusable.has(client) ? undefined : this.namesOn(client);
    const resultIndexes: number[] = [];
    const introduced: string[] = [];
    for (const item of items) {
      if (typeof item === 'string') parts.push(item);
      else {
        const name = prepared && this.nameOf(item.template, planContext);
        if (name === undefined) parts.push(inlineText(item));
        else {
          if (!prepared?.has(name) && !introduced.includes(name)) {
            parts.push(`PREPARE ${name} AS ${item.template.text}`);
            introduced.push(name);
          }
          const { literals, template } = item;
          parts.push(template.parameterCount === 0 ? `EXECUTE ${name}` : `EXECUTE ${name}(${literals.slice(0, template.parameterCount).join(', ')})`);
        }
      }
      resultIndexes.push(parts.length - 1);
    }
    return { text: parts.join(';\n'), resultIndexes, introduced };
  }

  /**
   * Whether a message that failed with `error` may have left its connection with prepared
   * statements it does not know of, or with a kept plan a migration made obsolete: then the
   * connection must forget them all (forget) before it serves anything else.
   */
  failed(rendered: Rendered, error: unknown): boolean {
    const code = error instanceof DatabaseError ? (error.code ?? '') : '';
    // A kept plan a migration made obsolete is so on every connection of the pool: each forgets
    // its prepared statements before its next message, instead of failing a transaction each.
    if (code === FEATURE_NOT_SUPPORTED) this.generation++;
    return rendered.introduced.length > 0 || code === FEATURE_NOT_SUPPORTED || OUT_OF_STEP.has(code);
  }

  /** After a message ran: what it prepared is known to its connection. */
  ran(client: PoolClient, rendered: Rendered): void {
    for (const name of rendered.introduced) this.namesOn(client).add(name);
  }

  /**
   * After a transaction whose message failed with PREPAREs in it (which may or may not have run),
   * before its connection returns to the pool: the connection forgets every prepared statement,
   * or, if it cannot, is never used for them again.
   */
  async forget(client: PoolClient): Promise<void> {
    this.names.delete(client);
    try {
      await client.query('DEALLOCATE ALL');
    } catch {
      this.unusable.add(client);
    }
  }

  private namesOn(client: PoolClient): Set<string> {
    let names = this.names.get(client);
    if (names === undefined) this.names.set(client, (names = new Set()));
    return names;
  }

  /** The statement's name once a probe has shown it prepares (in `planContext`, if any); undefined meanwhile, or if it does not. */
  private nameOf(template: Template, planContext?: string): string | undefined {
    let verdict = this.verdicts.get(template.text);
    if (verdict !== undefined && typeof verdict !== 'string' && 'retryAt' in verdict && Date.now() >= verdict.retryAt) {
      this.verdicts.delete(template.text);
      verdict = undefined;
    }
    if (verdict === undefined) {
      if (this.verdicts.size < MAX_PREPARED_STATEMENTS * 2 && this.preparable < MAX_PREPARED_STATEMENTS && template.text.length <= MAX_PREPARED_LENGTH) {
        this.verdicts.set(template.text, 'probing');
        void this.probe(template.text);
      }
      return undefined;
    }
    if (typeof verdict === 'string' || !('name' in verdict)) return undefined;
    return planContext === undefined ? verdict.name : this.nameIn(planContext, template.text);
  }

  /** A statement's name under a plan context: a hash of both, worked out once (contexts are few, statements bounded). */
  private nameIn(planContext: string, text: string): string | undefined {
    let names = this.contextNames.get(planContext);
    if (names === undefined) {
      // Settings are the code's constants: more contexts than this are settings built at run time, inlined.
      if (this.contextNames.size >= MAX_PLAN_CONTEXTS) return undefined;
      this.contextNames.set(planContext, (names = new Map()));
    }
    let name = names.get(text);
    if (name === undefined) {
      if (this.contextStatements >= MAX_CONTEXT_STATEMENTS) return undefined;
      this.contextStatements++;
      names.set(text, (name = statementName(`${planContext}\0${text}`)));
    }
    return name;
  }

  private async probe(text: string): Promise<void> {
    let client: PoolClient;
    try {
      client = await this.pool.connect();
    } catch {
      // No connection now (a restart, a full server): nothing is known of the statement; probed again later.
      this.verdicts.set(text, { retryAt: Date.now() + PROBE_RETRY_MS });
      return;
    }
    let broken: Error | undefined;
    const onError = (error: Error): void => {
      broken ??= error;
    };
    client.on('error', onError);
    try {
      await client.query(`PREPARE mission_probe AS ${text};\nDEALLOCATE mission_probe`);
    } catch (error) {
      // PostgreSQL refused the statement itself (a type it cannot infer, a syntax it rejects): it
      // stays inlined. Anything else (a lost connection, a shutdown, a cancelled or timed-out
      // query) says nothing of the statement: it is probed again later.
      if (error instanceof DatabaseError && (error.code ?? '').startsWith(SYNTAX_OR_ACCESS_RULE)) this.verdicts.set(text, 'refused');
      else {
        this.verdicts.set(text, { retryAt: Date.now() + PROBE_RETRY_MS });
        if (!(error instanceof DatabaseError) || endsSession(error)) broken ??= error as Error;
      }
      return;
    } finally {
      client.removeListener('error', onError);
      client.release(broken);
    }
    if (this.preparable >= MAX_PREPARED_STATEMENTS) {
      this.verdicts.set(text, 'refused');
      return;
    }
    this.preparable++;
    this.verdicts.set(text, { name: statementName(text) });
  }
}

function statementName(text: string): string {
  return `mission_${createHash('sha256').update(text).digest('hex').slice(0, 32)}`;
}

const preparations = new WeakMap<Pool, Preparation>();

export function preparationOf(dataSource: DataSource): Preparation {
  return preparationOfPool((dataSource.driver as unknown as { master: Pool }).master);
}

export function preparationOfPool(pool: Pool): Preparation {
  let preparation = preparations.get(pool);
  if (preparation === undefined) preparations.set(pool, (preparation = new Preparation(pool)));
  return preparation;
}

/** TypeORM's answer to `query(statement, parameters, structured)` for pg's result of it. */
function typeormResult(raw: PgResult, structured: boolean | undefined): unknown {
  const result = new QueryResult();
  result.records = raw.rows;
  result.affected = raw.rowCount ?? undefined;
  result.raw = raw.command === 'UPDATE' || raw.command === 'DELETE' ? [raw.rows, raw.rowCount] : raw.rows;
  return structured ? result : result.raw;
}

/** SQL run first in a transaction (the tenant setting), with its parameters. */
export interface OpeningStatement {
  readonly sql: string;
  readonly parameters?: readonly unknown[];
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
 * Parameters are inlined as escaped literals (see inlineParameters), into the statement or into
 * the EXECUTE of its prepared form (see Preparation; a transaction whose opening changes how
 * statements are planned names those settings in `planContext`, and its statements are prepared
 * under names of their own). A statement that cannot be inlined goes as an ordinary parameterised query
 * after a message carrying what was pending. PostgreSQL's own log of a failed statement, and
 * pg_stat_activity, therefore show the values where a parameterised statement would show `$n`
 * (content is sealed before it is written; ids, states and times are not).
 */
export async function pipelinedTransaction<T>(
  dataSource: DataSource,
  opening: readonly OpeningStatement[],
  work: (manager: EntityManager) => Promise<T>,
  options: {
    /** The settings the transaction's statements are planned under, if its opening changes any (see Preparation.render). */
    readonly planContext?: string;
  } = {},
): Promise<T> {
  const openingItems: Item[] = [START_TRANSACTION];
  for (const { sql, parameters } of opening) {
    const bound = bind(sql, parameters);
    if (bound === undefined) throw new TypeError(`A transaction's opening statement must take only values that can be inlined: ${sql}`);
    openingItems.push(bound);
  }
  const preparation = preparationOf(dataSource);
  const runner = dataSource.createQueryRunner();
  /** A message with PREPAREs failed: the connection may hold statements it does not know of. */
  let uncertain: PoolClient | undefined;

  /**
   * Sends `items` as one simple-protocol message on the transaction's connection: the results of
   * all of them, in order. A failure names the caller's statement (values inlined into the
   * message stay out of the application's errors and logs).
   */
  const sendItems = async (items: readonly Item[], label: string): Promise<PgResult[]> => {
    const client = (await runner.connect()) as PoolClient;
    // Once a message of this transaction failed with PREPAREs in it, which of them ran is unknown
    // until the connection forgets them all at the end: the rest of the transaction (after a
    // savepoint's rollback) goes inlined.
    const rendered: Rendered =
      uncertain === undefined
        ? preparation.render(client, items, options.planContext)
        : { text: items.map((item) => (typeof item === 'string' ? item : inlineText(item))).join(';\n'), resultIndexes: items.map((_item, index) => index), introduced: [] };
    let results: PgResult | PgResult[];
    try {
      results = (await client.query(rendered.text)) as unknown as PgResult | PgResult[];
    } catch (error) {
      if (preparation.failed(rendered, error)) uncertain = client;
      throw new QueryFailedError(label, [], error as Error);
    }
    preparation.ran(client, rendered);
    const all = Array.isArray(results) ? results : [results];
    return rendered.resultIndexes.map((index) => all[index] as PgResult);
  };

  /** Committed with its last statement (queryAndCommit): nothing may follow, and there is nothing left to commit or roll back. */
  let committed = false;
  const pending: Pending = {
    opening: null,
    writes: [],
    commitWith: async (statement, label) => {
      // Inside a savepoint the COMMIT would end the whole transaction, not the savepoint.
      if (((runner as unknown as { transactionDepth?: number }).transactionDepth ?? 1) > 1) throw new Error('queryAndCommit inside a savepoint');
      const held = [...(pending.opening ?? []), ...pending.writes];
      pending.opening = null;
      pending.writes = [];
      const results = await sendItems([...held, statement, COMMIT], label);
      // As at COMMIT below: after a statement whose error the caller caught, PostgreSQL answers the COMMIT with ROLLBACK.
      if ((results[results.length - 1] as PgResult).command === ROLLBACK)
        throw new QueryFailedError(COMMIT, [], new Error('The transaction was rolled back: one of its statements failed'));
      committed = true;
      // Over: deferWrite, queryInOneTrip and queryAndCommit now go through runner.query, which refuses them.
      pendingOf.delete(runner);
      return results[results.length - 2] as PgResult;
    },
    sendWithHeld: async (statements, label) => {
      const held = [...(pending.opening ?? []), ...pending.writes];
      pending.opening = null;
      pending.writes = [];
      const results = await sendItems([...held, ...statements], label);
      return results.slice(held.length);
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

  /** Sends `items` in one message: the last one's result. */
  const send = async (items: readonly Item[], statement: string): Promise<PgResult> => {
    const results = await sendItems(items, statement);
    return results[results.length - 1] as PgResult;
  };

  runner.query = (async (statement: string, parameters?: unknown[], structured?: boolean) => {
    if (committed) {
      if (statement === COMMIT || statement === ROLLBACK) return undefined;
      throw new Error('The transaction was committed with its last statement (queryAndCommit): no statement may follow it');
    }
    if (!begun && statement === START_TRANSACTION && parameters === undefined) {
      begun = true;
      pending.opening = openingItems;
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
    const held = [...(pending.opening ?? []), ...pending.writes];
    pending.opening = null;
    pending.writes = [];
    if (statement === COMMIT) {
      // A transaction that neither read nor wrote has nothing to commit.
      if (neverSent && held.length === openingItems.length) return undefined;
      // PostgreSQL answers the COMMIT of a transaction an earlier statement aborted with ROLLBACK,
      // not an error: a caller that caught that statement's error (which may have been a held
      // write's) must not take the transaction for committed.
      const outcome = await send([...held, COMMIT], COMMIT);
      if (outcome.command === ROLLBACK) throw new QueryFailedError(COMMIT, [], new Error('The transaction was rolled back: one of its statements failed'));
      return typeormResult(outcome, structured);
    }
    const bound = bind(statement, parameters);
    // Nothing held: a statement that can be inlined still goes through the pipeline, prepared.
    if (held.length === 0) return bound === undefined ? query(statement, parameters, structured as never) : typeormResult(await send([bound], statement), structured);
    if (bound === undefined) {
      await send(held, statement);
      return query(statement, parameters, structured as never);
    }
    return typeormResult(await send([...held, bound], statement), structured);
  }) as typeof runner.query;

  try {
    await runner.startTransaction();
    // Should TypeORM ever open a transaction with other words, the opening is sent on its own: never skipped.
    if (!begun) {
      begun = true;
      for (const { sql, parameters } of opening) await query(sql, parameters ? [...parameters] : undefined);
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
    if (uncertain && !watch.lost) await preparation.forget(uncertain);
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
  const bound = pending ? bind(statement, parameters) : undefined;
  if (pending && bound !== undefined) {
    pending.writes.push(bound);
    return;
  }
  await manager.query(statement, [...parameters]);
}

/**
 * The rows of `statement` (one that returns rows), run as the transaction's last: inside a
 * pipelinedTransaction, in one message with what the transaction held and its COMMIT (a
 * read-only transaction of one statement is then one round trip instead of two). The transaction
 * is committed when this returns: the caller must issue nothing after it (an attempt fails), and
 * the COMMIT at the transaction's end sends nothing. A statement that fails aborts the
 * transaction, which rolls back as usual; inside a savepoint it is refused. Outside a
 * pipelinedTransaction, or with parameters that cannot be inlined, an ordinary query (the
 * transaction then commits at its end).
 */
export async function queryAndCommit(manager: EntityManager, statement: string, parameters: readonly unknown[] = []): Promise<unknown[]> {
  const pending = manager.queryRunner ? pendingOf.get(manager.queryRunner) : undefined;
  const bound = pending ? bind(statement, parameters) : undefined;
  if (pending && bound !== undefined) return (await pending.commitWith(bound, statement)).rows;
  return manager.query(statement, [...parameters]);
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
  const bound = pending ? statements.map(({ sql, parameters }) => bind(sql, parameters)) : [];
  // An empty statement would answer nothing, and the rows of the one before it would pass for its own.
  if (statements.some(({ sql }) => sql.replace(/;\s*$/, '').trim() === '')) throw new TypeError('queryInOneTrip: an empty statement');
  if (pending && statements.length > 0 && bound.every((item) => item !== undefined)) {
    const results = await pending.sendWithHeld(bound as Bound[], statements.map(({ sql }) => sql).join(';\n'));
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
