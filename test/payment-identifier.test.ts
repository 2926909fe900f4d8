import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FacilitatorClient } from '@x402/core/server';
import type { PaymentPayload } from '@x402/core/types';
import {
  declarePaymentIdentifierExtension, extractAndValidatePaymentIdentifier, generatePaymentId, PAYMENT_IDENTIFIER,
} from '@x402/extensions/payment-identifier';
import { PaymentGateway } from '../src/payments/index.js';

// paymentId() skips compiling the schema a payload carries when it is the declared one (CPU per paid request): it must
// still answer exactly what the library's extractAndValidatePaymentIdentifier answers, for any extension sent.
const facilitator = { verify: async () => ({}), settle: async () => ({}), getSupported: async () => ({ kinds: [], extensions: [], signers: {} }) } as unknown as FacilitatorClient;
const gateway = new PaymentGateway(facilitator, { network: 'eip155:8453', asset: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913', payTo: '0x0000000000000000000000000000000000000001', maxTimeoutSeconds: 300 });
const declared = declarePaymentIdentifierExtension(false);
const payload = (extension: unknown): PaymentPayload => ({ x402Version: 2, payload: {}, accepted: {}, ...(extension !== undefined && { extensions: { [PAYMENT_IDENTIFIER]: extension } }) } as unknown as PaymentPayload);

const cases: Record<string, unknown> = {
  'no extension': undefined,
  'declared, no id': { ...declared },
  'declared, valid id': { ...declared, info: { required: false, id: generatePaymentId('pay_') } },
  'declared, id too short': { ...declared, info: { required: false, id: 'short' } },
  'declared, id with a bad character': { ...declared, info: { required: false, id: 'pay_0123456789abcdef!' } },
  'declared, id not a string': { ...declared, info: { required: false, id: 12345678901234567 } },
  'declared, required missing': { ...declared, info: { id: generatePaymentId('pay_') } },
  'declared, info not an object': { ...declared, info: 'x' },
  'no schema, valid id': { info: { required: true, id: generatePaymentId('pay_') } },
  'another schema the id breaks': { info: { required: false, id: 'pay_0123456789abcdef0123456789' }, schema: { ...declared.schema, properties: { ...declared.schema.properties, id: { type: 'string', maxLength: 20 } } } },
  'another schema the id meets': { info: { required: false, id: 'pay_0123456789abcdef' }, schema: { type: 'object', required: ['required'] } },
  'a broken schema': { info: { required: false }, schema: { type: 'no such type' } },
  'not an object': 'payment-identifier',
};

for (const [name, extension] of Object.entries(cases)) {
  test(`paymentId agrees with extractAndValidatePaymentIdentifier: ${name}`, () => {
    const p = payload(extension);
    const expected = p.extensions?.[PAYMENT_IDENTIFIER] ? extractAndValidatePaymentIdentifier(p) : undefined;
    const got = gateway.paymentId(p);
    if (!expected) return assert.equal(got, undefined);
    if (!expected.validation.valid) return assert.deepEqual(got, { invalid: (expected.validation.errors ?? ['invalid']).join('; ') });
    assert.deepEqual(got, expected.id ? { id: expected.id } : undefined);
  });
}
