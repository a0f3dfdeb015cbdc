import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';

/**
 * CPU accounting from /proc (Linux): who used the cores while a measured run was on. Elsewhere
 * every figure is null and the benchmark still runs.
 */
interface ProcessTicks {
  readonly ppid: number;
  readonly comm: string;
  /** Start time since boot: tells a reused pid from the process that had it before. */
  readonly started: number;
  readonly ticks: number;
  /** Command line, read for PostgreSQL processes only (it names a backend's database). */
  readonly cmdline?: string;
}

interface Snapshot {
  readonly at: number;
  readonly processes: Map<number, ProcessTicks>;
  /** Busy and total jiffies of all cores (/proc/stat). */
  readonly machine: { readonly busy: number; readonly total: number };
  readonly self: NodeJS.CpuUsage;
}

export interface CpuReport {
  /** Percent of one core (100 = one core fully busy). */
  readonly client: number;
  /** Each server process with its descendants (e.g. embedded PostgreSQL), percent of one core. */
  readonly servers: Record<string, number>;
  /** The same, as CPU milliseconds used over the run (for CPU per request: divide by the requests). */
  readonly serversCpuMs: Record<string, number>;
  /** Length of the run in seconds. */
  readonly seconds: number;
  /** Everything else that was busy (system PostgreSQL, the Kafka JVM, kernel threads, other people's work), by command name, ≥ 1 %. */
  readonly others: Record<string, number>;
  /** All cores together: percent of one core, out of cores × 100. */
  readonly machineBusy: number;
  readonly machineCapacity: number;
}

/** The name under which kernel threads are summed in `others`. */
export const KERNEL_THREADS = 'kernel threads';

let clockTicks: number | undefined;

export function ticksPerSecond(): number {
  if (clockTicks === undefined) {
    try {
      clockTicks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      clockTicks = 100;
    }
  }
  return clockTicks;
}

function readProcesses(): Map<number, ProcessTicks> {
  const processes = new Map<number, ProcessTicks>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const close = stat.lastIndexOf(')');
      const comm = stat.slice(stat.indexOf('(') + 1, close);
      // Fields after the command, numbered from 1 over the whole line: state(3) ppid(4) ...
      // utime(14) stime(15) ... starttime(22).
      const fields = stat.slice(close + 2).split(' ');
      const cmdline = comm === 'postgres' ? readFileSync(`/proc/${entry}/cmdline`, 'utf8').replace(/\0/g, ' ').trim() : undefined;
      processes.set(Number(entry), { ppid: Number(fields[1]), comm, started: Number(fields[19]), ticks: Number(fields[11]) + Number(fields[12]), cmdline });
    } catch {
      // the process ended while we looked
    }
  }
  return processes;
}

function readMachine(): { busy: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  const values = line.trim().split(/\s+/).slice(1).map(Number);
  const total = values.slice(0, 8).reduce((sum, value) => sum + value, 0);
  const idle = (values[3] ?? 0) + (values[4] ?? 0);
  return { busy: total - idle, total };
}

export function cpuSnapshot(): Snapshot | undefined {
  try {
    return { at: performance.now(), processes: readProcesses(), machine: readMachine(), self: process.cpuUsage() };
  } catch {
    return undefined;
  }
}

function descendants(root: number, processes: Map<number, ProcessTicks>): Set<number> {
  const found = new Set<number>([root]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, info] of processes) {
      if (!found.has(pid) && found.has(info.ppid)) {
        found.add(pid);
        grew = true;
      }
    }
  }
  return found;
}

const round1 = (value: number): number => Math.round(value * 10) / 10;

/**
 * The PostgreSQL servers this process started (an embedded PostgreSQL's postmaster, whose
 * children are its backends and background processes): its descendants named postgres whose
 * parent is not.
 */
export function postgresStartedHere(snapshot: Snapshot | undefined): number[] {
  if (!snapshot) return [];
  return [...descendants(process.pid, snapshot.processes)].filter((pid) => {
    const info = snapshot.processes.get(pid);
    return info?.comm === 'postgres' && snapshot.processes.get(info.ppid)?.comm !== 'postgres';
  });
}

/** Names of PostgreSQL processes outside our process trees, by what they do. */
export const POSTGRES_SERVER = 'postgres (server processes)';
export const POSTGRES_OTHER_DATABASES = 'postgres (other databases)';
export const POSTGRES_BENCH_DATABASE = 'postgres (benchmark database)';

/** A backend's title: "postgres: [cluster: ]user database host(port) state", or "[local]" for a Unix socket. */
export const POSTGRES_BACKEND = /^postgres: (?:\S+: )?\S+ (\S+) (?:[^ ]+\(\d+\)|\[local\])/;

