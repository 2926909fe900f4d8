export {
  PaymentGateway,
  type DiscoveryDeclaration,
  type PaidResource,
  type PaymentTerms,
  type Authorization,
  type PaymentPayload,
  type PaymentRequirements,
  type SettleResponse,
  type VerifyResponse,
} from './payment-gateway.js';
export {
  AuthorizationLedger,
  type ExpectedPayment,
  type PaymentEvidence,
  type TokenLog,
  type TransferProof,
} from './authorization-ledger.js';
export {
  createFacilitator,
  embeddedFacilitatorConfig,
  type Facilitator,
  type FacilitatorConfig,
} from './facilitator.js';
export { OfferReceipts, type OperatorKey, type ReceiptFacts, type RefundReceiptFacts } from './receipts.js';
export { SettledReceipts } from './settled-receipts.js';
export { ChainChecks, DEFAULT_CHAIN_CHECK_LIMITS, type ChainCheckLimits, type ChainNode } from './chain-checks.js';
export { PaymentPrecheck, type CodeLookup } from './payment-precheck.js';
export { TRANSFER_WITH_AUTHORIZATION_TYPES } from './transfer-digest.js';
export type { SentPayment } from './sent-payment.js';
export { declareRefundExtension, REFUND_EXTENSION, type RefundTermsInfo } from './refund-extension.js';
export {
  Checkout,
  VALID_UNTIL_SLACK_SECONDS,
  type CheckoutOptions,
  type PaymentRecord,
  type SettleAnswer,
} from './checkout.js';
export {
  evidenceOnChain,
  expiredUnusedOnChain,
  takenOnChain,
  type PaymentOnChain,
} from './payment-on-chain.js';
export { isRefusal, type Offer, type PaymentRefusal, type VerifiedPayment } from './payment-refusal.js';
export { AUTHORIZATION_FIELDS } from './payment-shape.js';
export type { SettlementRoute } from './payment-gateway.js';
