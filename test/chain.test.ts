import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pathToFileURL } from 'node:url';
import { x402Client } from '@x402/core/client';
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import {
  BaseError,
  ContractFunctionRevertedError,
  createWalletClient,
  domainSeparator,
  pad,
  toEventSelector,
  http,
  toHex,
  zeroAddress,
  type Address,
  type Hex,
} from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { coalesce } from '../src/chain/coalesce.js';
import { compileContracts, currentSourceHash, readCommittedArtifacts } from '../src/chain/contracts.js';
import { DEV_ACCOUNTS, startEmbeddedChain, tokenAbi, type EmbeddedChain } from '../src/chain/index.js';
import { emptyState, mergeDelta, type ChainState, type StateDelta } from '../src/chain/state.js';
import { ledgerDelta, type LedgerEvent } from '../src/chain/token.js';
import { createFacilitator, embeddedFacilitatorConfig, type Facilitator } from '../src/payments/facilitator.js';
import { prebuiltSources } from './support/prebuilt-cli.js';
import { TRANSFER_WITH_AUTHORIZATION_TYPES } from '../src/payments/transfer-digest.js';

const USDC: Address = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const NETWORK = 'eip155:8453';
const T = { timeout: 60_000 };

const authorizationTypes = TRANSFER_WITH_AUTHORIZATION_TYPES;

function requirements(payTo: Address, amount: bigint): PaymentRequirements {
  return {
    scheme: 'exact',
    network: NETWORK,
    asset: USDC,
    amount: amount.toString(),
    payTo,
    maxTimeoutSeconds: 120,
    extra: { name: 'USD Coin', version: '2' },
  };
}

async function signPayment(
  payer: PrivateKeyAccount,
  accepted: PaymentRequirements,
  { validBefore = BigInt(Math.floor(Date.now() / 1000) + 120), value = BigInt(accepted.amount) } = {},
): Promise<PaymentPayload> {
  const authorization = {
    from: payer.address,
    to: accepted.payTo as Address,
    value,
    validAfter: 0n,
    validBefore,
    nonce: toHex(randomBytes(32)),
  };
  const signature = await payer.signTypedData({
    domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC },
    types: authorizationTypes,
    primaryType: 'TransferWithAuthorization',
    message: authorization,
  });
  return {
    x402Version: 2,
    resource: { url: 'http://localhost/test', description: 'test', mimeType: 'application/json' },
    accepted,
    payload: {
      signature,
      authorization: {
        ...authorization,
        value: authorization.value.toString(),
        validAfter: '0',
        validBefore: authorization.validBefore.toString(),
      },
    },
  };
}

function nonceOf(payment: PaymentPayload): Hex {
  return (payment.payload as { authorization: { nonce: Hex } }).authorization.nonce;
}

/** The revert reason of a simulated call, or undefined when it would succeed. */
async function revertReason(run: () => Promise<unknown>): Promise<string | undefined> {
  try {
    await run();
    return undefined;
  } catch (error) {
    const reverted = error instanceof BaseError ? error.walk((e) => e instanceof ContractFunctionRevertedError) : null;
    if (reverted instanceof ContractFunctionRevertedError) return reverted.reason;
    throw error;
  }
}

test('the committed contract artifact is the compiler output of the .sol sources', T, () => {
  const committed = readCommittedArtifacts();
  assert.ok(committed, 'src/chain/contracts/artifacts.json is missing: run scripts/compile-contracts.ts');
  assert.equal(committed.sourceHash, currentSourceHash(), 'sources changed: run scripts/compile-contracts.ts');
  const fresh = compileContracts();
  assert.equal(committed.contracts.FiatTokenV2.deployedBytecode, fresh.contracts.FiatTokenV2.deployedBytecode);
  assert.equal(committed.contracts.Multicall3.deployedBytecode, fresh.contracts.Multicall3.deployedBytecode);
});

test('dev account keys derive the listed addresses', () => {
  for (const { address, privateKey } of DEV_ACCOUNTS) assert.equal(privateKeyToAccount(privateKey).address, address);
});

