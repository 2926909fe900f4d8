import { readFileSync } from 'node:fs';
import { jsonLogger } from '../log/index.js';
import { readFacilitatorAuthPublicKey } from '../payments/facilitator-auth.js';
import { landAfterMs, receiptWaitMs } from '../payments/facilitator-faults.js';
import { startFacilitatorServer } from '../payments/facilitator-server.js';
import { createFacilitator } from '../payments/index.js';
import type { Command } from './command-line.js';
import type { Config } from './config.js';
import { stopRequested } from './stop-signals.js';

/** What the facilitator needs from the settings: every missing one named in a single sentence. */
function settlementSetup(config: Config): { rpcUrl: string; privateKey: `0x${string}`; chainId: number } | string {
  const { rpcUrl, keyFile } = config.facilitator;
  const missing = [!rpcUrl && 'FACILITATOR_RPC_URL', !keyFile && 'FACILITATOR_KEY_FILE'].filter(Boolean);
  if (missing.length) return `agent-audio facilitator needs ${missing.join(' and ')} (see --help)`;
  const [namespace, reference] = config.payments.network.split(':');
  if (namespace !== 'eip155')
    return `X402_NETWORK ${config.payments.network} is not an EVM network (eip155:<chain id>)`;
  let key: string;
  try {
    key = readFileSync(keyFile!, 'utf8').trim();
  } catch (e) {
    return `FACILITATOR_KEY_FILE ${keyFile} cannot be read: ${(e as Error).message}`;
  }
  if (!/^0x[0-9a-fA-F]{64}$/.test(key)) {
    return `FACILITATOR_KEY_FILE ${keyFile} must hold one 0x-prefixed 32-byte hex private key`;
  }
  return { rpcUrl: rpcUrl!, privateKey: key as `0x${string}`, chainId: Number(reference) };
}

/** A blockchain node on this machine: anvil, whose late receipts may be mined on demand. */
function isLoopback(url: string): boolean {
  return ['127.0.0.1', 'localhost', '[::1]'].includes(new URL(url).hostname);
}

export const facilitatorCommands: Record<string, Command> = {
  async facilitator(config) {
    const setup = settlementSetup(config);
    if (typeof setup === 'string') {
      process.stderr.write(`${setup}\n`);
      return 2;
    }
    let authPublicKey;
    try {
      const file = config.facilitator.authPublicKeyFile;
      authPublicKey = file ? readFacilitatorAuthPublicKey(file) : undefined;
    } catch (e) {
      process.stderr.write(`FACILITATOR_AUTH_PUBLIC_KEY_FILE: ${(e as Error).message}\n`);
      return 2;
    }
    const log = jsonLogger({ component: 'facilitator' }, config.log);
    const fault = config.facilitator.fault;
    const facilitator = createFacilitator({
      mode: 'embedded',
      ...setup,
      mineLateReceipts: isLoopback(setup.rpcUrl),
      holdBroadcastMs: landAfterMs(fault),
      confirmationTimeoutMs: receiptWaitMs(fault),
    });
    const stopped = stopRequested(() => process.exit(1));
    const server = await startFacilitatorServer({
      facilitator,
      host: config.host,
      port: config.port,
      log,
      fault,
      authPublicKey,
    });
    process.stdout.write(
      `facilitator on ${server.url} (${config.payments.network})${fault ? ` fault ${fault.kind}` : ''}${authPublicKey ? ' requiring API-key JWTs' : ''}\n`,
    );
    await stopped;
    await server.close();
    return 0;
  },
};
