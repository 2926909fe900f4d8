import type { ApiError } from '../errors/index.js';
import type { Offer, PaymentRefusal } from '../payments/index.js';
import { placeMessages as m } from './place-messages.js';

/** A payment refused for an offer, as the agent reads it: a 402 with the offer's terms and what to do. */
export function refusalError(offer: Offer, refusal: PaymentRefusal): Promise<ApiError> {
  const refuse = offer.paymentRequired;
  switch (refusal.refused) {
    case 'missing':
      return refuse('payment_required', m.payFirst(offer.amountAtomic));
    case 'unreadable':
      return refuse('payment_invalid', m.notAPayment);
    case 'other_terms':
      return refuse('payment_mismatch', m.otherTerms(offer.amountAtomic, offer.requirements));
    case 'wrong_resource':
      return refuse('payment_wrong_resource', m.wrongResource(refusal.paidFor, refusal.asked));
    case 'valid_too_long': {
      const { validUntil, maxTimeoutSeconds, slackSeconds, latest } = refusal;
      return refuse('payment_rejected', m.validTooLong(validUntil, maxTimeoutSeconds, slackSeconds, latest));
    }
    case 'cannot_be_valid':
      return refuse('payment_rejected', m.cannotBeValid(refusal.reason));
    case 'rejected':
      return refuse('payment_rejected', m.refused(refusal.reason, refusal.message));
  }
}