describe('embedded chain with the embedded facilitator', { timeout: 180_000 }, () => {
  let dataDir: string;
  let chain: EmbeddedChain;
  let facilitator: Facilitator;
  let buyer: PrivateKeyAccount;
  let payTo: Address;
  let settledPayment: PaymentPayload;

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'chain-test-'));
    chain = await startEmbeddedChain({ dataDir });
    facilitator = createFacilitator(embeddedFacilitatorConfig(chain));
    buyer = privateKeyToAccount(chain.accounts.buyer.privateKey);
    payTo = chain.accounts.payTo.address;
  });

  after(async () => {
    await chain?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  test('starts at a fresh block with chain id 8453 and Multicall3 installed', T, async () => {
    assert.equal(chain.chainId, 8453);
    assert.equal(await chain.publicClient.getChainId(), 8453);
    assert.ok((await chain.publicClient.getBlockNumber()) < 5n);
    const multicallCode = await chain.publicClient.getCode({ address: '0xcA11bde05977b3631167028862bE2a173976CA11' });
    assert.ok(multicallCode && multicallCode.length > 100);
  });

  test('the token looks like USDC', T, async () => {
    const read = <F extends 'name' | 'symbol' | 'version' | 'decimals' | 'DOMAIN_SEPARATOR'>(functionName: F) =>
      chain.publicClient.readContract({ address: USDC, abi: tokenAbi, functionName });
    assert.equal(await read('name'), 'USD Coin');
    assert.equal(await read('symbol'), 'USDC');
    assert.equal(await read('version'), '2');
    assert.equal(await read('decimals'), 6);
    const expected = domainSeparator({
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC },
    });
    assert.equal(await read('DOMAIN_SEPARATOR'), expected);
  });

  test('mint credits exactly and only the minter may mint', T, async () => {
    const before = await chain.usdcBalance(buyer.address);
    await chain.mintUsdc(buyer.address, 10_000_000n);
    assert.equal(await chain.usdcBalance(buyer.address), before + 10_000_000n);
    const reason = await revertReason(() =>
      chain.publicClient.simulateContract({
        account: buyer.address,
        address: USDC,
        abi: tokenAbi,
        functionName: 'mint',
        args: [buyer.address, 1n],
      }),
    );
    assert.equal(reason, 'FiatToken: caller is not a minter');
  });

  test('ensureFunded tops up to the minimum and no further', T, async () => {
    const fresh = privateKeyToAccount(generatePrivateKey()).address;
    assert.equal(await chain.ensureFunded(fresh, 5_000n), 5_000n);
    assert.equal(await chain.ensureFunded(fresh, 3_000n), 5_000n);
    assert.equal(await chain.usdcBalance(fresh), 5_000n);
  });

  test('a hand-signed EIP-3009 authorization verifies and settles, moving exact balances', T, async () => {
    const accepted = requirements(payTo, 270_000n);
    const payment = await signPayment(buyer, accepted);
    const [buyerBefore, payToBefore] = [await chain.usdcBalance(buyer.address), await chain.usdcBalance(payTo)];

    const verified = await facilitator.verify(payment, accepted);
    assert.deepEqual(verified, { isValid: true, invalidReason: undefined, payer: buyer.address });
    const settled = await facilitator.settle(payment, accepted);
    assert.equal(settled.success, true, settled.errorReason);
    assert.match(settled.transaction, /^0x[0-9a-f]{64}$/);
    assert.equal(settled.network, NETWORK);
    assert.equal(settled.payer, buyer.address);

    assert.equal(await chain.usdcBalance(buyer.address), buyerBefore - 270_000n);
    assert.equal(await chain.usdcBalance(payTo), payToBefore + 270_000n);
    assert.equal(await chain.authorizationState(buyer.address, nonceOf(payment)), true);
    settledPayment = payment;
  });

  test('a settlement is saved to the data dir by the time settle() resolves', T, async () => {
    const accepted = requirements(payTo, 1_234n);
    const payment = await signPayment(buyer, accepted);
    assert.equal((await facilitator.settle(payment, accepted)).success, true);
    const journal = await readFile(join(dataDir, 'chain-state.jsonl'), 'utf8');
    assert.ok(journal.includes(nonceOf(payment)), 'the used nonce is in the journal');
    assert.ok(
      journal.includes(`"${payTo}":"${await chain.usdcBalance(payTo)}"`),
      'the new payee balance is in the journal',
    );
  });

  test('a replayed payment is refused as a used nonce', T, async () => {
    const verified = await facilitator.verify(settledPayment, settledPayment.accepted);
    assert.equal(verified.isValid, false);
    assert.equal(verified.invalidReason, 'invalid_exact_evm_nonce_already_used');
    const settled = await facilitator.settle(settledPayment, settledPayment.accepted);
    assert.equal(settled.success, false);
    assert.equal(settled.errorReason, 'invalid_exact_evm_nonce_already_used');
  });

  test('an under-funded payer is refused for insufficient balance', T, async () => {
    const poor = privateKeyToAccount(generatePrivateKey());
    await chain.mintUsdc(poor.address, 100n);
    const accepted = requirements(payTo, 101n);
    const verified = await facilitator.verify(await signPayment(poor, accepted), accepted);
    assert.equal(verified.isValid, false);
    assert.equal(verified.invalidReason, 'invalid_exact_evm_insufficient_balance');
    assert.equal(await chain.usdcBalance(poor.address), 100n);
  });

  test('an expired authorization is refused', T, async () => {
    const accepted = requirements(payTo, 1_000n);
    const expired = await signPayment(buyer, accepted, { validBefore: BigInt(Math.floor(Date.now() / 1000) - 1) });
    const verified = await facilitator.verify(expired, accepted);
    assert.equal(verified.isValid, false);
    assert.equal(verified.invalidReason, 'invalid_exact_evm_payload_authorization_valid_before');
  });

  test('a payment signed for another amount or payee is refused', T, async () => {
    const accepted = requirements(payTo, 1_000n);
    const tampered = await signPayment(buyer, accepted);
    const auth = (tampered.payload as { authorization: { value: string } }).authorization;
    auth.value = '1';
    const verified = await facilitator.verify(tampered, requirements(payTo, 1n));
    assert.equal(verified.isValid, false);
    assert.equal(verified.invalidReason, 'invalid_exact_evm_signature');
  });

  test('the token reverts with USDC strings', T, async () => {
    const now = BigInt(Math.floor(Date.now() / 1000));
    const sign = (validAfter: bigint, validBefore: bigint, value = 1n, nonce = toHex(randomBytes(32))) =>
      buyer
        .signTypedData({
          domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC },
          types: authorizationTypes,
          primaryType: 'TransferWithAuthorization',
          message: { from: buyer.address, to: payTo, value, validAfter, validBefore, nonce },
        })
        .then((signature) => [buyer.address, payTo, value, validAfter, validBefore, nonce, signature] as const);
    const { abi } = readCommittedArtifacts()!.contracts.FiatTokenV2;
    const simulate = (functionName: string, args: readonly unknown[], account: Address = payTo) =>
      revertReason(() => chain.publicClient.simulateContract({ account, address: USDC, abi, functionName, args }));

    assert.equal(await simulate('transferWithAuthorization', await sign(0n, now + 60n)), undefined);
    assert.equal(
      await simulate('transferWithAuthorization', await sign(now + 3600n, now + 7200n)),
      'FiatTokenV2: authorization is not yet valid',
    );
    assert.equal(
      await simulate('transferWithAuthorization', await sign(0n, now - 60n)),
      'FiatTokenV2: authorization is expired',
    );
    const [from, to, value, validAfter, validBefore, nonce] = await sign(0n, now + 60n);
    const foreign = await privateKeyToAccount(generatePrivateKey()).signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC },
      types: authorizationTypes,
      primaryType: 'TransferWithAuthorization',
      message: { from, to, value, validAfter, validBefore, nonce },
    });
    assert.equal(
      await simulate('transferWithAuthorization', [from, to, value, validAfter, validBefore, nonce, foreign]),
      'FiatTokenV2: invalid signature',
    );
    assert.equal(
      await simulate('transferWithAuthorization', await sign(0n, now + 60n, 10n ** 30n)),
      'ERC20: transfer amount exceeds balance',
    );
    assert.equal(
      await simulate('receiveWithAuthorization', await sign(0n, now + 60n), buyer.address),
      'FiatTokenV2: caller must be the payee',
    );
    assert.equal(
      await simulate('transferWithAuthorization', [
        buyer.address,
        payTo,
        1n,
        0n,
        now + 60n,
        nonceOf(settledPayment),
        (settledPayment.payload as { signature: Hex }).signature,
      ]),
      'FiatTokenV2: authorization is used or canceled',
    );
  });

  test('the official x402 client builds a payload that settles', T, async () => {
    const client = new x402Client();
    registerExactEvmScheme(client, { signer: buyer });
    const accepted = requirements(payTo, 150_000n);
    const paymentRequired: PaymentRequired = {
      x402Version: 2,
      error: 'Payment required',
      resource: { url: 'http://localhost/test', description: 'test', mimeType: 'application/json' },
      accepts: [accepted],
    };
    const payment = await client.createPaymentPayload(paymentRequired);
    assert.deepEqual(payment.accepted, accepted);
    const payToBefore = await chain.usdcBalance(payTo);
    assert.equal((await facilitator.verify(payment, accepted)).isValid, true);
    const settled = await facilitator.settle(payment, accepted);
    assert.equal(settled.success, true, settled.errorReason);
    assert.equal(await chain.usdcBalance(payTo), payToBefore + 150_000n);
    assert.equal(await chain.authorizationState(buyer.address, nonceOf(payment)), true);
  });

  test('concurrent settlements all land, each with its own transaction', T, async () => {
    const accepted = requirements(payTo, 2_000n);
    const payments = await Promise.all(Array.from({ length: 5 }, () => signPayment(buyer, accepted)));
    const payToBefore = await chain.usdcBalance(payTo);
    const results = await Promise.all(payments.map((payment) => facilitator.settle(payment, accepted)));
    assert.deepEqual(
      results.map((result) => result.success),
      [true, true, true, true, true],
    );
    assert.equal(new Set(results.map((result) => result.transaction)).size, 5);
    assert.equal(await chain.usdcBalance(payTo), payToBefore + 10_000n);
  });

  test('a settlement anvil leaves in its pool is mined, not reported pending', T, async () => {
    // With automine off, a sent transaction waits in the pool, as one automine missed does (foundry-rs/foundry#10122).
    const patient = createFacilitator({ ...embeddedFacilitatorConfig(chain), confirmationTimeoutMs: 8_000 });
    const accepted = requirements(payTo, 3_000n);
    const payment = await signPayment(buyer, accepted);
    const payToBefore = await chain.usdcBalance(payTo);
    await chain.publicClient.request({ method: 'evm_setAutomine', params: [false] } as never);
    try {
      const settled = await patient.settle(payment, accepted);
      assert.equal(settled.success, true, settled.errorReason);
    } finally {
      await chain.publicClient.request({ method: 'evm_setAutomine', params: [true] } as never);
    }
    assert.equal(await chain.usdcBalance(payTo), payToBefore + 3_000n);
  });

  test('remote mode reaches a facilitator over HTTP with the same calls', T, async () => {
    const server = createServer(async (request, response) => {
      let body = '';
      for await (const chunk of request) body += chunk;
      const { paymentPayload, paymentRequirements } = body ? JSON.parse(body) : ({} as Record<string, never>);
      const answer =
        request.url === '/verify'
          ? await facilitator.verify(paymentPayload, paymentRequirements)
          : request.url === '/settle'
            ? await facilitator.settle(paymentPayload, paymentRequirements)
            : await facilitator.getSupported();
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    try {
      const { port } = server.address() as AddressInfo;
      const remote = createFacilitator({ mode: 'remote', url: `http://127.0.0.1:${port}`, timeoutMs: 10_000 });
      assert.equal(remote.mode, 'remote');
      const accepted = requirements(payTo, 3_000n);
      const payment = await signPayment(buyer, accepted);
      const payToBefore = await chain.usdcBalance(payTo);
      assert.equal((await remote.verify(payment, accepted)).isValid, true);
      const settled = await remote.settle(payment, accepted);
      assert.equal(settled.success, true, settled.errorReason);
      assert.equal(await chain.usdcBalance(payTo), payToBefore + 3_000n);
      assert.equal((await remote.verify(payment, accepted)).invalidReason, 'invalid_exact_evm_nonce_already_used');
      assert.ok((await remote.getSupported()).kinds.some((kind) => kind.network === NETWORK));
    } finally {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
  });

  test('getSupported lists exact on eip155:8453 with the facilitator signer', T, async () => {
    const supported = await facilitator.getSupported();
    assert.ok(
      supported.kinds.some((kind) => kind.x402Version === 2 && kind.scheme === 'exact' && kind.network === NETWORK),
    );
    assert.ok(Object.values(supported.signers).flat().includes(chain.accounts.facilitator.address));
  });

  test('a restart on the same data dir keeps balances and used nonces', T, async () => {
    const holders = [buyer.address, payTo, chain.accounts.minter.address];
    const balances = await Promise.all(holders.map((holder) => chain.usdcBalance(holder)));
    const facilitatorNonce = await chain.publicClient.getTransactionCount({
      address: chain.accounts.facilitator.address,
    });
    assert.ok(facilitatorNonce >= 2);
    const oldPid = chain.pid;
    const oldHeight = await chain.publicClient.getBlockNumber({ cacheTime: 0 });

    await chain.stop();
    assert.throws(() => process.kill(oldPid, 0), 'anvil should be gone after stop()');
    chain = await startEmbeddedChain({ dataDir });
    facilitator = createFacilitator(embeddedFacilitatorConfig(chain));

    assert.equal(chain.firstLiveBlock, oldHeight + 1n, 'block numbers go on after the saved height');
    assert.ok(
      (await chain.publicClient.getBlockNumber()) < oldHeight + 5n,
      'the restarted node starts with no old blocks',
    );
    const used = chain.archivedLogs({
      fromBlock: 0n,
      toBlock: oldHeight,
      topics: [null, pad(buyer.address), nonceOf(settledPayment)],
    });
    assert.equal(used.length, 1, "the settlement's AuthorizationUsed log is kept in the history");
    assert.deepEqual(await Promise.all(holders.map((holder) => chain.usdcBalance(holder))), balances);
    assert.equal(await chain.authorizationState(buyer.address, nonceOf(settledPayment)), true);
    assert.equal(
      await chain.publicClient.getTransactionCount({ address: chain.accounts.facilitator.address }),
      facilitatorNonce,
    );
    const replay = await facilitator.verify(settledPayment, settledPayment.accepted);
    assert.equal(replay.invalidReason, 'invalid_exact_evm_nonce_already_used');

    const accepted = requirements(payTo, 1_000n);
    const settled = await facilitator.settle(await signPayment(buyer, accepted), accepted);
    assert.equal(settled.success, true, settled.errorReason);
    assert.equal(await chain.usdcBalance(payTo), balances[1] + 1_000n);
  });
});

test('anvil does not outlive a parent killed with SIGKILL', T, async () => {
  const dataDir = await mkdtemp(join(tmpdir(), 'chain-orphan-'));
  // The same module transformed ahead of time (see prebuiltSources): a plain node parent, without tsx's loader.
  const chainModule = join(await prebuiltSources(), 'chain/index.js');
  const script = `import { startEmbeddedChain } from ${JSON.stringify(pathToFileURL(chainModule).href)};
    const chain = await startEmbeddedChain({ dataDir: ${JSON.stringify(dataDir)} });
    console.log('pid', chain.pid);
    setInterval(() => {}, 1000);`;
  const parent = spawn(process.execPath, ['--input-type=module', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  try {
    const anvilPid = await new Promise<number>((resolve, reject) => {
      parent.stdout.setEncoding('utf8').on('data', (chunk: string) => {
        const match = /pid (\d+)/.exec(chunk);
        if (match) resolve(Number(match[1]));
      });
      parent.once('exit', (code) => reject(new Error(`parent exited early with ${code}`)));
    });
    process.kill(anvilPid, 0);
    parent.kill('SIGKILL');
    const deadline = Date.now() + 5_000;
    let alive = true;
    while (alive && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      try {
        process.kill(anvilPid, 0);
      } catch {
        alive = false;
      }
    }
    assert.equal(alive, false, `anvil ${anvilPid} survived its parent`);
  } finally {
    parent.kill('SIGKILL');
    await rm(dataDir, { recursive: true, force: true });
  }
});

test('ledgerDelta turns the token events of new blocks into the new absolute ledger values', () => {
  const [a, b, c] = DEV_ACCOUNTS.map((account) => account.address);
  const known: ChainState = {
    ...emptyState(),
    totalSupply: '1000',
    balances: { [a]: '1000' },
    allowances: { [a]: { [c]: '5' } },
  };
  const nonce1 = toHex(1n, { size: 32 });
  const nonce2 = toHex(2n, { size: 32 });
  const events: LedgerEvent[] = [
    { eventName: 'Transfer', args: { from: zeroAddress, to: b, value: 500n } },
    { eventName: 'Transfer', args: { from: a, to: b, value: 300n } },
    { eventName: 'AuthorizationUsed', args: { authorizer: a, nonce: nonce1 } },
    { eventName: 'Approval', args: { owner: a, spender: c, value: 100n } },
    { eventName: 'Transfer', args: { from: a, to: c, value: 40n } },
    { eventName: 'Approval', args: { owner: a, spender: c, value: 60n } },
    { eventName: 'AuthorizationCanceled', args: { authorizer: b, nonce: nonce2 } },
  ];
  assert.deepEqual(ledgerDelta(events, known), {
    totalSupply: '1500',
    balances: { [a]: '660', [b]: '800', [c]: '40' },
    allowances: { [a]: { [c]: '60' } },
    authorizations: { [a]: [nonce1], [b]: [nonce2] },
  });
  assert.deepEqual(ledgerDelta([], known), { balances: {}, allowances: {}, authorizations: {} });
  assert.throws(
    () => ledgerDelta([{ eventName: 'Transfer', args: { from: b, to: a, value: 1n } }], known),
    /below zero/,
  );
});

test('coalesce: callers share the waiting round, never the running one, and rounds never overlap', async () => {
  let running = 0;
  let rounds = 0;
  let fail = false;
  const gates: Array<() => void> = [];
  const round = coalesce(async () => {
    assert.equal(running++, 0, 'two rounds overlap');
    rounds++;
    await new Promise<void>((resolve) => gates.push(resolve));
    running--;
    if (fail) throw new Error('round failed');
  });
  const tick = () => new Promise((resolve) => setImmediate(resolve));
  const first = round();
  await tick();
  assert.equal(rounds, 1, 'the first call starts a round at once');
  // Called while round 1 runs: its reading may predate their changes, so they wait for round 2, together.
  const later = [round(), round(), round()];
  assert.equal(later[0], later[1]);
  assert.equal(later[1], later[2]);
  assert.notEqual(later[0], first);
  await tick();
  assert.equal(rounds, 1, 'round 2 waits for round 1');
  gates.shift()!();
  await first;
  await tick();
  assert.equal(rounds, 2);
  const third = round();
  assert.notEqual(third, later[0], 'a call during round 2 gets round 3');
  fail = true;
  gates.shift()!();
  await Promise.all(later.map((p) => assert.rejects(p, /round failed/)));
  await tick();
  assert.equal(rounds, 3, 'a failed round does not stop the next');
  fail = false;
  gates.shift()!();
  await third;
  assert.equal(rounds, 3);
});

/** The ledger as the journal on disk has it. */
async function journalState(dataDir: string): Promise<{ state: ChainState; lines: StateDelta[] }> {
  const lines = (await readFile(join(dataDir, 'chain-state.jsonl'), 'utf8'))
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as StateDelta);
  const state = emptyState();
  for (const line of lines) mergeDelta(state, line);
  return { state, lines };
}

/** The chain's own values for everything a saved ledger names (plus the dev accounts' transaction counts). */
async function chainValues(chain: EmbeddedChain, saved: ChainState) {
  const read = chain.publicClient;
  const at = { address: USDC, abi: tokenAbi } as const;
  const holders = Object.keys(saved.balances).sort() as Address[];
  const pairs = Object.entries(saved.allowances).flatMap(([owner, spenders]) =>
    Object.keys(spenders).map((spender) => [owner, spender] as [Address, Address]),
  );
  const nonces = Object.entries(saved.authorizations).flatMap(([authorizer, list]) =>
    list.map((nonce) => [authorizer, nonce] as [Address, Hex]),
  );
  return {
    totalSupply: (await read.readContract({ ...at, functionName: 'totalSupply' })).toString(),
    balances: Object.fromEntries(
      await Promise.all(
        holders.map(async (h) => [
          h,
          (await read.readContract({ ...at, functionName: 'balanceOf', args: [h] })).toString(),
        ]),
      ),
    ),
    allowances: await Promise.all(
      pairs.map(
        async (pair) =>
          `${pair.join('/')}=${await read.readContract({ ...at, functionName: 'allowance', args: pair })}`,
      ),
    ),
    usedNonces: (await Promise.all(nonces.map((pair) => chain.authorizationState(...pair)))).filter((used) => used)
      .length,
    accountNonces: await Promise.all(DEV_ACCOUNTS.map(({ address }) => read.getTransactionCount({ address }))),
  };
}

function savedValues(saved: ChainState) {
  return {
    totalSupply: saved.totalSupply,
    balances: Object.fromEntries(
      Object.keys(saved.balances)
        .sort()
        .map((h) => [h, saved.balances[h]]),
    ),
    allowances: Object.entries(saved.allowances).flatMap(([owner, spenders]) =>
      Object.entries(spenders).map(([spender, value]) => `${owner}/${spender}=${value}`),
    ),
    usedNonces: Object.values(saved.authorizations).flat().length,
    accountNonces: DEV_ACCOUNTS.map(({ address }) => saved.accountNonces[address] ?? 0),
  };
}

describe('checkpoint journal', { timeout: 240_000 }, () => {
  let dataDir: string;
  let chain: EmbeddedChain;
  /** Settles from dev account 4 and does not checkpoint: the tests do. */
  let bare: Facilitator;
  let buyer: PrivateKeyAccount;
  let payTo: Address;
  const settledNonces: Array<[Address, Hex]> = [];

  const rpc = async (method: string, params: unknown[]) => {
    const response = await fetch(chain.rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
    });
    return ((await response.json()) as { result: unknown }).result;
  };
  const settleBare = async (payer: PrivateKeyAccount, amount: bigint) => {
    const accepted = requirements(payTo, amount);
    const payment = await signPayment(payer, accepted);
    const settled = await bare.settle(payment, accepted);
    assert.equal(settled.success, true, settled.errorReason);
    settledNonces.push([payer.address, nonceOf(payment)]);
    return payment;
  };

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'chain-journal-'));
    // No timer checkpoints in the way: every checkpoint here is one the test asks for.
    chain = await startEmbeddedChain({ dataDir, checkpointIntervalMs: 3_600_000 });
    bare = createFacilitator({
      mode: 'embedded',
      rpcUrl: chain.rpcUrl,
      chainId: 8453,
      privateKey: DEV_ACCOUNTS[4].privateKey,
    });
    buyer = privateKeyToAccount(chain.accounts.buyer.privateKey);
    payTo = chain.accounts.payTo.address;
    await chain.ensureFunded(buyer.address, 100_000_000n);
  });

  after(async () => {
    await chain?.stop();
    if (dataDir) await rm(dataDir, { recursive: true, force: true });
  });

  test(
    'a checkpoint appends exactly the ledger change of the new blocks, and nothing when there is none',
    T,
    async () => {
      await chain.checkpoint();
      const before = (await journalState(dataDir)).lines.length;
      const payment = await settleBare(buyer, 12_345n);
      await chain.checkpoint();
      const { lines } = await journalState(dataDir);
      assert.equal(lines.length, before + 1);
      const { logs, ...values } = lines.at(-1)!;
      assert.deepEqual(values, {
        balances: {
          [buyer.address]: String(await chain.usdcBalance(buyer.address)),
          [payTo]: String(await chain.usdcBalance(payTo)),
        },
        allowances: {},
        authorizations: { [buyer.address]: [nonceOf(payment)] },
        accountNonces: {
          [DEV_ACCOUNTS[4].address]: await chain.publicClient.getTransactionCount({ address: DEV_ACCOUNTS[4].address }),
        },
        height: String(await chain.publicClient.getBlockNumber({ cacheTime: 0 })),
      });
      assert.deepEqual(
        logs!.map((log) => log.topics[0]),
        ['AuthorizationUsed', 'Transfer'].map((name) =>
          toEventSelector(tokenAbi.find((i) => i.type === 'event' && i.name === name)!),
        ),
        "the settlement's logs are kept",
      );

      await chain.checkpoint();
      await rpc('anvil_mine', ['0x5']);
      await chain.checkpoint();
      const last = (await journalState(dataDir)).lines;
      assert.equal(last.length, before + 2, 'blocks without a ledger change add one line');
      assert.deepEqual(
        last.at(-1),
        {
          balances: {},
          allowances: {},
          authorizations: {},
          accountNonces: {},
          height: String(await chain.publicClient.getBlockNumber({ cacheTime: 0 })),
          logs: [],
        },
        'only the new height: a restarted node goes on after it',
      );
    },
  );

  test('concurrent checkpoints each cover what was mined before they were called, in fewer appends', T, async () => {
    const before = (await journalState(dataDir)).lines.length;
    const payments = await Promise.all(
      Array.from({ length: 12 }, () => signPayment(buyer, requirements(payTo, 1_000n))),
    );
    const appendsSeen = await Promise.all(
      payments.map(async (payment) => {
        const settled = await bare.settle(payment, payment.accepted);
        assert.equal(settled.success, true, settled.errorReason);
        settledNonces.push([buyer.address, nonceOf(payment)]);
        await chain.checkpoint();
        const { state, lines } = await journalState(dataDir);
        assert.ok(
          state.authorizations[buyer.address].includes(nonceOf(payment)),
          'the settled nonce is on disk when checkpoint() resolves',
        );
        return lines.length;
      }),
    );
    const after = await journalState(dataDir);
    assert.ok(after.lines.length - before <= 12);
    assert.deepEqual(savedValues(after.state), await chainValues(chain, after.state));
    // Not asserted (timing): how many of the 12 settles one append served.
    console.log(
      `# 12 concurrent settle+checkpoint: ${after.lines.length - before} journal appends (${[...new Set(appendsSeen)].length} distinct)`,
    );

    const many = await Promise.all(Array.from({ length: 20 }, () => chain.checkpoint()));
    assert.equal(many.length, 20);
    assert.equal((await journalState(dataDir)).lines.length, after.lines.length);
  });

  test('approvals, transferFrom, cancelations, mints and long runs of empty blocks are saved', T, async () => {
    const spender = DEV_ACCOUNTS[5];
    const abi = readCommittedArtifacts()!.contracts.FiatTokenV2.abi;
    const walletOf = (key: Hex) =>
      createWalletClient({ account: privateKeyToAccount(key), chain: chain.viemChain, transport: http(chain.rpcUrl) });
    const send = async (key: Hex, functionName: string, args: readonly unknown[]) => {
      const hash = await walletOf(key).writeContract({ address: USDC, abi, functionName, args });
      const receipt = await chain.publicClient.waitForTransactionReceipt({ hash });
      assert.equal(receipt.status, 'success');
    };
    await send(chain.accounts.buyer.privateKey, 'approve', [spender.address, 1_000n]);
    await send(spender.privateKey, 'transferFrom', [buyer.address, payTo, 400n]);
    const canceled = toHex(randomBytes(32));
    const signature = await buyer.signTypedData({
      domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC },
      types: {
        CancelAuthorization: [
          { name: 'authorizer', type: 'address' },
          { name: 'nonce', type: 'bytes32' },
        ],
      },
      primaryType: 'CancelAuthorization',
      message: { authorizer: buyer.address, nonce: canceled },
    });
    await send(spender.privateKey, 'cancelAuthorization', [buyer.address, canceled, signature]);
    settledNonces.push([buyer.address, canceled]);
    const newcomer = privateKeyToAccount(generatePrivateKey());
    await send(chain.accounts.minter.privateKey, 'mint', [newcomer.address, 777n]);
    await settleBare(buyer, 5n);
    // More new blocks than a checkpoint reads one by one: the counts are then asked for.
    await rpc('anvil_mine', ['0x96']);
    await settleBare(buyer, 6n);
    await chain.checkpoint();

    const { state } = await journalState(dataDir);
    assert.equal(state.allowances[buyer.address][spender.address], '600');
    assert.equal(state.balances[newcomer.address], '777');
    assert.ok(state.authorizations[buyer.address].includes(canceled));
    assert.equal(state.accountNonces[spender.address], 2);
    assert.deepEqual(savedValues(state), await chainValues(chain, state));
  });

  test('checkpoints racing with settles neither lose nor double a change', T, async () => {
    let done = false;
    let rounds = 0;
    const spin = async () => {
      while (!done) {
        await chain.checkpoint();
        rounds++;
      }
    };
    const spinners = [spin(), spin()];
    const payments = await Promise.all(
      Array.from({ length: 30 }, (_, i) => signPayment(buyer, requirements(payTo, 100n + BigInt(i)))),
    );
    let next = 0;
    await Promise.all(
      Array.from({ length: 6 }, async () => {
        while (next < payments.length) {
          const payment = payments[next++];
          const settled = await bare.settle(payment, payment.accepted);
          assert.equal(settled.success, true, settled.errorReason);
          settledNonces.push([buyer.address, nonceOf(payment)]);
        }
      }),
    );
    done = true;
    await Promise.all(spinners);
    await chain.checkpoint();
    assert.ok(rounds > 10, `only ${rounds} checkpoints ran alongside the settles`);
    const { state } = await journalState(dataDir);
    assert.deepEqual(savedValues(state), await chainValues(chain, state));
    for (const payment of payments) assert.ok(state.authorizations[buyer.address].includes(nonceOf(payment)));
  });

  test('a restart after many settles restores the same balances, allowances, used nonces and counts', T, async () => {
    const payers = [buyer, privateKeyToAccount(generatePrivateKey()), privateKeyToAccount(generatePrivateKey())];
    for (const payer of payers.slice(1)) await chain.ensureFunded(payer.address, 1_000_000n);
    const hooked = createFacilitator(embeddedFacilitatorConfig(chain));
    const jobs = Array.from({ length: 48 }, (_, i) => ({
      payer: payers[i % payers.length],
      amount: BigInt(1_000 + i),
    }));
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < jobs.length) {
          const { payer, amount } = jobs[next++];
          const accepted = requirements(payTo, amount);
          const payment = await signPayment(payer, accepted);
          const settled = await (next % 2 ? hooked : bare).settle(payment, accepted);
          assert.equal(settled.success, true, settled.errorReason);
          settledNonces.push([payer.address, nonceOf(payment)]);
        }
      }),
    );
    await chain.checkpoint();
    const saved = (await journalState(dataDir)).state;
    const beforeStop = await chainValues(chain, saved);
    assert.deepEqual(savedValues(saved), beforeStop);

    const height = await chain.publicClient.getBlockNumber({ cacheTime: 0 });
    await chain.stop();
    chain = await startEmbeddedChain({ dataDir, checkpointIntervalMs: 3_600_000 });
    bare = createFacilitator({
      mode: 'embedded',
      rpcUrl: chain.rpcUrl,
      chainId: 8453,
      privateKey: DEV_ACCOUNTS[4].privateKey,
    });
    assert.equal(chain.firstLiveBlock, height + 1n, 'block numbers go on after the saved height');
    assert.equal(
      chain.archivedLogs({
        fromBlock: 0n,
        toBlock: height,
        topics: [
          ['AuthorizationUsed', 'AuthorizationCanceled'].map((e) =>
            toEventSelector(`event ${e}(address indexed authorizer, bytes32 indexed nonce)`),
          ),
        ],
      }).length,
      settledNonces.length,
      'the log of every used or canceled nonce is kept in the history',
    );
    assert.deepEqual(await chainValues(chain, saved), beforeStop);
    const used = await Promise.all(
      settledNonces.map(([authorizer, nonce]) => chain.authorizationState(authorizer, nonce)),
    );
    assert.equal(used.filter((u) => u).length, settledNonces.length, 'every used or canceled nonce is still used');
    assert.equal(await chain.authorizationState(buyer.address, toHex(randomBytes(32))), false);

    // The restarted chain keeps journaling from block 1.
    const payment = await settleBare(payers[1], 1n);
    await chain.checkpoint();
    const { state } = await journalState(dataDir);
    assert.ok(state.authorizations[payers[1].address].includes(nonceOf(payment)));
    assert.deepEqual(savedValues(state), await chainValues(chain, state));
  });
});
