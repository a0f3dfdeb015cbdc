import { PostgresWriteSnapshot, postgresWritesBetween } from './postgres-writes';

const snapshot = (overrides: Partial<PostgresWriteSnapshot>): PostgresWriteSnapshot => ({
  walRecords: 0,
  walFullPageImages: 0,
  walBytes: 0,
  checkpoints: 0,
  checkpointBuffersWritten: 0,
  io: {},
  ...overrides,
});

describe('postgresWritesBetween', () => {
  it('counts what was written between the snapshots only, by process, object and context, largest first', () => {
    const before = snapshot({
      walRecords: 1_000,
      walFullPageImages: 10,
      walBytes: 50e6,
      checkpoints: 2,
      checkpointBuffersWritten: 100,
      io: { 'client backend/relation/normal': { writeBytes: 10e6, extendBytes: 5e6, fsyncs: 0 }, 'checkpointer/relation/normal': { writeBytes: 9e6, extendBytes: 0, fsyncs: 3 } },
    });
    const after = snapshot({
      walRecords: 3_000,
      walFullPageImages: 1_010,
      walBytes: 90e6,
      checkpoints: 3,
      checkpointBuffersWritten: 600,
      io: {
        'client backend/relation/normal': { writeBytes: 20e6, extendBytes: 7e6, fsyncs: 0 },
        'checkpointer/relation/normal': { writeBytes: 9.2e6, extendBytes: 0, fsyncs: 4 },
        'client backend/wal/init': { writeBytes: 32e6, extendBytes: 0, fsyncs: 0 },
      },
    });
    expect(postgresWritesBetween(before, after)).toEqual({
      walMegabytes: 40,
      walRecords: 2_000,
      walFullPageImages: 1_000,
      fullPageImageShare: 0.2, // 1,000 images of 8 kB in 40 MB
      checkpoints: 1,
      checkpointBuffersWritten: 500,
      // The checkpointer's 0.2 MB is below the 0.5 MB shown.
      io: { 'client backend/wal/init': 32, 'client backend/relation/normal': 12 },
    });
    expect(Object.keys(postgresWritesBetween(before, after).io)).toEqual(['client backend/wal/init', 'client backend/relation/normal']);
  });

  it('says nothing was written when nothing was', () => {
    const same = snapshot({ walBytes: 5e6, io: { 'walwriter/wal/normal': { writeBytes: 5e6, extendBytes: 0, fsyncs: 1 } } });
    expect(postgresWritesBetween(same, same)).toEqual({
      walMegabytes: 0,
      walRecords: 0,
      walFullPageImages: 0,
      fullPageImageShare: 0,
      checkpoints: 0,
      checkpointBuffersWritten: 0,
      io: {},
    });
  });
});
