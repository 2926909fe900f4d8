import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { x402Client } from '@x402/core/client';
import type { PaymentPayload, PaymentRequired, PaymentRequirements } from '@x402/core/types';
import { registerExactEvmScheme } from '@x402/evm/exact/client';
import { BaseError, ContractFunctionRevertedError, domainSeparator, toHex, type Address, type Hex } from 'viem';
import { generatePrivateKey, privateKeyToAccount, type PrivateKeyAccount } from 'viem/accounts';
import { compileContracts, currentSourceHash, readCommittedArtifacts } from '../src/chain/contracts.js';
import { DEV_ACCOUNTS, startEmbeddedChain, tokenAbi, type EmbeddedChain } from '../src/chain/index.js';
import { createFacilitator, embeddedFacilitatorConfig, type Facilitator } from '../src/payments/facilitator.js';

const USDC: Address = '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913';
const NETWORK = 'eip155:8453';
const T = { timeout: 60_000 };

const authorizationTypes = {
  TransferWithAuthorization: [
    { name: 'from', type: 'address' },
    { name: 'to', type: 'address' },
    { name: 'value', type: 'uint256' },
    { name: 'validAfter', type: 'uint256' },
    { name: 'validBefore', type: 'uint256' },
    { name: 'nonce', type: 'bytes32' },
  ],
} as const;

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
    const expected = domainSeparator({ domain: { name: 'USD Coin', version: '2', chainId: 8453, verifyingContract: USDC } });
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
    assert.ok(journal.includes(`"${payTo}":"${await chain.usdcBalance(payTo)}"`), 'the new payee balance is in the journal');
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
    assert.equal(await simulate('transferWithAuthorization', await sign(0n, now - 60n)), 'FiatTokenV2: authorization is expired');
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
    assert.ok(supported.kinds.some((kind) => kind.x402Version === 2 && kind.scheme === 'exact' && kind.network === NETWORK));
    assert.ok(Object.values(supported.signers).flat().includes(chain.accounts.facilitator.address));
  });

  test('a restart on the same data dir keeps balances and used nonces', T, async () => {
    const holders = [buyer.address, payTo, chain.accounts.minter.address];
    const balances = await Promise.all(holders.map((holder) => chain.usdcBalance(holder)));
    const facilitatorNonce = await chain.publicClient.getTransactionCount({ address: chain.accounts.facilitator.address });
    assert.ok(facilitatorNonce >= 2);
    const oldPid = chain.pid;

    await chain.stop();
    assert.throws(() => process.kill(oldPid, 0), 'anvil should be gone after stop()');
    chain = await startEmbeddedChain({ dataDir });
    facilitator = createFacilitator(embeddedFacilitatorConfig(chain));

    assert.ok((await chain.publicClient.getBlockNumber()) < 5n, 'the restarted chain starts fresh');
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
  const chainModule = fileURLToPath(new URL('../src/chain/index.ts', import.meta.url));
  const script = `import { startEmbeddedChain } from ${JSON.stringify(chainModule)};
    const chain = await startEmbeddedChain({ dataDir: ${JSON.stringify(dataDir)} });
    console.log('pid', chain.pid);
    setInterval(() => {}, 1000);`;
  const parent = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
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
