/** What every query value is replaced with in logs and traces. */
export const REDACTED = 'REDACTED';

/**
 * A request target (`/path?query`) or query string with every query value replaced by REDACTED:
 * query strings carry tenant content (a Brain search's `q`, list cursors), which logs and traces
 * must not hold. Parameter names stay, so a reader still sees what was asked; a value-less or
 * malformed pair is redacted whole.
 */
export function redactQuery(target: string): string {
  const mark = target.indexOf('?');
  if (mark < 0) return target;
  const path = target.slice(0, mark);
  const query = target.slice(mark + 1);
  return `${path}?${redactQueryString(query)}`;
}

/** A query string (no leading `?`) with every value replaced by REDACTED. */
export function redactQueryString(query: string): string {
  if (query === '') return '';
  return query
    .split('&')
    .map((pair) => {
      const equals = pair.indexOf('=');
      const name = equals < 0 ? pair : pair.slice(0, equals);
      // Only a plain name survives; anything odd in it might itself be content.
      return /^[A-Za-z0-9_.\-[\]]{1,64}$/.test(name) ? `${name}=${REDACTED}` : REDACTED;
    })
    .join('&');
}

/**
 * SQL with every string literal replaced by `'REDACTED'`: statements sent with their values
 * inlined (a tenant read, a pipelined transaction) name tenants, ids and sealed payloads, which a
 * span's statement text must not carry. Dollar-quoted bodies (migrations, functions) are kept.
 */
export function redactSqlLiterals(sql: string): string {
  return sql.replace(/(?<![\w$])(?:[Ee]'(?:[^'\\]|''|\\.)*'?|[UuBbXxNn]?'(?:[^']|'')*'?)/g, `'${REDACTED}'`);
}
