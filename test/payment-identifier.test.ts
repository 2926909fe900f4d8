import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FacilitatorClient } from '@x402/core/server';
import type { PaymentPayload } from '@x402/core/types';
import {
  declarePaymentIdentifierExtension,
  extractAndValidatePaymentIdentifier,
  generatePaymentId,
  PAYMENT_IDENTIFIER,
} from '@x402/extensions/payment-identifier';
import { PaymentGateway } from '../src/payments/index.js';

// paymentId() reads the extension by hand: for the schema this service declares (or none) it must answer exactly what
// the library's extractAndValidatePaymentIdentifier answers; any other schema is refused without being compiled or run.
const facilitator = {
  verify: async () => ({}),
  settle: async () => ({}),
  getSupported: async () => ({ kinds: [], extensions: [], signers: {} }),
} as unknown as FacilitatorClient;
const gateway = new PaymentGateway(facilitator, {
  network: 'eip155:8453',
  asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  payTo: '0x0000000000000000000000000000000000000001',
  maxTimeoutSeconds: 300,
});
const declared = declarePaymentIdentifierExtension(false);
const payload = (extension: unknown): PaymentPayload =>
  ({
    x402Version: 2,
    payload: {},
    accepted: {},
    ...(extension !== undefined && { extensions: { [PAYMENT_IDENTIFIER]: extension } }),
  }) as unknown as PaymentPayload;

const asTheLibraryReadsIt: Record<string, unknown> = {
  'no extension': undefined,
  'declared, no id': { ...declared },
  'declared, valid id': { ...declared, info: { required: false, id: generatePaymentId('pay_') } },
  'declared, id too short': { ...declared, info: { required: false, id: 'short' } },
  'declared, id with a bad character': { ...declared, info: { required: false, id: 'pay_0123456789abcdef!' } },
  'declared, id not a string': { ...declared, info: { required: false, id: 12345678901234567 } },
  'declared, required missing': { ...declared, info: { id: generatePaymentId('pay_') } },
  'declared, info not an object': { ...declared, info: 'x' },
  'declared schema after a JSON round trip': JSON.parse(
    JSON.stringify({ ...declared, info: { required: true, id: generatePaymentId('pay_') } }),
  ),
  'no schema, valid id': { info: { required: true, id: generatePaymentId('pay_') } },
  'no schema, id too long': { info: { required: true, id: 'x'.repeat(129) } },
  'not an object': 'payment-identifier',
};

for (const [name, extension] of Object.entries(asTheLibraryReadsIt)) {
  test(`paymentId agrees with extractAndValidatePaymentIdentifier: ${name}`, () => {
    const p = payload(extension);
    const expected = p.extensions?.[PAYMENT_IDENTIFIER] ? extractAndValidatePaymentIdentifier(p) : undefined;
    const got = gateway.paymentId(p);
    if (!expected) return assert.equal(got, undefined);
    if (!expected.validation.valid)
      return assert.ok(got && 'invalid' in got, `${JSON.stringify(got)} for ${JSON.stringify(expected)}`);
    assert.deepEqual(got, expected.id ? { id: expected.id } : undefined);
  });
}

const foreignSchemas: Record<string, unknown> = {
  // The library compiles this and runs its pattern: exponential backtracking on the id.
  'a catastrophic pattern': { type: 'object', properties: { id: { type: 'string', pattern: '^(a+)+b$' } } },
  // The library would answer "Schema validation failed: …" from compiling it; we never get that far.
  'a broken schema': { type: 'no such type' },
  'an invalid regular expression': { type: 'object', properties: { id: { type: 'string', pattern: '(' } } },
  'a looser schema the id meets': { type: 'object', required: ['required'] },
  'the declared schema with one keyword changed': {
    ...declared.schema,
    properties: { ...declared.schema.properties, id: { ...declared.schema.properties.id, maxLength: 20 } },
  },
};

for (const [name, schema] of Object.entries(foreignSchemas)) {
  test(`paymentId refuses a schema it did not declare, without compiling it: ${name}`, () => {
    // A valid id (the library checks the id first), on which the catastrophic pattern backtracks 2^24 times.
    const got = gateway.paymentId(payload({ info: { required: false, id: 'a'.repeat(24) }, schema }));
    assert.ok(got && 'invalid' in got, JSON.stringify(got));
    assert.match(got.invalid, /schema is not the one this service declares/);
  });
}
