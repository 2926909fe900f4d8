import { resolve } from 'node:path';

export interface Config {
  dataDir: string;
  host: string;
  port: number;
  databaseUrl?: string;
  catalogDir: string;
  rulesDir: string;
  production: boolean;
}

export function configFromEnv(env: NodeJS.ProcessEnv = process.env): Config {
  const port = Number(env.PORT ?? 8080);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new Error(`PORT must be a port number, got ${env.PORT}`);
  return {
    dataDir: resolve(env.DATA_DIR ?? './data'),
    host: env.HOST ?? '127.0.0.1',
    port,
    databaseUrl: env.DATABASE_URL || undefined,
    catalogDir: resolve(env.CATALOG_DIR ?? './catalog'),
    rulesDir: resolve(env.RULES_DIR ?? './rules'),
    production: env.AUDIO_API_ENV === 'production',
  };
}
