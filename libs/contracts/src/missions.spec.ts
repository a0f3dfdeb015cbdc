import { DomainError, parseOrThrow, SubmitMissionSchema } from './index';

function fieldsOf(body: unknown): string[] {
  try {
    parseOrThrow(SubmitMissionSchema, body);
  } catch (error) {
    if (error instanceof DomainError) return (error.errors ?? []).map((e) => e.field);
    throw error;
  }
  return [];
}

describe('SubmitMissionSchema', () => {
  it('accepts a minimal mission and keeps steps optional', () => {
    const parsed = parseOrThrow(SubmitMissionSchema, { title: 'T', objective: 'Find it' });
    expect(parsed).toEqual({ title: 'T', objective: 'Find it' });
  });

  it('accepts both step kinds', () => {
    const parsed = parseOrThrow(SubmitMissionSchema, {
      title: 'T',
      objective: 'O',
      steps: [
        { type: 'brain.query', query: 'q', k: 3 },
        { type: 'approval', title: 'Check' },
      ],
    });
    expect(parsed.steps).toHaveLength(2);
  });

  it('names each invalid field', () => {
    expect(fieldsOf({ title: '', objective: 'x'.repeat(10_001), metadata: { k: 1 } }).sort()).toEqual(['metadata.k', 'objective', 'title'].sort());
  });

  it('rejects unknown fields, at the top and inside steps', () => {
    expect(fieldsOf({ title: 'T', objective: 'O', colour: 'red' })).toEqual(['colour']);
    expect(fieldsOf({ title: 'T', objective: 'O', steps: [{ type: 'brain.query', extra: 1 }] })).toEqual(['steps.0.extra']);
  });

  it('bounds steps, k, metadata keys and input size', () => {
    const steps = Array.from({ length: 21 }, () => ({ type: 'brain.query' }));
    expect(fieldsOf({ title: 'T', objective: 'O', steps })).toEqual(['steps']);
    expect(fieldsOf({ title: 'T', objective: 'O', steps: [{ type: 'brain.query', k: 21 }] })).toEqual(['steps.0.k']);
    const metadata = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`k${i}`, 'v']));
    expect(fieldsOf({ title: 'T', objective: 'O', metadata })).toEqual(['metadata']);
    expect(fieldsOf({ title: 'T', objective: 'O', input: { blob: 'x'.repeat(256 * 1024) } })).toEqual(['input']);
  });

  it('rejects an unknown step type and an approval without a title', () => {
    expect(fieldsOf({ title: 'T', objective: 'O', steps: [{ type: 'shell' }] })).toEqual(['steps.0.type']);
    expect(fieldsOf({ title: 'T', objective: 'O', steps: [{ type: 'approval' }] })).toEqual(['steps.0.title']);
  });
});
