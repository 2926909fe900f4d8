import { userInfo } from 'node:os';
import { RefundStore } from '../refunds/index.js';
import { option, print, withDatabase, type Command } from './command-line.js';

export const refundsCommands: Record<string, Command> = {
  async 'refunds list'(config, args) {
    const rows = await withDatabase(config, (db) => new RefundStore(db).list(Number(option(args, '--limit') ?? 100)));
    print(
      rows.map((r) => ({
        id: r.id,
        status: r.status,
        reason: r.reason,
        part_of: r.part_of,
        amount_atomic: r.amount_atomic,
        to: r.payer,
        service_id: r.service_id,
        order_ids: r.order_ids,
        waits_for_operator: r.status === 'pending' && r.needs_approval && !r.approved_at,
        pending_reason: r.pending_reason,
        transaction: r.transaction,
        created_at: r.created_at.toISOString(),
        sent_at: r.sent_at?.toISOString() ?? null,
      })),
    );
    return 0;
  },

  async 'refunds approve'(config, args) {
    const id = args.find((a) => !a.startsWith('--'));
    if (!id) {
      process.stderr.write('refunds approve needs ID\n');
      return 2;
    }
    const approved = await withDatabase(config, (db) =>
      new RefundStore(db).approve(id, userInfo().username || 'operator'),
    );
    const sent = approved.map((r) => `${r.amount_atomic} atomic USDC to ${r.payer}`).join(', ');
    print(
      approved.length
        ? `approved ${id}: ${sent}; the refund worker sends it on its next pass`
        : `no refund ${id} waiting for approval (refunds list shows them)`,
    );
    return approved.length ? 0 : 1;
  },
};
