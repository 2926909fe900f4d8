import { evaluateExtension, type Snapshot } from '../pricing/index.js';
import { atomicToAmount } from '../rules/index.js';

const print = (line: string) => process.stdout.write(`${line}\n`);

/**
 * catalog preview PRODUCT --extend-hours N: what extending a service of this product with these parameters (its
 * duration_hours: the hours already paid) by N hours costs, from the files on disk, as POST /services/{id}/extend
 * prices it.
 */
export async function previewExtension(
  snapshot: Snapshot,
  productId: string,
  parameters: Record<string, unknown>,
  hoursText: string,
  json: boolean,
): Promise<number> {
  const hours = Number(hoursText);
  if (!(hours > 0)) {
    process.stderr.write(`--extend-hours must be a positive number of hours, got ${hoursText}\n`);
    return 2;
  }
  if (typeof parameters.duration_hours !== 'number') {
    process.stderr.write('--extend-hours needs --param duration_hours=H: the hours the service has paid so far\n');
    return 2;
  }
  const input = {
    service_id: 'preview',
    product_id: productId,
    limits: parameters,
    paid_hours: parameters.duration_hours,
    extend_hours: hours,
  };
  const evaluation = await evaluateExtension(snapshot, input);
  if (evaluation.outcome === 'refused') {
    if (json) print(JSON.stringify({ priced: false, code: evaluation.code, message: evaluation.message }, null, 2));
    else process.stderr.write(`not priced (${evaluation.code}): ${evaluation.message}\n`);
    return 1;
  }
  const amount = atomicToAmount(evaluation.amount_atomic, 6);
  if (json) {
    print(
      JSON.stringify(
        {
          priced: true,
          content_hash: snapshot.hash,
          product_id: productId,
          paid_hours: input.paid_hours,
          extend_hours: hours,
          total_atomic: evaluation.total.output.total_atomic,
          paid_atomic: evaluation.paid.output.total_atomic,
          minimum_atomic: evaluation.minimum_atomic,
          maximum_atomic: evaluation.maximum_atomic,
          amount_atomic: evaluation.amount_atomic,
          amount,
        },
        null,
        2,
      ),
    );
    return 0;
  }
  print(`extend ${productId} from ${input.paid_hours} to ${input.paid_hours + hours} hours (+${hours})`);
  print(`  price for ${input.paid_hours + hours} h  ${evaluation.total.output.amount} USDC`);
  print(`  price for ${input.paid_hours} h (paid) ${evaluation.paid.output.amount} USDC`);
  print(
    `  charged ${amount} USDC (${evaluation.amount_atomic} atomic units; at least ` +
      `${atomicToAmount(evaluation.minimum_atomic, 6)}, at most ` +
      `${atomicToAmount(evaluation.maximum_atomic, 6)})`,
  );
  print(`  catalog on disk: ${snapshot.hash}`);
  return 0;
}
