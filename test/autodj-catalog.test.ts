import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { autoDjOffer, type Catalog, type Product } from '../src/catalog/index.js';
import { buildOpenApiDocument } from '../src/http/openapi.js';
import { serviceLimitsOf } from '../src/orders/service-limits.js';
import { type Snapshot } from '../src/pricing/index.js';
import { hasAutoDj } from '../src/services/has-autodj.js';
import { shippedSnapshot } from './support/shipped-snapshot.js';

// Which services have an AutoDJ is read from the catalog: no product is named in the code that decides it.
let snapshot: Snapshot;

before(async () => {
  snapshot = await shippedSnapshot();
});

const product = (id: string): Product => snapshot.catalog.byId.get(id)!.product;
const bought = (p: Product, configuration: Record<string, unknown>) => ({ limits: serviceLimitsOf(p, configuration) });
const stream = { duration_hours: 2, max_listeners: 10, bitrate_kbps: 64 };

describe('an AutoDJ from the catalog', () => {
  test('a product that includes one gives it to every service; one that offers it, when ordered', () => {
    const dj = { duration_hours: 2, bitrate_kbps: 64, storage_mb: 5 };
    assert.equal(hasAutoDj(bought(product('temporary-autodj'), dj)), true);
    assert.equal(hasAutoDj(bought(product('event-stream'), { ...stream, autodj: true })), true);
    assert.equal(hasAutoDj(bought(product('event-stream'), { ...stream, autodj: false })), false);
    assert.equal(hasAutoDj(bought(product('event-stream'), stream)), false);
    assert.equal(hasAutoDj(bought(product('instant-stream'), stream)), false);
    assert.equal(hasAutoDj(bought(product('radio-local'), {})), true, 'a subscription with autodj in its limits');
    assert.equal(hasAutoDj(bought(product('radio-directo'), {})), false);
  });

  test('the flag, not the product id: an edited catalog gives or takes the AutoDJ', () => {
    const withDj = { ...product('instant-stream'), limits: { ...product('instant-stream').limits, autodj: true } };
    assert.equal(hasAutoDj(bought(withDj, stream)), true);
    const { autodj: _, ...without } = product('temporary-autodj').limits;
    const noDj = { ...product('temporary-autodj'), limits: without };
    assert.equal(hasAutoDj(bought(noDj, { duration_hours: 2, bitrate_kbps: 64, storage_mb: 5 })), false);
  });

  test("agents read the products that come with one from the catalog, in the OpenAPI upload operation's summary", () => {
    assert.equal(autoDjOffer(snapshot.catalog), 'temporary-autodj, or event-stream ordered with autodj: true');
    const hidden: Catalog = {
      ...snapshot.catalog,
      products: snapshot.catalog.products.map((entry) =>
        entry.product.id === 'temporary-autodj'
          ? { ...entry, product: { ...entry.product, orderable: { human: false, agent: false } } }
          : entry,
      ),
    };
    assert.equal(autoDjOffer(hidden), 'event-stream ordered with autodj: true');
    const document = buildOpenApiDocument(snapshot, 'test') as any;
    assert.equal(
      document.paths['/services/{service_id}/files/{name}'].put.summary,
      'Upload an audio file for AutoDJ (temporary-autodj, or event-stream ordered with autodj: true). The body is the file itself.',
    );
  });
});