function postgresRole(cmdline: string | undefined, databaseName: string | undefined): string {
  const database = cmdline ? POSTGRES_BACKEND.exec(cmdline)?.[1] : undefined;
  if (database === undefined) return POSTGRES_SERVER;
  return database === databaseName ? POSTGRES_BENCH_DATABASE : POSTGRES_OTHER_DATABASES;
}

/**
 * CPU use between two snapshots; `servers` maps names to the pids of the processes we started.
 * With `databaseName`, the system PostgreSQL's backends serving that database count as a server.
 */
/**
 * CPU milliseconds per unit of work (a request, a mission) of each server over a run, three
 * significant digits: e.g. the Kafka broker's CPU time divided by the requests answered.
 */
export function cpuMsPer(cpu: CpuReport | null, count: number): Record<string, number> | null {
  if (!cpu || count <= 0) return null;
  return Object.fromEntries(Object.entries(cpu.serversCpuMs).map(([name, value]) => [name, Number((value / count).toPrecision(3))]));
}

export function cpuBetween(before: Snapshot | undefined, after: Snapshot | undefined, servers: Record<string, number>, cores: number, databaseName?: string): CpuReport | null {
  if (!before || !after) return null;
  const seconds = (after.at - before.at) / 1000;
  if (seconds <= 0) return null;
  const hz = ticksPerSecond();
  const used = (pid: number): number => {
    const end = after.processes.get(pid);
    if (!end) return 0;
    const start = before.processes.get(pid);
    // A process born during the run is counted from its start.
    return start && start.started === end.started ? end.ticks - start.ticks : end.ticks;
  };
  const percent = (ticks: number): number => round1((ticks / hz / seconds) * 100);

  const accounted = new Set<number>([process.pid]);
  const serverCpu: Record<string, number> = {};
  const serverCpuMs: Record<string, number> = {};
  const milliseconds = (ticks: number): number => Math.round((ticks / hz) * 1000);
  for (const [name, root] of Object.entries(servers)) {
    let ticks = 0;
    for (const pid of descendants(root, after.processes)) {
      if (accounted.has(pid)) continue;
      accounted.add(pid);
      ticks += used(pid);
    }
    serverCpu[name] = percent(ticks);
    serverCpuMs[name] = milliseconds(ticks);
  }
  const byCommand = new Map<string, number>();
  let benchDatabase = 0;
  for (const [pid, info] of after.processes) {
    if (accounted.has(pid)) continue;
    // Kernel threads (children of kthreadd) mostly do work our own processes cause (network, disk).
    const name = pid === 2 || info.ppid === 2 ? KERNEL_THREADS : info.comm === 'postgres' ? postgresRole(info.cmdline, databaseName) : info.comm;
    if (name === POSTGRES_BENCH_DATABASE) benchDatabase += used(pid);
    else byCommand.set(name, (byCommand.get(name) ?? 0) + used(pid));
  }
  if (databaseName !== undefined) {
    serverCpu[POSTGRES_BENCH_DATABASE] = percent(benchDatabase);
    serverCpuMs[POSTGRES_BENCH_DATABASE] = milliseconds(benchDatabase);
  }
  const others: Record<string, number> = {};
  for (const [comm, ticks] of [...byCommand].sort((a, b) => b[1] - a[1])) {
    const value = percent(ticks);
    if (value >= 1) others[comm] = value;
  }
  const self = after.self.user + after.self.system - before.self.user - before.self.system;
  const machineTotal = after.machine.total - before.machine.total;
  return {
    client: round1((self / 1e6 / seconds) * 100),
    servers: serverCpu,
    serversCpuMs: serverCpuMs,
    seconds: Math.round(seconds * 1000) / 1000,
    others,
    machineBusy: machineTotal > 0 ? round1(((after.machine.busy - before.machine.busy) / machineTotal) * cores * 100) : 0,
    machineCapacity: cores * 100,
  };
}

/**
 * Resident memory of each server process itself, in MiB (VmRSS in /proc/<pid>/status; its
 * children, such as the embedded PostgreSQL, apart). Null where /proc cannot tell.
 */
export function residentMiB(servers: Record<string, number>): Record<string, number> | null {
  const resident: Record<string, number> = {};
  for (const [name, pid] of Object.entries(servers)) {
    try {
      const match = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
      if (match) resident[name] = Math.round(Number(match[1]) / 1024);
    } catch {
      // not on Linux, or the process is gone
    }
  }
  return Object.keys(resident).length > 0 ? resident : null;
}
