import assert from 'node:assert/strict';
import { createPublicKey } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import {
  decodeSignedOffers,
  extractOffersFromPaymentRequired,
  extractReceiptFromResponse,
  verifyOfferSignatureJWS,
  verifyReceiptMatchesOffer,
  verifyReceiptSignatureJWS,
  type JWSSignedReceipt,
} from '@x402/extensions/offer-receipt';
import { request, startService, type Service } from './support/service.js';
import { decodePaymentRequiredHeader, TestWallet } from './support/wallet.js';
import { buyerWallet } from './support/dev-file.js';

// An agent keeps proof of what it bought: a signed offer with every 402 and a signed receipt with the order,
// checked here with the offer-receipt extension's own client-side helpers.

let service: Service;
let wallet: TestWallet;
before(async () => {
  service = await startService();
  wallet = await buyerWallet(service);
});
after(() => service?.stop());

const body = {
  product_id: 'instant-stream',
  email: 'agent@example.com',
  station_name: 'Receipt FM',
  parameters: { duration_hours: 2, max_listeners: 3, bitrate_kbps: 64 },
};

describe('offer-receipt', () => {
  test('the 402 carries an operator-signed offer for exactly the requirements, and the order a receipt naming the order and its evaluation', async () => {
    const ask = await request(service, 'POST', '/orders', { body, headers: { 'idempotency-key': 'receipt-1' } });
    const required = decodePaymentRequiredHeader(ask.headers.get('payment-required')!);
    const [offer] = decodeSignedOffers(extractOffersFromPaymentRequired(required));
    assert.ok(offer, 'a signed offer');
    const offered = await verifyOfferSignatureJWS(offer.signedOffer as never);
    assert.equal(offered.amount, required.accepts[0].amount);
    assert.equal(offered.payTo, required.accepts[0].payTo);
    assert.equal(offered.resourceUrl, required.resource.url);
    assert.ok(offered.validUntil > Date.now() / 1000 + 60, 'the offer is valid long enough to pay it');

    const paid = await fetch(`${service.baseUrl}/orders`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${service.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': 'receipt-1',
        'payment-signature': await wallet.pay(ask.headers.get('payment-required')!),
      },
      body: JSON.stringify(body),
    });
    const order = await paid.json();
    assert.equal(paid.status, 200, JSON.stringify(order));
    const receipt = extractReceiptFromResponse(paid) as JWSSignedReceipt;
    assert.equal(receipt?.format, 'jws');
    const stated = (await verifyReceiptSignatureJWS(receipt)) as unknown as Record<string, unknown>;
    assert.equal(stated.orderId, order.order.id);
    assert.equal(stated.transaction, order.order.payment.transaction);
    assert.equal(stated.amount, order.order.amount.amount_atomic);
    assert.equal(stated.evaluationId, order.order.evaluation_id);
    assert.match(String(stated.evaluationHash), /^sha256:[0-9a-f]{64}$/);
    assert.ok(
      verifyReceiptMatchesOffer(receipt, offer, [wallet.address]),
      'the receipt matches the offer the agent paid',
    );
    assert.equal(extractOffersFromPaymentRequired(required)[0].format, 'jws');
    assert.equal(
      JSON.parse(Buffer.from(receipt.signature.split('.')[0], 'base64url').toString()).kid,
      JSON.parse(
        Buffer.from((offer.signedOffer as { signature: string }).signature.split('.')[0], 'base64url').toString(),
      ).kid,
      'one operator key signs both',
    );

    // The key that signed it is the operator key the service publishes with its signed audit head.
    const published = await request(service, 'GET', '/audit/head', { auth: false });
    const kid = JSON.parse(Buffer.from(receipt.signature.split('.')[0], 'base64url').toString()).kid as string;
    const signedWith = JSON.parse(Buffer.from(kid.replace('did:jwk:', ''), 'base64url').toString());
    assert.equal(
      signedWith.x,
      createPublicKey(published.body.public_key).export({ format: 'jwk' }).x,
      'signed with the published operator key',
    );

    // The evaluation it names is the stored record that priced the order.
    const shown = await service.cli(['audit', 'show', String(stated.evaluationId)]);
    assert.equal(shown.code, 0, shown.stderr);
    assert.ok(shown.stdout.includes(String(stated.evaluationHash)), "the receipt names the audit record's hash");

    // A replay hands back the same receipt, byte for byte.
    const again = await fetch(`${service.baseUrl}/orders`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${service.apiKey}`,
        'content-type': 'application/json',
        'idempotency-key': 'receipt-1',
        'payment-signature': 'ignored-on-replay',
      },
      body: JSON.stringify(body),
    });
    assert.equal(again.status, 200);
    assert.equal((extractReceiptFromResponse(again) as JWSSignedReceipt).signature, receipt.signature);

    // A receipt whose claims were edited no longer verifies.
    const [header, claims, signature] = receipt.signature.split('.');
    const edited = Buffer.from(
      JSON.stringify({ ...JSON.parse(Buffer.from(claims, 'base64url').toString()), amount: '1' }),
    ).toString('base64url');
    await assert.rejects(verifyReceiptSignatureJWS({ format: 'jws', signature: `${header}.${edited}.${signature}` }));
  });
});
