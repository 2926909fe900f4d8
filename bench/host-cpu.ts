import { namedTreesCpu, treeCpu } from './process-cpu.js';

/** CPU seconds so far of a host's processes: serve's own, HAProxy's (0 without it), Icecast's, PostgreSQL's. */
export interface HostCpu {
  serve: number;
  proxy: number;
  icecast: number;
  postgres: number;
}

export async function hostCpu(servePid: number): Promise<HostCpu> {
  return {
    serve: (await treeCpu(servePid))?.self ?? Number.NaN,
    proxy: (await namedTreesCpu(servePid, ['haproxy'])) ?? 0,
    icecast: (await namedTreesCpu(servePid, ['icecast2'])) ?? Number.NaN,
    postgres: (await namedTreesCpu(servePid, ['postgres'])) ?? Number.NaN,
  };
}
