import { DatabaseError } from 'pg';
import { QueryFailedError } from 'typeorm';
import { sqlStateOf } from './database';

describe('sqlStateOf', () => {
  const answered = (code: string): DatabaseError => Object.assign(new DatabaseError('refused', 0, 'error'), { code });

  it("reads PostgreSQL's SQLSTATE from node-postgres's error and from TypeORM's around it", () => {
    expect(sqlStateOf(answered('40P01'))).toBe('40P01');
    expect(sqlStateOf(new QueryFailedError('SELECT 1', [], answered('MS409')))).toBe('MS409');
  });

  it('is undefined for anything that carries none', () => {
    for (const error of [new Error('no state'), null, undefined, 'text', { code: 57014 }, { driverError: { code: null } }]) expect(sqlStateOf(error)).toBeUndefined();
  });
});
